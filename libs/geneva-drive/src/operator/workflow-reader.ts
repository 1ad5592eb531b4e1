import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import type { DataSource, EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { waitingGauges } from '../persistence/gauges.js';
import { countStuck } from '../persistence/recovery-queries.js';
import { waitingKeyRows } from '../persistence/waiting-keys.js';
import { activeExecutionState, childCountsByState, claimedBy, countsByTypeAndState, executionsIn, listWorkflows, pageOfWorkflow, typeStateIndexUsable, type WorkflowListQuery } from '../persistence/workflow-list.js';
import { WorkflowService } from '../client/workflow.service.js';
import { OPERATOR_DATA_SOURCE } from './operator.constants.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { EngineView } from './engine-view.js';
import { checkFilterText, parseDateFilter } from './filter-text.js';
import { clipText, previewOf, previewOfStored, PREVIEW_CHARS, type ValuePreview } from './value-preview.js';
import { WorkflowCatalog, type StepStatus, type StepSummary } from './workflow-catalog.js';
import { WORKFLOW_STATES, type WorkflowState } from '../state/workflow-state.js';


/** The list page's filters, as they arrive in the query string. */
export interface ListFilters {
  type?: string;
  state?: string;
  heroType?: string;
  heroId?: string;
  /** Workflows with a step parked waiting for this signal name. */
  waitingFor?: string;
  /** Workflows with a failed execution of this step. */
  failedStep?: string;
  createdFrom?: string;
  createdTo?: string;
  updatedFrom?: string;
  updatedTo?: string;
  /** A workflow id or a hero id. */
  q?: string;
  /** Keyset cursor: the id of the last row of the previous page. */
  after?: string;
}

export const LIST_FILTER_KEYS: readonly (keyof ListFilters)[] = [
  'type', 'state', 'heroType', 'heroId', 'waitingFor', 'failedStep', 'createdFrom', 'createdTo', 'updatedFrom', 'updatedTo', 'q', 'after',
];

/** Where the workflow page's lists start. */
export interface DetailCursors {
  executionsAfter?: string;
  signalsAfter?: string;
  childrenAfter?: string;
}

export const DETAIL_CURSOR_KEYS: readonly (keyof DetailCursors)[] = ['executionsAfter', 'signalsAfter', 'childrenAfter'];

export interface WorkflowRow {
  id: string;
  type: string;
  state: WorkflowState;
  heroType: string;
  heroId: string;
  nextStepName: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface WorkflowPage {
  rows: WorkflowRow[];
  /** The `after` of the next page, null on the last one. */
  nextAfter: string | null;
}

export interface Overview {
  counts: Array<{ type: string; state: string; count: number }>;
  gauges: {
    waiting: { total: number; byWorkflow: Record<string, number> };
    waitingOverdue: { total: number; byWorkflow: Record<string, number> } | null;
    stuckInProgress: number;
    stuckScheduled: number;
  };
  recentFailures: Array<{ workflowId: string; type: string; stepName: string; errorClassName: string | null; errorMessage: string | null; failedAt: Date | null }>;
  longestWaiting: Array<{ workflowId: string; type: string; stepName: string; waitingSince: Date | null }>;
}

export interface ExecutionView {
  id: string;
  stepName: string;
  /** Whether the workflow's class defines the step, declares it removed (a gravestone), or neither; null without the class. */
  stepStatus: StepStatus;
  state: string;
  outcome: string | null;
  scheduledFor: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  durationMs: number | null;
  errorClassName: string | null;
  /** Cut at 2,000 characters (the backtrace at 8,000); `errorTruncated` says so. */
  errorMessage: string | null;
  errorBacktrace: string | null;
  errorTruncated: boolean;
  /** The resumable step's cursor, cut to a preview (`api/workflows/:id/executions/:executionId` has it whole). */
  cursor: ValuePreview | null;
  reattemptReason: string | null;
  signalId: string | null;
  waitingSince: Date | null;
  continuesFromId: string | null;
  /** The concurrency key it holds (in progress, or held until it ended) or waits for (`scheduled`); null for a step without one. */
  flowKey: string | null;
}

export interface SignalView {
  id: string;
  name: string;
  idempotencyKey: string | null;
  state: string;
  claimed: number;
  consumed: number;
  /** Cut to a preview (`api/workflows/:id/signals/:signalId` has it whole). */
  payload: ValuePreview;
  createdAt: Date;
  claimedAt: Date | null;
  consumedAt: Date | null;
  /** Executions that attached to it, oldest first. */
  claimedBy: string[];
}

/** A workflow started by a step of another (`this.startChild`), as its parent's page lists it. */
export interface ChildView {
  id: string;
  type: string;
  state: WorkflowState;
  /** The parent's step that started it, and its key among that step's children. */
  parentStepName: string | null;
  key: string | null;
  /** Whether it started children of its own (its page lists them). */
  hasChildren: boolean;
  /** What it stored with `this.setResult`, cut to a preview (its own page's API has it whole). */
  result: ValuePreview | null;
  updatedAt: Date;
}

/** The workflow whose step started this one; `type` and `state` are null when that workflow was purged. */
export interface ParentView {
  id: string;
  type: string | null;
  state: WorkflowState | null;
  /** Its step that started this workflow, and this workflow's key among that step's children. */
  stepName: string | null;
  key: string | null;
}

export interface WorkflowDetail {
  workflow: WorkflowRow & { currentStepName: string | null; startedAt: Date | null; finishedAt: Date | null; result: ValuePreview | null };
  /** The workflow whose step started this one; null for a workflow started by `start()`. */
  parent: ParentView | null;
  /**
   * One page of its children in id order from `childrenAfter` (`childrenNextAfter` as below), and how
   * many it has in each state (`total` of them all): read without loading every child.
   */
  children: ChildView[];
  childrenNextAfter: string | null;
  childCounts: { total: number; byState: Partial<Record<WorkflowState, number>> };
  /** The class's steps and gravestones (`removed`) in run order; null when the application has no class for the workflow's type. */
  steps: Array<StepSummary & { position: 'done' | 'current' | 'upcoming' }> | null;
  /** One page, oldest first; `executionsNextAfter` is the next page's cursor, null on the last. */
  executions: ExecutionView[];
  executionsNextAfter: string | null;
  /** One page, in arrival order; `signalsNextAfter` as above. */
  signals: SignalView[];
  signalsNextAfter: string | null;
  /** When the current step parked, if it is parked. */
  waitingSince: Date | null;
  /** The names the send-a-signal form offers. */
  signalNames: string[];
}

/** A concurrency key executions wait for. */
export interface WaitingKey {
  key: string;
  /** Executions holding a slot of it (in progress). */
  holding: number;
  /** Executions waiting for a slot (`scheduled` with this key). */
  waiting: number;
  /** When the longest-due of its waiters became due (its `scheduledFor`): it has not run since. */
  oldestWaiterDueAt: Date;
  /** How long before the read that was. */
  oldestWaitMs: number;
}

/** The keys executions wait for, most waiters first. */
export interface WaitingKeys {
  /** False without the flow-control migration: no execution can wait for a key. */
  flowControl: boolean;
  /** At most the limit asked for ({@link WAITING_KEYS_LIMIT} unless told). */
  keys: WaitingKey[];
  /** Whether more keys have waiters than `keys` lists. */
  more: boolean;
}

/** How many keys the dashboard lists (the CLI's default). */
export const WAITING_KEYS_LIMIT = 100;

const OVERVIEW_LIMIT = 10;
const BACKTRACE_CHARS = 4 * PREVIEW_CHARS;

/**
 * Read-only queries of the dashboard and the CLI: their input checked here, their SQL in
 * persistence/ (workflow-list; the gauges and the stuck counts housekeeping shares). Lists page by
 * id (newest first) with a keyset cursor, so every page is an index range scan however many
 * workflows there are.
 */
@Injectable()
export class WorkflowReader {
  private typeStateIndex?: Promise<boolean>;

  constructor(
    @Inject(OPERATOR_DATA_SOURCE) private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
    private readonly engine: EngineView,
    private readonly catalog: WorkflowCatalog,
  ) {}

  async overview(): Promise<Overview> {
    const manager = this.dataSource.manager;
    const counts = await countsByTypeAndState(manager);
    const options = this.catalog.thresholds;
    const now = Date.now();
    const overdueMs = options.waitingVisibilityThresholdMs;
    const { waiting, overdue } = await waitingGauges(manager, overdueMs === null ? null : new Date(now - overdueMs));
    const stuckInProgress = await countStuck(manager, 'in_progress', new Date(now - options.stuckInProgressThresholdMs));
    const stuckScheduled = await countStuck(manager, 'scheduled', new Date(now - options.stuckScheduledThresholdMs));
    const recentFailures = await executionsIn(manager, 'failed', ['errorClassName', 'errorMessage', 'failedAt'], 'failedAt', 'DESC', OVERVIEW_LIMIT);
    const longestWaiting = await executionsIn(manager, 'waiting', ['waitingSince'], 'waitingSince', 'ASC', OVERVIEW_LIMIT);
    return {
      counts: counts.map((row) => ({ type: row.type, state: row.state, count: Number(row.count) })),
      gauges: { waiting, waitingOverdue: overdue && withoutZeros(overdue), stuckInProgress, stuckScheduled },
      recentFailures: recentFailures.map((row) => ({ ...row, workflowId: String(row.workflowId), errorMessage: clipText(row.errorMessage as string | null), failedAt: toDate(row.failedAt) })) as Overview['recentFailures'],
      longestWaiting: longestWaiting.map((row) => ({ ...row, workflowId: String(row.workflowId), waitingSince: toDate(row.waitingSince) })) as Overview['longestWaiting'],
    };
  }

  /**
   * The concurrency keys executions wait for, with how many wait and hold, and how long the
   * longest-due waiter has been due: one grouped read of the waiting and holding executions.
   */
  async waitingKeys(limit = WAITING_KEYS_LIMIT): Promise<WaitingKeys> {
    if (!this.engine.hasFlowControl) return { flowControl: false, keys: [], more: false };
    const rows = await waitingKeyRows(this.dataSource.manager, limit + 1);
    const now = Date.now();
    const keys = rows.slice(0, limit).map(({ key, holding, waiting, oldestDue }) => {
      const oldestWaiterDueAt = toDate(oldestDue)!; // a key with waiters has a due time
      return { key, holding, waiting, oldestWaiterDueAt, oldestWaitMs: Math.max(0, now - oldestWaiterDueAt.getTime()) };
    });
    return { flowControl: true, keys, more: rows.length > limit };
  }

  /** One page of workflows matching the filters, newest first. Throws DashboardInputError for a bad filter. */
  async list(raw: ListFilters, pageSize: number): Promise<WorkflowPage> {
    const filters = checkedFilters(raw);
    if (filters.state && !WORKFLOW_STATES.includes(filters.state as WorkflowState)) throw new DashboardInputError('state', filters.state, `one of ${WORKFLOW_STATES.join(', ')}`);
    const dates: Pick<WorkflowListQuery, 'createdFrom' | 'createdTo' | 'updatedFrom' | 'updatedTo'> = {};
    for (const key of ['createdFrom', 'createdTo', 'updatedFrom', 'updatedTo'] as const) {
      const value = filters[key];
      if (value) dates[key] = parseDateFilter(key, value);
    }
    const search = filters.q ? await this.search(filters.q.trim()) : undefined;
    // A hero filter has a more selective index than (type, state, id).
    const useTypeStateIndex = Boolean(filters.type && filters.state && !filters.heroId && !filters.q && (await this.hasTypeStateIndex()));
    const query: WorkflowListQuery = {
      type: filters.type,
      state: filters.state,
      heroType: filters.heroType,
      heroId: filters.heroId,
      parkedAt: filters.waitingFor ? this.catalog.stepsWaitingFor(filters.waitingFor) : undefined,
      failedStep: filters.failedStep,
      ...dates,
      search,
      before: filters.after ? this.cursor('after', filters.after) : undefined,
      useTypeStateIndex,
    };
    const rows = (await listWorkflows(this.dataSource.manager, query, pageSize + 1)).map(toRow);
    const more = rows.length > pageSize;
    if (more) rows.length = pageSize;
    return { rows, nextAfter: more ? rows[rows.length - 1].id : null };
  }

  /** Whether the list may use the type-and-state index (see typeStateIndexUsable): asked once, again after an error. */
  private hasTypeStateIndex(): Promise<boolean> {
    this.typeStateIndex ??= typeStateIndexUsable(this.dataSource.manager).then(
      (usable) => usable,
      () => {
        this.typeStateIndex = undefined; // asked again next time
        return false;
      },
    );
    return this.typeStateIndex;
  }

  /**
   * Everything the workflow page shows, its executions (oldest first) and signals (in arrival order)
   * one page each from the given cursors, with payloads, cursors and errors cut to a preview: the page's
   * size does not grow with the workflow's history, nor what it reads with the size of the payloads
   * (only the preview's characters and one more are read of each, the reattempt reason alone of the
   * metadata). Throws WorkflowNotFoundError for an unknown id, DashboardInputError for a malformed cursor.
   */
  async detail(id: string, pageSize: number, page: DetailCursors = {}): Promise<WorkflowDetail> {
    // One snapshot: a commit between two of its reads would show rows as they never were together.
    return this.engine.snapshot(async (manager) => {
      const workflowId = this.engine.canonicalId(id);
      const record = workflowId === null ? null : await manager.findOneBy(WorkflowRecord, { id: workflowId });
      if (!record) throw new WorkflowNotFoundError(id);
      const executionsAfter = page.executionsAfter ? this.cursor('executionsAfter', page.executionsAfter) : null;
      const signalsAfter = page.signalsAfter ? this.cursor('signalsAfter', page.signalsAfter) : null;
      const childrenAfter = page.childrenAfter ? this.cursor('childrenAfter', page.childrenAfter) : null;
      return this.detailOf(manager, record, pageSize, executionsAfter, signalsAfter, childrenAfter);
    });
  }

  private async detailOf(manager: EntityManager, record: WorkflowRecord, pageSize: number, executionsAfter: string | null, signalsAfter: string | null, childrenAfter: string | null): Promise<WorkflowDetail> {
    const executions = await pageOfWorkflow<StepExecution>(manager, StepExecution, record.id, executionsAfter, pageSize, {
      heads: { cursor: PREVIEW_CHARS, errorMessage: PREVIEW_CHARS, errorBacktrace: BACKTRACE_CHARS },
      members: { metadata: 'reattemptReason' },
    });
    const signals = this.engine.hasSignals ? await pageOfWorkflow<Signal>(manager, Signal, record.id, signalsAfter, pageSize, { heads: { payload: PREVIEW_CHARS } }) : { rows: [], nextAfter: null };
    const attached = await claimedBy(manager, record.id, signals.rows.map(({ row }) => row.id));
    const current = await activeExecutionState(manager, record.id);
    const family = await this.family(manager, record, childrenAfter, pageSize);
    const steps = this.catalog.runOrder(record.type);
    const position = record.currentStepName ?? record.nextStepName;
    const index = steps?.findIndex((step) => step.name === position) ?? -1;
    const finished = record.state === 'finished';
    return {
      workflow: { ...toRow(record), currentStepName: record.currentStepName, startedAt: record.startedAt, finishedAt: record.finishedAt, result: record.result === null || record.result === undefined ? null : previewOf(record.result) },
      ...family,
      steps:
        steps?.map((step, i) => ({
          ...step,
          position: finished || (index >= 0 && i < index) ? 'done' : i === index ? 'current' : 'upcoming',
        })) ?? null,
      executions: executions.rows.map(({ row, read }) => toExecutionView(row, read, this.catalog.stepStatus(record.type, row.stepName))),
      executionsNextAfter: executions.nextAfter,
      signals: signals.rows.map(({ row, read }) => toSignalView(row, read, attached.get(row.id) ?? [])),
      signalsNextAfter: signals.nextAfter,
      waitingSince: current?.state === 'waiting' ? current.waitingSince : null,
      signalNames: this.catalog.signalNames(record.type),
    };
  }

  /**
   * The workflow's parent and one page of its children with their counts by state. A workflow that
   * started no children (`has_children` unset) costs no query; one that did reads a page of the
   * (parent_id, id) index, each child's result as a bounded head, and one count per state, however
   * many children it has.
   */
  private async family(manager: EntityManager, record: WorkflowRecord, after: string | null, pageSize: number): Promise<Pick<WorkflowDetail, 'parent' | 'children' | 'childrenNextAfter' | 'childCounts'>> {
    let parent: ParentView | null = null;
    if (record.parentId) {
      const row = await manager.findOne(WorkflowRecord, { select: { id: true, type: true, state: true }, where: { id: record.parentId } });
      parent = { id: record.parentId, type: row?.type ?? null, state: row?.state ?? null, stepName: record.parentStepName, key: record.childKey };
    }
    if (!this.engine.hasChildren || !record.hasChildren) return { parent, children: [], childrenNextAfter: null, childCounts: { total: 0, byState: {} } };
    const page = await pageOfWorkflow<WorkflowRecord>(manager, WorkflowRecord, record.id, after, pageSize, { heads: { result: PREVIEW_CHARS } }, 'parentId');
    const counts = await childCountsByState(manager, record.id);
    return {
      parent,
      children: page.rows.map(({ row, read }) => ({
        id: row.id,
        type: row.type,
        state: row.state,
        parentStepName: row.parentStepName,
        key: row.childKey,
        hasChildren: row.hasChildren === true,
        result: previewOfStored(read.result),
        updatedAt: row.updatedAt,
      })),
      childrenNextAfter: page.nextAfter,
      childCounts: { total: counts.reduce((sum, row) => sum + row.count, 0), byState: Object.fromEntries(counts.map((row) => [row.state, row.count])) },
    };
  }

  /** One signal of the workflow with its whole payload (the list shows a preview). */
  async signal(workflowId: string, signalId: string): Promise<Signal> {
    const record = await this.workflows.find(workflowId);
    const id = this.engine.hasSignals ? this.engine.canonicalId(signalId) : null;
    const signal = id === null ? null : await this.dataSource.manager.findOneBy(Signal, { id, workflowId: record.id });
    if (!signal) throw new NotFoundException(`Workflow ${record.id} has no signal ${JSON.stringify(signalId)}`);
    return signal;
  }

  /** One execution of the workflow with its whole cursor (the list shows a preview). */
  async execution(workflowId: string, executionId: string): Promise<StepExecution> {
    const record = await this.workflows.find(workflowId);
    const id = this.engine.canonicalId(executionId);
    const execution = id === null ? null : await this.dataSource.manager.findOneBy(StepExecution, { id, workflowId: record.id });
    if (!execution) throw new NotFoundException(`Workflow ${record.id} has no execution ${JSON.stringify(executionId)}`);
    return execution;
  }

  /** A keyset cursor in the tables' key form, or DashboardInputError (a malformed one never reaches SQL). */
  private cursor(name: string, value: string): string {
    const id = this.engine.canonicalId(value);
    if (id === null) throw new DashboardInputError(name, value, 'a workflow, execution or signal id of this database');
    return id;
  }

  /** Matches the hero id, or the workflow id (looked up first: a malformed id is simply no match). */
  private async search(q: string): Promise<WorkflowListQuery['search']> {
    const byId = this.engine.canonicalId(q) !== null ? await this.workflows.find(q).catch(() => null) : null;
    return { heroId: q, workflowId: byId ? byId.id : null };
  }
}

/** A gauge without its types counted zero (the overdue gauge lists only the types that have some). */
function withoutZeros(gauge: { total: number; byWorkflow: Record<string, number> }): { total: number; byWorkflow: Record<string, number> } {
  return { total: gauge.total, byWorkflow: Object.fromEntries(Object.entries(gauge.byWorkflow).filter(([, count]) => count > 0)) };
}

function toRow(record: WorkflowRecord): WorkflowRow {
  const { id, type, state, heroType, heroId, nextStepName, createdAt, updatedAt } = record;
  return { id, type, state, heroType, heroId, nextStepName, createdAt, updatedAt };
}

/** An execution of a page, with the heads of its long columns in `read` (see pageOfWorkflow). */
function toExecutionView(execution: StepExecution, read: Record<string, string | null>, stepStatus: StepStatus): ExecutionView {
  const end = execution.finishedAt;
  return {
    id: execution.id,
    stepName: execution.stepName,
    stepStatus,
    state: execution.state,
    outcome: execution.outcome,
    scheduledFor: execution.scheduledFor,
    startedAt: execution.startedAt,
    finishedAt: end,
    durationMs: execution.startedAt && end ? end.getTime() - execution.startedAt.getTime() : null,
    errorClassName: execution.errorClassName,
    // A step's error is the application's text: cut like payloads, whole in the execution's API.
    errorMessage: clipText(read.errorMessage),
    errorBacktrace: clipText(read.errorBacktrace, BACKTRACE_CHARS),
    errorTruncated: (read.errorMessage?.length ?? 0) > PREVIEW_CHARS || (read.errorBacktrace?.length ?? 0) > BACKTRACE_CHARS,
    cursor: previewOfStored(read.cursor),
    reattemptReason: read.metadata,
    signalId: execution.signalId,
    waitingSince: execution.waitingSince,
    continuesFromId: execution.continuesFromId,
    flowKey: execution.flowKey ?? null, // undefined without the flow-control migration
  };
}

function toSignalView(signal: Signal, read: Record<string, string | null>, claimedBy: string[]): SignalView {
  return {
    id: signal.id,
    name: signal.name,
    idempotencyKey: signal.idempotencyKey,
    state: signal.state,
    claimed: signal.claimed,
    consumed: signal.consumed,
    payload: previewOfStored(read.payload) ?? previewOf(null),
    createdAt: signal.createdAt,
    claimedAt: signal.claimedAt,
    consumedAt: signal.consumedAt,
    claimedBy,
  };
}


/** Raw selects return driver values: Date objects, or strings on SQLite. */
function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  const text = String(value);
  return new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text.replace(' ', 'T')}Z`);
}

/** Every text filter checked (no NUL, control character or lone surrogate; not over-long) before any SQL runs. */
function checkedFilters(filters: ListFilters): ListFilters {
  return Object.fromEntries(Object.entries(filters).map(([key, value]) => [key, value === undefined ? value : checkFilterText(key, value)]));
}
