import { readFile } from 'node:fs/promises';
import type { INestApplicationContext } from '@nestjs/common';
import { DeployCheck, deployCheckLines } from '../client/deploy-check.js';
import { UnknownWorkflowError } from '../errors/unknown-workflow.error.js';
import { QUEUE_PORT } from '../geneva-drive.constants.js';
import { HousekeepingService } from '../housekeeping/housekeeping.service.js';
import { ManualQueueAdapter } from '../queue/manual-queue.adapter.js';
import { WorkflowService } from '../client/workflow.service.js';
import { WorkflowActions } from '../operator/workflow-actions.js';
import { WorkflowCatalog } from '../operator/workflow-catalog.js';
import { WAITING_KEYS_LIMIT, WorkflowReader, type ExecutionView, type ListFilters, type WaitingKeys, type WorkflowDetail } from '../operator/workflow-reader.js';
import { WORKFLOW_STATES } from '../state/workflow-state.js';
import { CliUsageError } from './cli-usage.error.js';
import { terminalSafe, tty } from './terminal-text.js';

/** A parsed command line: the command, its positionals and its options. */
export interface CliInvocation {
  command: string;
  args: string[];
  options: Record<string, string | boolean | undefined>;
}

/** What a command prints: `json` with --json, else `text`; `exitCode` 0 unless the command says otherwise. */
export interface CliResult {
  json: unknown;
  text: string;
  exitCode?: number;
}

export const COMMANDS = ['list', 'show', 'signal', 'pause', 'resume', 'skip', 'cancel', 'resume-at', 'check', 'housekeeping', 'gauges', 'flow-keys'] as const;

const LIST_OPTIONS: Record<string, keyof ListFilters> = {
  type: 'type',
  state: 'state',
  'hero-type': 'heroType',
  'hero-id': 'heroId',
  'waiting-for': 'waitingFor',
  'failed-step': 'failedStep',
  'created-from': 'createdFrom',
  'created-to': 'createdTo',
  'updated-from': 'updatedFrom',
  'updated-to': 'updatedTo',
  search: 'q',
  after: 'after',
};
export const LIST_OPTION_NAMES = Object.keys(LIST_OPTIONS);

/** How `show` marks an execution's step the class declares removed, or does not know at all. */
const STEP_MARK: Record<string, string> = { removed: ' (removed)', 'not-defined': ' (not defined)' };

const iso = (date: Date | null | undefined) => (date ? date.toISOString() : '-');

/** `--limit N`: rows per page of `list`, of each of `show`'s lists, and keys of `flow-keys` (each with its default). */
function limit(invocation: CliInvocation, fallback = 50): number {
  const value = Number(invocation.options.limit ?? fallback);
  if (!Number.isInteger(value) || value < 1 || value > 1000) throw new CliUsageError(`--limit must be an integer from 1 to 1000, got ${String(invocation.options.limit)}`);
  return value;
}

function id(invocation: CliInvocation): string {
  const [workflowId] = invocation.args;
  if (!workflowId) throw new CliUsageError(`${invocation.command} needs a workflow id: geneva-drive ${invocation.command} ID`);
  return workflowId;
}

/** signal, resume, skip and resume-at need the workflow's class: without it a parked step could not be woken. */
async function assertRegistered(app: INestApplicationContext, workflowId: string): Promise<void> {
  const workflow = await app.get(WorkflowService).find(workflowId);
  if (app.get(WorkflowCatalog).steps(workflow.type) === null) {
    throw new UnknownWorkflowError(workflow.type);
  }
}

/**
 * Without `genevaDrive.queue` the CLI enqueues a woken step nowhere: the application's housekeeping
 * finds it due and enqueues it, after `stuckScheduledThreshold`. Said, so the wait is no surprise.
 */
function noQueueNote(app: INestApplicationContext, what = 'the woken step'): string | undefined {
  if (!(app.get(QUEUE_PORT, { strict: false }) instanceof ManualQueueAdapter)) return undefined;
  const minutes = Math.round(app.get(WorkflowCatalog).thresholds.stuckScheduledThresholdMs / 60_000);
  return `${what} waits for the application's housekeeping, which enqueues it once it has been due for stuckScheduledThreshold (${minutes} min): give the data-source file a genevaDrive.queue to enqueue it at once`;
}

/** `--payload JSON`, or `--payload @file.json` for a payload too long for a command line. */
async function payloadText(option: string | boolean | undefined): Promise<string | undefined> {
  if (typeof option !== 'string') return undefined;
  if (!option.startsWith('@')) return option;
  try {
    return await readFile(option.slice(1), 'utf8');
  } catch (error) {
    throw new CliUsageError(`Cannot read the payload file ${option.slice(1)}: ${(error as Error).message}`, { cause: error });
  }
}

