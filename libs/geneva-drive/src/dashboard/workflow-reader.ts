import { Inject, Injectable, NotFoundException } from '@nestjs/common';
import { Brackets, type DataSource, type SelectQueryBuilder } from 'typeorm';
import { identifierRows } from '../entities/column-transformers.js';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { EngineView } from '../registry/engine-view.js';
import type { WorkflowState } from '../state/workflow-state.js';
import { WorkflowService } from '../workflow/workflow.service.js';
import { DASHBOARD_DATA_SOURCE } from './dashboard.constants.js';
import { DashboardInputError } from './dashboard-input.error.js';
import { checkFilterText, parseDateFilter } from './filter-text.js';
import { clipText, previewOf, PREVIEW_CHARS, type ValuePreview } from './value-preview.js';
import { WorkflowCatalog, type StepSummary } from './workflow-catalog.js';

export const WORKFLOW_STATES: readonly WorkflowState[] = ['ready', 'performing', 'paused', 'finished', 'canceled'];

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

/** Where the workflow page's two lists start. */
export interface DetailCursors {
  executionsAfter?: string;
  signalsAfter?: string;
}

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

export interface WorkflowDetail {
  workflow: WorkflowRow & { currentStepName: string | null; startedAt: Date | null; finishedAt: Date | null };
  /** Null when the application has no class for the workflow's type. */
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

/** The index of the list filtered by type and state (AddGenevaDriveListIndexes1730000000003). */
const WORKFLOWS_BY_TYPE_STATE = 'geneva_drive_workflows_type_state';
const OVERVIEW_LIMIT = 10;
const BACKTRACE_CHARS = 4 * PREVIEW_CHARS;

/**
 * Read-only queries of the dashboard and the CLI. Lists page by id (newest first) with a keyset
 * cursor, so every page is an index range scan however many workflows there are.
 */
@Injectable()
export class WorkflowReader {
  private typeStateIndex?: Promise<boolean>;

  constructor(
    @Inject(DASHBOARD_DATA_SOURCE) private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
    private readonly engine: EngineView,
    private readonly catalog: WorkflowCatalog,
  ) {}

  async overview(): Promise<Overview> {
    const counts = await this.dataSource.manager
      .createQueryBuilder(WorkflowRecord, 'w')
      .select('w.type', 'type')
      .addSelect('w.state', 'state')
      .addSelect('COUNT(*)', 'count')
      .groupBy('w.type')
      .addGroupBy('w.state')
      .orderBy('w.type')
      .addOrderBy('w.state')
      .getRawMany<{ type: string; state: string; count: string | number }>()
      .then(identifierRows);
    const options = this.catalog.thresholds;
    const now = Date.now();
    const waitingByType = await this.executionsByType('waiting');
    const overdueMs = options.waitingVisibilityThresholdMs;
    const overdueByType = overdueMs === null ? null : await this.executionsByType('waiting', (qb) => qb.andWhere('e.waitingSince < :cutoff', { cutoff: new Date(now - overdueMs) }));
    const stuckInProgress = await this.stuckCount('in_progress', 'e.startedAt < :cutoff', new Date(now - options.stuckInProgressThresholdMs));
    const stuckScheduled = await this.stuckCount('scheduled', 'e.scheduledFor < :cutoff', new Date(now - options.stuckScheduledThresholdMs));
    const recentFailures = await this.executionsIn('failed', ['errorClassName', 'errorMessage', 'failedAt'])
      .orderBy('e.failedAt', 'DESC')
      .getRawMany()
      .then(identifierRows);
    const longestWaiting = await this.executionsIn('waiting', ['waitingSince'])
      .orderBy('e.waitingSince', 'ASC')
      .getRawMany()
      .then(identifierRows);
    return {
      counts: counts.map((row) => ({ type: row.type, state: row.state, count: Number(row.count) })),
      gauges: { waiting: waitingByType, waitingOverdue: overdueByType, stuckInProgress, stuckScheduled },
      recentFailures: recentFailures.map((row) => ({ ...row, workflowId: String(row.workflowId), errorMessage: clipText(row.errorMessage), failedAt: toDate(row.failedAt) })),
      longestWaiting: longestWaiting.map((row) => ({ ...row, workflowId: String(row.workflowId), waitingSince: toDate(row.waitingSince) })),
    };
  }

