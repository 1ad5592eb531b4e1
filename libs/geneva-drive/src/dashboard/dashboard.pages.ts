import { CSRF_FIELD } from './csrf.js';
import { html, type SafeHtml } from './html.js';
import { OPERATOR_ACTIONS, type OperatorAction } from '../operator/workflow-actions.js';
import { LIST_FILTER_KEYS, WAITING_KEYS_LIMIT, type ChildView, type DetailCursors, type ExecutionView, type ListFilters, type Overview, type SignalView, type WaitingKeys, type WorkflowDetail, type WorkflowPage } from '../operator/workflow-reader.js';
import { WORKFLOW_STATES, type WorkflowState } from '../state/workflow-state.js';

/** What every page needs: where the dashboard is mounted, and a message to show on top. */
export interface PageContext {
  base: string;
  message?: { kind: 'error' | 'notice'; text: string };
}

/** What an action page needs besides the context. */
export interface ActionContext {
  csrfToken: string;
  readOnly: boolean;
}

export const DONE_MESSAGES: Record<OperatorAction | 'signal' | 'resume-at', string> = {
  pause: 'Workflow paused.',
  resume: 'Workflow resumed.',
  skip: 'Step skipped.',
  cancel: 'Workflow canceled.',
  signal: 'Signal sent.',
  'resume-at': 'Workflow resumed at the chosen step.',
};

const CONFIRMATIONS: Record<OperatorAction, string> = {
  pause: 'Pause this workflow?',
  resume: 'Resume this workflow?',
  skip: 'Skip the current step?',
  cancel: 'Cancel this workflow for good?',
};