/** `show`'s line of the workflow's parent (none for a workflow started by `start()`). */
function parentLines({ parent }: WorkflowDetail): string[] {
  if (!parent) return [];
  const what = parent.type === null ? '(purged)' : tty`${parent.type} ${parent.state}`;
  return [tty`parent ${parent.id} ` + what + tty`  step ${parent.stepName ?? '-'} key ${parent.key ?? '-'}`];
}

/** `show`'s children: their count by state, then one page of them (none without children). */
function childLines(detail: WorkflowDetail): string[] {
  const counts = detail.childCounts;
  const lines: string[] = [];
  if (counts.total === 0) return lines;
  const byState = WORKFLOW_STATES.filter((state) => counts.byState[state]).map((state) => `${counts.byState[state]} ${state}`);
  lines.push(`children: ${counts.total} (${byState.join(', ')})`);
  for (const child of detail.children) {
    const result = child.result === null ? '-' : child.result.text.replace(/\n\s*/g, ' ');
    lines.push(tty`  ${child.id}\t${child.type}\t${child.state}\tstep ${child.parentStepName ?? '-'} key ${child.key ?? '-'}\t${child.hasChildren ? 'has children' : '-'}\t${result}`);
  }
  if (detail.childrenNextAfter) lines.push(tty`  more: --children-after ${detail.childrenNextAfter}`);
  return lines;
}

/** `show`'s word on an execution's concurrency key: the one it waits for while `scheduled`, else the one it holds or held. */
function flowKeyText(execution: ExecutionView): string {
  if (execution.flowKey === null) return '';
  return execution.state === 'scheduled' ? tty`\twaiting for a slot of ${execution.flowKey}` : tty`\tconcurrency key ${execution.flowKey}`;
}

/** `flow-keys`: a line per key with waiters, most waiters first. */
function waitingKeyLines(view: WaitingKeys): string[] {
  if (!view.flowControl) return ['no key has waiters: the flow-control migration has not run'];
  if (view.keys.length === 0) return ['no key has waiters'];
  const lines = view.keys.map((row) => tty`${row.key}\tholding ${row.holding}\twaiting ${row.waiting}\toldest due ${iso(row.oldestWaiterDueAt)}\twaited ${Math.round(row.oldestWaitMs / 1000)} s`);
  if (view.more) lines.push(`more keys have waiters: these are the ${view.keys.length} with the most (--limit)`);
  return lines;
}