  /** One page of workflows matching the filters, newest first. Throws DashboardInputError for a bad filter. */
  async list(raw: ListFilters, pageSize: number): Promise<WorkflowPage> {
    const filters = checkedFilters(raw);
    const qb = this.dataSource.manager.createQueryBuilder(WorkflowRecord, 'w').orderBy('w.id', 'DESC').limit(pageSize + 1);
    if (filters.type) qb.andWhere('w.type = :type', { type: filters.type });
    if (filters.state) {
      if (!WORKFLOW_STATES.includes(filters.state as WorkflowState)) throw new DashboardInputError('state', filters.state, `one of ${WORKFLOW_STATES.join(', ')}`);
      qb.andWhere('w.state = :state', { state: filters.state });
    }
    if (filters.heroType) qb.andWhere('w.heroType = :heroType', { heroType: filters.heroType });
    if (filters.heroId) qb.andWhere('w.heroId = :heroId', { heroId: filters.heroId });
    if (filters.waitingFor) this.whereWaitingFor(qb, filters.waitingFor);
    if (filters.failedStep) {
      qb.andWhere(
        (sub) => `EXISTS ${sub.subQuery().select('1').from(StepExecution, 'f').where('f.workflowId = w.id').andWhere('f.state = :failed').andWhere('f.stepName = :failedStep').getQuery()}`,
        { failed: 'failed', failedStep: filters.failedStep },
      );
    }
    for (const [key, column, op] of [
      ['createdFrom', 'createdAt', '>='],
      ['createdTo', 'createdAt', '<='],
      ['updatedFrom', 'updatedAt', '>='],
      ['updatedTo', 'updatedAt', '<='],
    ] as const) {
      const value = filters[key];
      if (value) qb.andWhere(`w.${column} ${op} :${key}`, { [key]: parseDateFilter(key, value) });
    }
    if (filters.q) await this.whereSearch(qb, filters.q.trim());
    if (filters.after) qb.andWhere('w.id < :after', { after: this.cursor('after', filters.after) });
    // Left to itself, MySQL/MariaDB intersects the (type) and (state) indexes and sorts every matching
    // row (index_merge + filesort: 0.3–0.6 s over 90k rows) instead of reading (type, state, id) backwards
    // for one page. A hero filter has a more selective index of its own. USE INDEX is MySQL/MariaDB only.
    if (filters.type && filters.state && !filters.heroId && !filters.q && (await this.hasTypeStateIndex())) qb.useIndex(WORKFLOWS_BY_TYPE_STATE);
    const rows = (await qb.getMany()).map(toRow);
    const more = rows.length > pageSize;
    if (more) rows.length = pageSize;
    return { rows, nextAfter: more ? rows[rows.length - 1].id : null };
  }

  /**
   * MySQL/MariaDB: whether the type-and-state index exists (a database whose list-index migration has
   * not run yet has none, and USE INDEX of a missing index is an error there). Asked once; the other
   * databases need no hint.
   */
  private hasTypeStateIndex(): Promise<boolean> {
    if (!['mysql', 'mariadb'].includes(this.dataSource.options.type)) return Promise.resolve(false);
    this.typeStateIndex ??= this.dataSource
      .query('SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ? LIMIT 1', [
        'geneva_drive_workflows',
        WORKFLOWS_BY_TYPE_STATE,
      ])
      .then(
        (rows: unknown[]) => rows.length > 0,
        () => {
          this.typeStateIndex = undefined; // asked again next time
          return false;
        },
      );
    return this.typeStateIndex;
  }