function layout(title: string, ctx: PageContext, body: SafeHtml): string {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · geneva-drive</title>
<link rel="stylesheet" href="${ctx.base}/assets/dashboard.css"><script src="${ctx.base}/assets/dashboard.js" defer></script></head>
<body><header><span class="brand">geneva-drive</span><a href="${ctx.base || '/'}">Overview</a><a href="${ctx.base}/workflows">Workflows</a><a href="${ctx.base}/flow-keys">Concurrency keys</a></header>
<main>${ctx.message ? html`<div class="message ${ctx.message.kind}" role="${ctx.message.kind === 'error' ? 'alert' : 'status'}">${ctx.message.text}</div>` : ''}
${body}</main></body></html>`.value;
}

const state = (value: string) => html`<span class="state state-${value}">${value}</span>`;
const time = (value: Date | null | undefined) => (value ? html`<time datetime="${value}">${value.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')}</time>` : html`<span class="muted">—</span>`);
const workflowLink = (ctx: PageContext, id: string) => html`<a href="${ctx.base}/workflows/${encodeURIComponent(id)}">#${id}</a>`;

function listHref(ctx: PageContext, filters: ListFilters): string {
  const params = new URLSearchParams();
  for (const key of LIST_FILTER_KEYS) if (filters[key]) params.set(key, filters[key]!);
  const query = params.toString();
  return `${ctx.base}/workflows${query ? `?${query}` : ''}`;
}

function duration(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function overviewPage(overview: Overview, ctx: PageContext): string {
  const { gauges } = overview;
  const types = [...new Set(overview.counts.map((row) => row.type))];
  const count = (type: string, s: string) => overview.counts.find((row) => row.type === type && row.state === s)?.count ?? 0;
  return layout('Overview', ctx, html`<h1>Overview</h1>
<div class="cards">
  <div class="card"><span class="muted">Waiting for a signal</span><b data-gauge="waiting">${gauges.waiting.total}</b></div>
  <div class="card${gauges.waitingOverdue?.total ? ' alert' : ''}"><span class="muted">Waiting overdue</span><b data-gauge="waiting-overdue">${gauges.waitingOverdue?.total ?? '—'}</b></div>
  <div class="card${gauges.stuckInProgress ? ' alert' : ''}"><span class="muted">Stuck in progress</span><b data-gauge="stuck-in-progress">${gauges.stuckInProgress}</b></div>
  <div class="card${gauges.stuckScheduled ? ' alert' : ''}"><span class="muted">Stuck scheduled</span><b data-gauge="stuck-scheduled">${gauges.stuckScheduled}</b></div>
</div>
<h2>Workflows by type and state</h2>
<table id="counts"><thead><tr><th>type</th>${WORKFLOW_STATES.map((s) => html`<th>${s}</th>`)}</tr></thead><tbody>
${types.length === 0 ? html`<tr><td colspan="6" class="muted">No workflows yet.</td></tr>` : ''}
${types.map((type) => html`<tr><td>${type}</td>${WORKFLOW_STATES.map((s) => html`<td>${count(type, s) ? html`<a href="${listHref(ctx, { type, state: s })}">${count(type, s)}</a>` : html`<span class="muted">0</span>`}</td>`)}</tr>`)}
</tbody></table>
<h2>Recent failures</h2>
<table id="failures"><thead><tr><th>workflow</th><th>type</th><th>step</th><th>error</th><th>failed at</th></tr></thead><tbody>
${overview.recentFailures.length === 0 ? html`<tr><td colspan="5" class="muted">None.</td></tr>` : ''}
${overview.recentFailures.map((row) => html`<tr><td>${workflowLink(ctx, row.workflowId)}</td><td>${row.type}</td><td>${row.stepName}</td><td><b>${row.errorClassName}</b> ${row.errorMessage}</td><td>${time(row.failedAt)}</td></tr>`)}
</tbody></table>
<h2>Waiting longest</h2>
<table id="longest-waiting"><thead><tr><th>workflow</th><th>type</th><th>step</th><th>waiting since</th></tr></thead><tbody>
${overview.longestWaiting.length === 0 ? html`<tr><td colspan="4" class="muted">Nothing is waiting.</td></tr>` : ''}
${overview.longestWaiting.map((row) => html`<tr><td>${workflowLink(ctx, row.workflowId)}</td><td>${row.type}</td><td>${row.stepName}</td><td>${time(row.waitingSince)}</td></tr>`)}
</tbody></table>`);
}

/** The concurrency keys executions wait for, most waiters first. */
export function flowKeysPage(view: WaitingKeys, ctx: PageContext): string {
  return layout('Concurrency keys', ctx, html`<h1>Concurrency keys with waiters</h1>
${view.flowControl ? '' : html`<p class="muted" id="flow-control-missing">The flow-control migration has not run: no step waits for a concurrency key.</p>`}
<table id="flow-keys"><thead><tr><th>key</th><th>holding</th><th>waiting</th><th>oldest waiter due since</th><th>waited</th></tr></thead><tbody>
${view.keys.length === 0 ? html`<tr><td colspan="5" class="muted">No key has waiters.</td></tr>` : ''}
${view.keys.map((row) => html`<tr data-flow-key="${row.key}"><td>${row.key}</td><td>${row.holding}</td><td>${row.waiting}</td><td>${time(row.oldestWaiterDueAt)}</td><td>${duration(row.oldestWaitMs)}</td></tr>`)}
</tbody></table>
${view.more ? html`<p class="muted" id="flow-keys-more">The ${WAITING_KEYS_LIMIT} keys with the most waiters are shown.</p>` : ''}`);
}

export function listPage(page: WorkflowPage, filters: ListFilters, choices: { types: string[]; signalNames: string[] }, ctx: PageContext): string {
  const text = (key: keyof ListFilters, label: string, type = 'text') =>
    html`<label>${label}<input type="${type}" name="${key}" value="${filters[key] ?? ''}"></label>`;
  const select = (key: keyof ListFilters, label: string, options: readonly string[]) =>
    html`<label>${label}<select name="${key}"><option value="">any</option>${options.map((o) => html`<option${filters[key] === o ? html` selected` : ''}>${o}</option>`)}</select></label>`;
  return layout('Workflows', ctx, html`<h1>Workflows</h1>
<form class="filters" method="get" action="${ctx.base}/workflows">
  ${text('q', 'workflow or hero id')}
  ${select('type', 'type', choices.types)}
  ${select('state', 'state', WORKFLOW_STATES)}
  ${text('heroType', 'hero type')}
  ${text('heroId', 'hero id')}
  ${select('waitingFor', 'waiting for signal', choices.signalNames)}
  ${text('failedStep', 'failed step')}
  ${text('createdFrom', 'created from')}${text('createdTo', 'created to')}
  ${text('updatedFrom', 'updated from')}${text('updatedTo', 'updated to')}
  <button type="submit">Filter</button> <a href="${ctx.base}/workflows">clear</a>
</form>
<table id="workflows"><thead><tr><th>id</th><th>type</th><th>state</th><th>hero</th><th>step</th><th>created</th><th>updated</th></tr></thead><tbody>
${page.rows.length === 0 ? html`<tr><td colspan="7" class="muted">No workflow matches.</td></tr>` : ''}
${page.rows.map((row) => html`<tr data-workflow-id="${row.id}"><td>${workflowLink(ctx, row.id)}</td><td>${row.type}</td><td>${state(row.state)}</td><td>${row.heroType} ${row.heroId}</td><td>${row.nextStepName ?? '—'}</td><td>${time(row.createdAt)}</td><td>${time(row.updatedAt)}</td></tr>`)}
</tbody></table>
${page.nextAfter ? html`<p><a rel="next" href="${listHref(ctx, { ...filters, after: page.nextAfter })}">Next page →</a></p>` : ''}`);
}

/** A link to the JSON holding the whole value, under a preview that was cut. */
function fullValueLink(truncated: boolean, href: string, label: string): SafeHtml | '' {
  return truncated ? html`<br><a class="full-value" href="${href}">${label}</a>` : '';
}

/** The JSON API's URL of a workflow, under which its signals and executions are served whole. */
const apiBase = (ctx: PageContext, id: string) => `${ctx.base}/api/workflows/${encodeURIComponent(id)}`;

/** A gravestone's badge, or the mark of a step the class does not know at all. */
function stepBadge(status: ExecutionView['stepStatus']): SafeHtml | '' {
  if (status === 'removed') return html` <span class="badge badge-removed" title="declared in removedSteps: skipped, never run">removed</span>`;
  if (status === 'not-defined') return html` <span class="badge badge-not-defined" title="neither defined nor declared removed by the class">not defined</span>`;
  return '';
}

/** The execution's concurrency key: the one it waits for while `scheduled`, else the one it holds or held. */
function flowKeyCell(execution: ExecutionView): SafeHtml | string {
  if (execution.flowKey === null) return '—';
  if (execution.state === 'scheduled') return html`<span class="flow-key waiting">waiting for a slot of ${execution.flowKey}</span>`;
  return html`<span class="flow-key">${execution.flowKey}</span>`;
}

function executionRow(execution: ExecutionView, workflowBase: string): SafeHtml {
  const whole = `${workflowBase}/executions/${encodeURIComponent(execution.id)}`;
  return html`<tr data-execution-id="${execution.id}" data-state="${execution.state}">
<td>${execution.id}</td><td>${execution.stepName}${stepBadge(execution.stepStatus)}</td><td>${state(execution.state)}</td><td>${execution.outcome ?? '—'}</td>
<td>${time(execution.scheduledFor)}</td><td>${time(execution.startedAt)}</td><td>${time(execution.finishedAt)}</td><td>${duration(execution.durationMs)}</td>
<td>${execution.errorClassName ? html`<b>${execution.errorClassName}</b> <span class="error-message">${execution.errorMessage}</span>
${execution.errorBacktrace ? html`<details><summary>backtrace</summary><pre>${execution.errorBacktrace}</pre></details>` : ''}${fullValueLink(execution.errorTruncated, whole, 'full error')}` : '—'}</td>
<td>${execution.cursor === null ? '—' : html`<pre class="cursor">${execution.cursor.text}</pre>${fullValueLink(execution.cursor.truncated, whole, 'full cursor')}`}</td>
<td>${execution.reattemptReason ?? '—'}</td>
<td>${execution.signalId ? html`<a href="#signal-${execution.signalId}">signal ${execution.signalId}</a>` : '—'}${execution.waitingSince ? html`<br><span class="muted">parked since</span> ${time(execution.waitingSince)}` : ''}</td>
<td>${flowKeyCell(execution)}</td>
</tr>`;
}

function signalRow(signal: SignalView, workflowBase: string): SafeHtml {
  return html`<tr id="signal-${signal.id}" data-signal-id="${signal.id}" data-state="${signal.state}">
<td>${signal.id}</td><td>${signal.name}</td><td>${signal.idempotencyKey ?? '—'}</td><td>${state(signal.state)}</td>
<td>${signal.claimed} / ${signal.consumed}</td><td><pre class="payload">${signal.payload.text}</pre>${fullValueLink(signal.payload.truncated, `${workflowBase}/signals/${encodeURIComponent(signal.id)}`, 'full payload')}</td>
<td>${time(signal.createdAt)}</td><td>${signal.claimedBy.length ? signal.claimedBy.join(', ') : '—'}</td>
</tr>`;
}

function childRow(child: ChildView, ctx: PageContext): SafeHtml {
  return html`<tr data-child-id="${child.id}" data-state="${child.state}">
<td>${workflowLink(ctx, child.id)}</td><td>${child.type}</td><td>${child.parentStepName ?? '—'}</td><td>${child.key ?? '—'}</td><td>${state(child.state)}</td>
<td>${child.result === null ? '—' : html`<pre class="result">${child.result.text}</pre>${fullValueLink(child.result.truncated, apiBase(ctx, child.id), 'full result')}`}</td>
<td>${child.hasChildren ? html`<a class="grandchildren" href="${ctx.base}/workflows/${encodeURIComponent(child.id)}#children">its children →</a>` : '—'}</td><td>${time(child.updatedAt)}</td>
</tr>`;
}

/** "3 finished, 2 ready": the children's counts by state, in the states' order. */
function childCounts(byState: Partial<Record<WorkflowState, number>>): SafeHtml {
  const present = WORKFLOW_STATES.filter((s) => byState[s]);
  return html`${present.map((s, i) => html`${i > 0 ? ', ' : ''}<span data-child-count="${s}">${byState[s]}</span> ${s}`)}`;
}

/**
 * The workflow among its own: its parent (one level up), itself, and its children (one level down,
 * as counts by state; each child of the list below links to its own children).
 */
function familyTree(detail: WorkflowDetail, ctx: PageContext): SafeHtml | '' {
  const wf = detail.workflow;
  const { parent, childCounts: counts } = detail;
  if (!parent && counts.total === 0) return '';
  const self = html`<li class="self"><b>${wf.type} #${wf.id}</b> ${state(wf.state)}${counts.total > 0 ? html`<ul><li><a href="#children">${counts.total} ${counts.total === 1 ? 'child' : 'children'}</a>: ${childCounts(counts.byState)}</li></ul>` : ''}</li>`;
  return html`<h2>Family</h2>
<ul class="tree" id="family">${parent ? html`<li>${workflowLink(ctx, parent.id)} ${parent.type ?? html`<span class="muted">(purged)</span>`} ${parent.state ? state(parent.state) : ''}<ul>${self}</ul></li>` : self}</ul>`;
}

function childrenSection(detail: WorkflowDetail, ctx: PageContext, at: DetailCursors): SafeHtml | '' {
  if (detail.childCounts.total === 0) return '';
  return html`<h2 id="children">Children (${detail.childCounts.total})</h2>
<p class="child-counts">${childCounts(detail.childCounts.byState)}</p>
<table id="children-table"><thead><tr><th>id</th><th>type</th><th>started by step</th><th>key</th><th>state</th><th>result</th><th>children</th><th>updated</th></tr></thead><tbody>
${detail.children.map((child) => childRow(child, ctx))}
</tbody></table>
${detail.childrenNextAfter ? nextPageLink(ctx, detail, { ...at, childrenAfter: detail.childrenNextAfter }, 'next-children', 'Next children') : ''}`;
}

function actionForms(detail: WorkflowDetail, ctx: PageContext, actions: ActionContext): SafeHtml {
  if (actions.readOnly) return html``;
  const base = `${ctx.base}/workflows/${encodeURIComponent(detail.workflow.id)}`;
  const csrf = html`<input type="hidden" name="${CSRF_FIELD}" value="${actions.csrfToken}">`;
  return html`<div class="actions">
${OPERATOR_ACTIONS.map((action) => html`<form method="post" action="${base}/${action}" data-confirm="${CONFIRMATIONS[action]}">${csrf}<button type="submit" name="action" value="${action}"${action === 'cancel' ? html` class="danger"` : ''}>${action}</button></form>`)}
</div>
${detail.signalNames.length > 0 ? html`<form class="signal-form" method="post" action="${base}/signal" data-confirm="Send this signal?">${csrf}
  <label>signal<br><select name="name">${detail.signalNames.map((name) => html`<option>${name}</option>`)}</select></label>
  <label>payload (JSON)<br><textarea name="payload" placeholder="{}"></textarea></label>
  <label>idempotency key (optional)<br><input type="text" name="idempotencyKey"></label>
  <button type="submit">Send signal</button>
</form>` : ''}
${resumeAtForm(detail, base, csrf)}`;
}

/**
 * "Resume at step…" on a paused workflow: one of the steps its class defines (gravestones are not
 * offered), the one it stands at chosen first. A ready workflow is paused first, so that its step
 * does not start while the operator chooses.
 */
function resumeAtForm(detail: WorkflowDetail, base: string, csrf: SafeHtml): SafeHtml | '' {
  const steps = detail.steps?.filter((step) => !step.removed) ?? [];
  if (detail.workflow.state !== 'paused' || steps.length === 0) return '';
  return html`<form class="resume-at-form" method="post" action="${base}/resume-at" data-confirm="Resume this workflow at the chosen step? Its current step is canceled.">${csrf}
  <label>resume at step<br><select name="step">${steps.map((step) => html`<option${step.position === 'current' ? html` selected` : ''}>${step.name}</option>`)}</select></label>
  <button type="submit">Resume at step</button>
</form>`;
}

/** The workflow page again, one list moved on to its next page and the others kept where they are. */
function nextPageLink(ctx: PageContext, detail: WorkflowDetail, cursors: DetailCursors, id: string, label: string): SafeHtml {
  const params = new URLSearchParams(Object.entries(cursors).filter((entry): entry is [string, string] => typeof entry[1] === 'string'));
  return html`<p><a id="${id}" href="${ctx.base}/workflows/${encodeURIComponent(detail.workflow.id)}?${params.toString()}">${label} →</a></p>`;
}

export function workflowPage(detail: WorkflowDetail, ctx: PageContext, actions: ActionContext, at: DetailCursors = {}): string {
  const wf = detail.workflow;
  const api = apiBase(ctx, wf.id);
  return layout(`Workflow ${wf.id}`, ctx, html`<h1>${wf.type} #${wf.id} ${state(wf.state)}</h1>
<dl class="facts">
  <dt>hero</dt><dd id="hero">${wf.heroType} ${wf.heroId}</dd>
  ${detail.parent ? html`<dt>parent</dt><dd id="parent">${workflowLink(ctx, detail.parent.id)} <span class="muted">step</span> ${detail.parent.stepName ?? '—'} <span class="muted">key</span> <span id="child-key">${detail.parent.key ?? '—'}</span></dd>` : ''}
  ${wf.result ? html`<dt>result</dt><dd><pre class="result" id="result">${wf.result.text}</pre></dd>` : ''}
  <dt>current step</dt><dd>${wf.currentStepName ?? wf.nextStepName ?? '—'}</dd>
  ${detail.waitingSince ? html`<dt>waiting since</dt><dd id="waiting-since">${time(detail.waitingSince)}</dd>` : ''}
  <dt>created</dt><dd>${time(wf.createdAt)}</dd><dt>started</dt><dd>${time(wf.startedAt)}</dd>
  <dt>updated</dt><dd>${time(wf.updatedAt)}</dd><dt>finished</dt><dd>${time(wf.finishedAt)}</dd>
</dl>
<h2>Steps</h2>
${detail.steps ? html`<ol class="steps">${detail.steps.map((step) => html`<li class="${step.position}${step.removed ? ' removed' : ''}">${step.name}${step.removed ? stepBadge('removed') : ''}${step.transactional ? html` <span class="badge" title="its writes through this.manager commit with its outcome">transactional</span>` : ''}${step.waitFor ? html` <span class="muted">waits for ${step.waitFor}</span>` : ''}</li>`)}</ol>` : html`<p class="muted">This application has no class for ${wf.type}.</p>`}
${familyTree(detail, ctx)}
${actionForms(detail, ctx, actions)}
<h2>Executions (oldest first)</h2>
<table id="executions"><thead><tr><th>id</th><th>step</th><th>state</th><th>outcome</th><th>scheduled</th><th>started</th><th>finished</th><th>duration</th><th>error</th><th>cursor</th><th>reattempt reason</th><th>signal</th><th>concurrency key</th></tr></thead><tbody>
${detail.executions.map((execution) => executionRow(execution, api))}
</tbody></table>
${detail.executionsNextAfter ? nextPageLink(ctx, detail, { ...at, executionsAfter: detail.executionsNextAfter }, 'next-executions', 'Next executions') : ''}
<h2>Signals</h2>
<table id="signals"><thead><tr><th>id</th><th>name</th><th>key</th><th>state</th><th>claimed / consumed</th><th>payload</th><th>arrived</th><th>claimed by</th></tr></thead><tbody>
${detail.signals.length === 0 ? html`<tr><td colspan="8" class="muted">No signals.</td></tr>` : ''}
${detail.signals.map((signal) => signalRow(signal, api))}
</tbody></table>
${detail.signalsNextAfter ? nextPageLink(ctx, detail, { ...at, signalsAfter: detail.signalsNextAfter }, 'next-signals', 'Next signals') : ''}
${childrenSection(detail, ctx, at)}`);
}

export function errorPage(status: number, text: string, ctx: PageContext): string {
  return layout(`Error ${status}`, { ...ctx, message: { kind: 'error', text } }, html`<p><a href="${ctx.base}/workflows">Back to the workflows</a></p>`);
}