export async function runCommand(app: INestApplicationContext, invocation: CliInvocation): Promise<CliResult> {
  const reader = app.get(WorkflowReader);
  const actions = app.get(WorkflowActions);
  switch (invocation.command) {
    case 'list': {
      const filters: ListFilters = {};
      for (const [option, key] of Object.entries(LIST_OPTIONS)) {
        const value = invocation.options[option];
        if (typeof value === 'string') filters[key] = value;
      }
      const page = await reader.list(filters, limit(invocation));
      const lines = page.rows.map((row) => tty`${row.id}\t${row.type}\t${row.state}\t${row.heroType}:${row.heroId}\t${row.nextStepName ?? '-'}\t${iso(row.updatedAt)}`);
      if (page.nextAfter) lines.push(tty`more: --after ${page.nextAfter}`);
      return { json: page, text: lines.join('\n') || 'no workflows match' };
    }
    case 'show': {
      const { 'executions-after': executionsAfter, 'signals-after': signalsAfter, 'children-after': childrenAfter } = invocation.options;
      const detail = await reader.detail(id(invocation), limit(invocation), {
        ...(typeof executionsAfter === 'string' ? { executionsAfter } : {}),
        ...(typeof signalsAfter === 'string' ? { signalsAfter } : {}),
        ...(typeof childrenAfter === 'string' ? { childrenAfter } : {}),
      });
      const wf = detail.workflow;
      const lines = [
        tty`workflow ${wf.id} ${wf.type} ${wf.state}  hero ${wf.heroType}:${wf.heroId}`,
        ...parentLines(detail),
        ...(wf.result ? [tty`result ${wf.result.text.replace(/\n\s*/g, ' ')}`] : []),
        `steps: ${detail.steps?.map((step) => (step.position === 'current' ? tty`[${step.name}]` : tty`${step.name}`) + (step.removed ? ' (removed)' : '')).join(' > ') ?? '(class not registered)'}`,
        ...(detail.waitingSince ? [`waiting since ${iso(detail.waitingSince)}`] : []),
        'executions (oldest first):',
        ...detail.executions.map((e) => tty`  ${e.id}\t${e.stepName}${STEP_MARK[String(e.stepStatus)] ?? ''}\t${e.state}\t${e.outcome ?? '-'}\tscheduled ${iso(e.scheduledFor)}` + (e.errorClassName ? tty`\t${e.errorClassName}: ${e.errorMessage}` : '') + (e.signalId ? tty`\tsignal ${e.signalId}` : '') + flowKeyText(e)),
        ...(detail.executionsNextAfter ? [tty`  more: --executions-after ${detail.executionsNextAfter}`] : []),
        'signals:',
        ...detail.signals.map((s) => tty`  ${s.id}\t${s.name}\t${s.state}\tkey ${s.idempotencyKey ?? '-'}\tclaimed ${s.claimed} consumed ${s.consumed}\t${s.payload.text.replace(/\n\s*/g, ' ')}`),
        ...(detail.signalsNextAfter ? [tty`  more: --signals-after ${detail.signalsNextAfter}`] : []),
        ...childLines(detail),
      ];
      return { json: detail, text: lines.join('\n') };
    }
    case 'signal': {
      const workflowId = id(invocation);
      const name = invocation.args[1];
      if (!name) throw new CliUsageError('signal needs a name: geneva-drive signal ID NAME --payload JSON [--key K]');
      await assertRegistered(app, workflowId);
      const payload = await payloadText(invocation.options.payload);
      const key = invocation.options.key;
      const signal = await actions.signal(workflowId, { name, payload, idempotencyKey: typeof key === 'string' ? key : undefined });
      const text = tty`signal ${signal.id} ${signal.name} ${signal.state}` + `${signal.duplicateDelivery ? ' (duplicate delivery: nothing changed)' : ''}`;
      const note = signal.state === 'claimed' && !signal.duplicateDelivery ? noQueueNote(app) : undefined;
      return { json: { signal: { ...signal, duplicateDelivery: signal.duplicateDelivery }, ...(note ? { note } : {}) }, text: note ? `${text}\nnote: ${note}` : text };
    }
    case 'pause':
    case 'resume':
    case 'skip':
    case 'cancel': {
      const workflowId = id(invocation);
      if (invocation.command === 'resume' || invocation.command === 'skip') await assertRegistered(app, workflowId);
      const workflow = await actions.run(workflowId, invocation.command);
      return { json: { workflow }, text: tty`workflow ${workflow.id} is ${workflow.state}` };
    }
    case 'resume-at': {
      const workflowId = id(invocation);
      const step = invocation.args[1];
      if (!step) throw new CliUsageError('resume-at needs a step: geneva-drive resume-at ID STEP');
      await assertRegistered(app, workflowId);
      const workflow = await actions.resumeAt(workflowId, step);
      const note = noQueueNote(app, `${step} (scheduled due now)`);
      const text = tty`workflow ${workflow.id} is ${workflow.state}, at step ${step}`;
      return { json: { workflow, ...(note ? { note } : {}) }, text: note ? `${text}\nnote: ${terminalSafe(note)}` : text };
    }
    case 'check': {
      // Without the application's classes every ongoing workflow would look stranded: nothing to check against.
      if (app.get(WorkflowCatalog).types().length === 0) {
        throw new CliUsageError('check needs the workflow classes of the code to check: list them in the genevaDrive.providers (or imports) export of the data source file');
      }
      const report = await app.get(DeployCheck).run();
      return { json: report, text: deployCheckLines(report, terminalSafe).join('\n'), exitCode: report.ok ? 0 : 1 };
    }
    case 'housekeeping': {
      const summary = await app.get(HousekeepingService).run();
      const { gauges: _gauges, ...counts } = summary;
      return { json: summary, text: JSON.stringify(counts, null, 2), exitCode: summary.unrecoverable.length > 0 ? 1 : 0 };
    }
    case 'gauges': {
      const { gauges } = await reader.overview();
      const text = [
        `waiting: ${gauges.waiting.total} ${JSON.stringify(gauges.waiting.byWorkflow)}`,
        `waiting overdue: ${gauges.waitingOverdue ? `${gauges.waitingOverdue.total} ${JSON.stringify(gauges.waitingOverdue.byWorkflow)}` : '-'}`,
        `stuck in progress: ${gauges.stuckInProgress}`,
        `stuck scheduled: ${gauges.stuckScheduled}`,
      ].join('\n');
      return { json: gauges, text };
    }
    case 'flow-keys': {
      if (invocation.args.length > 0) throw new CliUsageError(`flow-keys takes no argument, got ${JSON.stringify(invocation.args[0])}: geneva-drive flow-keys [--limit N]`);
      const view = await reader.waitingKeys(limit(invocation, WAITING_KEYS_LIMIT));
      return { json: view, text: waitingKeyLines(view).join('\n') };
    }
    default:
      throw new CliUsageError(`Unknown command ${JSON.stringify(invocation.command)}: expected one of ${COMMANDS.join(', ')}`);
  }
}