  /**
   * Everything the workflow page shows, its executions (oldest first) and signals (in arrival order)
   * one page each from the given cursors, with payloads and cursors cut to a preview: the page's size
   * does not grow with the workflow's history. Throws WorkflowNotFoundError for an unknown id,
   * DashboardInputError for a malformed cursor.
   */
  async detail(id: string, pageSize: number, page: DetailCursors = {}): Promise<WorkflowDetail> {
    const record = await this.workflows.find(id);
    const executionsAfter = page.executionsAfter ? this.cursor('executionsAfter', page.executionsAfter) : null;
    const signalsAfter = page.signalsAfter ? this.cursor('signalsAfter', page.signalsAfter) : null;
    const executions = await this.onePage(StepExecution, record.id, executionsAfter, pageSize);
    const signals = this.engine.hasSignals ? await this.onePage(Signal, record.id, signalsAfter, pageSize) : { rows: [], nextAfter: null };
    const claimedBy = await this.claimedBy(record.id, signals.rows.map((signal) => signal.id));
    const current = await this.workflows.currentExecution(record);
    const steps = this.catalog.steps(record.type);
    const position = record.currentStepName ?? record.nextStepName;
    const index = steps?.findIndex((step) => step.name === position) ?? -1;
    const finished = record.state === 'finished';
    return {
      workflow: { ...toRow(record), currentStepName: record.currentStepName, startedAt: record.startedAt, finishedAt: record.finishedAt },
      steps:
        steps?.map((step, i) => ({
          ...step,
          position: finished || (index >= 0 && i < index) ? 'done' : i === index ? 'current' : 'upcoming',
        })) ?? null,
      executions: executions.rows.map(toExecutionView),
      executionsNextAfter: executions.nextAfter,
      signals: signals.rows.map((signal) => toSignalView(signal, claimedBy.get(signal.id) ?? [])),
      signalsNextAfter: signals.nextAfter,
      waitingSince: current?.state === 'waiting' ? current.waitingSince : null,
      signalNames: this.catalog.signalNames(record.type),
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

  /** Rows of one workflow after a cursor, by id (creation order: bigint keys grow, uuid keys are time-ordered). */
  private async onePage<T extends StepExecution | Signal>(entity: new () => T, workflowId: string, after: string | null, pageSize: number): Promise<{ rows: T[]; nextAfter: string | null }> {
    const qb = this.dataSource.manager.createQueryBuilder(entity, 'r').where('r.workflowId = :workflowId', { workflowId }).orderBy('r.id', 'ASC').limit(pageSize + 1);
    if (after !== null) qb.andWhere('r.id > :after', { after });
    const rows = await qb.getMany();
    const more = rows.length > pageSize;
    if (more) rows.length = pageSize;
    return { rows, nextAfter: more ? rows[rows.length - 1].id : null };
  }

  /** The executions that attached to each of these signals, oldest first. */
  private async claimedBy(workflowId: string, signalIds: string[]): Promise<Map<string, string[]>> {
    const bySignal = new Map<string, string[]>();
    if (signalIds.length === 0) return bySignal;
    const rows = await this.dataSource.manager
      .createQueryBuilder(StepExecution, 'e')
      .select(['e.id', 'e.signalId'])
      .where('e.workflowId = :workflowId', { workflowId })
      .andWhere('e.signalId IN (:...signalIds)', { signalIds })
      .orderBy('e.id', 'ASC')
      .getMany();
    for (const row of rows) bySignal.set(row.signalId!, [...(bySignal.get(row.signalId!) ?? []), row.id]);
    return bySignal;
  }

  private whereWaitingFor(qb: SelectQueryBuilder<WorkflowRecord>, signalName: string): void {
    const waiting = this.catalog.stepsWaitingFor(signalName);
    if (waiting.length === 0) {
      qb.andWhere('1 = 0');
      return;
    }
    const pairs = waiting.map((entry, i) => `(w.type = :wt${i} AND p.stepName = :ws${i})`).join(' OR ');
    const params = Object.fromEntries(waiting.flatMap((entry, i) => [[`wt${i}`, entry.type], [`ws${i}`, entry.step]]));
    qb.andWhere(
      (sub) => `EXISTS ${sub.subQuery().select('1').from(StepExecution, 'p').where('p.workflowId = w.id').andWhere('p.state = :parked').andWhere(`(${pairs})`).getQuery()}`,
      { parked: 'waiting', ...params },
    );
  }

  /** Matches the hero id, or the workflow id (looked up first: a malformed id is simply no match). */
  private async whereSearch(qb: SelectQueryBuilder<WorkflowRecord>, q: string): Promise<void> {
    const byId = this.engine.canonicalId(q) !== null ? await this.workflows.find(q).catch(() => null) : null;
    qb.andWhere(
      new Brackets((inner) => {
        inner.where('w.heroId = :q', { q });
        if (byId) inner.orWhere('w.id = :qId', { qId: byId.id });
      }),
    );
  }

  /** The overview's short lists: executions in a state, with their workflow's id and type. */
  private executionsIn(state: string, columns: Array<keyof StepExecution>) {
    const qb = this.dataSource.manager
      .createQueryBuilder(StepExecution, 'e')
      .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
      .select('e.workflowId', 'workflowId')
      .addSelect('w.type', 'type')
      .addSelect('e.stepName', 'stepName')
      .where('e.state = :state', { state })
      .limit(OVERVIEW_LIMIT);
    for (const column of columns) qb.addSelect(`e.${column}`, column);
    return qb;
  }

  private async executionsByType(state: string, narrow?: (qb: SelectQueryBuilder<StepExecution>) => unknown) {
    const qb = this.dataSource.manager
      .createQueryBuilder(StepExecution, 'e')
      .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
      .select('w.type', 'type')
      .addSelect('COUNT(*)', 'count')
      .where('e.state = :state', { state })
      .groupBy('w.type');
    narrow?.(qb);
    const rows = identifierRows(await qb.getRawMany<{ type: string; count: string | number }>());
    const byWorkflow = Object.fromEntries(rows.map((row) => [row.type, Number(row.count)]));
    return { total: rows.reduce((sum, row) => sum + Number(row.count), 0), byWorkflow };
  }

  /** Executions housekeeping would recover: past the threshold, of a workflow that is ready or performing. */
  private async stuckCount(state: string, condition: string, cutoff: Date): Promise<number> {
    return this.dataSource.manager
      .createQueryBuilder(StepExecution, 'e')
      .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
      .where('e.state = :state', { state })
      .andWhere(condition, { cutoff })
      .andWhere('w.state IN (:...runnable)', { runnable: ['ready', 'performing'] })
      .getCount();
  }
}

function toRow(record: WorkflowRecord): WorkflowRow {
  const { id, type, state, heroType, heroId, nextStepName, createdAt, updatedAt } = record;
  return { id, type, state, heroType, heroId, nextStepName, createdAt, updatedAt };
}

function toExecutionView(execution: StepExecution): ExecutionView {
  const end = execution.finishedAt;
  return {
    id: execution.id,
    stepName: execution.stepName,
    state: execution.state,
    outcome: execution.outcome,
    scheduledFor: execution.scheduledFor,
    startedAt: execution.startedAt,
    finishedAt: end,
    durationMs: execution.startedAt && end ? end.getTime() - execution.startedAt.getTime() : null,
    errorClassName: execution.errorClassName,
    // A step's error is the application's text, unbounded: cut like payloads, whole in the execution's API.
    errorMessage: clipText(execution.errorMessage),
    errorBacktrace: clipText(execution.errorBacktrace, BACKTRACE_CHARS),
    errorTruncated: clipText(execution.errorMessage) !== execution.errorMessage || clipText(execution.errorBacktrace, BACKTRACE_CHARS) !== execution.errorBacktrace,
    cursor: execution.cursor === undefined || execution.cursor === null ? null : previewOf(execution.cursor),
    reattemptReason: execution.metadata?.reattemptReason ?? null,
    signalId: execution.signalId,
    waitingSince: execution.waitingSince,
    continuesFromId: execution.continuesFromId,
  };
}

function toSignalView(signal: Signal, claimedBy: string[]): SignalView {
  return {
    id: signal.id,
    name: signal.name,
    idempotencyKey: signal.idempotencyKey,
    state: signal.state,
    claimed: signal.claimed,
    consumed: signal.consumed,
    payload: previewOf(signal.payload),
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
