import { Inject, Injectable } from '@nestjs/common';
import { Brackets, type DataSource, type SelectQueryBuilder } from 'typeorm';
import { identifierRows } from '../entities/column-transformers.js';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { SignalService } from '../client/signal.service.js';
import type { WorkflowState } from '../state/workflow-state.js';
import { WorkflowService } from '../client/workflow.service.js';
import { OPERATOR_DATA_SOURCE } from './operator.constants.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';
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
  errorMessage: string | null;
  errorBacktrace: string | null;
  cursor: unknown;
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
  payload: unknown;
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
  executions: ExecutionView[];
  signals: SignalView[];
  /** When the current step parked, if it is parked. */
  waitingSince: Date | null;
  /** The names the send-a-signal form offers. */
  signalNames: string[];
}

/** The index of the list filtered by type and state (AddGenevaDriveListIndexes1730000000003). */
const WORKFLOWS_BY_TYPE_STATE = 'geneva_drive_workflows_type_state';
const ID_PATTERN = /^(\d{1,20}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;
const OVERVIEW_LIMIT = 10;

/**
 * Read-only queries of the dashboard and the CLI. Lists page by id (newest first) with a keyset
 * cursor, so every page is an index range scan however many workflows there are.
 */
@Injectable()
export class WorkflowReader {
  private typeStateIndex?: Promise<boolean>;

  constructor(
    @Inject(OPERATOR_DATA_SOURCE) private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
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
      recentFailures: recentFailures.map((row) => ({ ...row, workflowId: String(row.workflowId), failedAt: toDate(row.failedAt) })),
      longestWaiting: longestWaiting.map((row) => ({ ...row, workflowId: String(row.workflowId), waitingSince: toDate(row.waitingSince) })),
    };
  }

  /** One page of workflows matching the filters, newest first. Throws DashboardInputError for a bad filter. */
  async list(filters: ListFilters, pageSize: number): Promise<WorkflowPage> {
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
      if (value) qb.andWhere(`w.${column} ${op} :${key}`, { [key]: parseDate(key, value) });
    }
    if (filters.q) await this.whereSearch(qb, filters.q.trim());
    if (filters.after) {
      if (!ID_PATTERN.test(filters.after)) throw new DashboardInputError('after', filters.after, 'a workflow id');
      qb.andWhere('w.id < :after', { after: filters.after });
    }
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

  /** Everything the workflow page shows. Throws WorkflowNotFoundError for an unknown id. */
  async detail(id: string): Promise<WorkflowDetail> {
    const record = await this.workflows.find(id);
    const executions = await this.workflows.executionHistory(record);
    const signals = await this.signals.list(record);
    const current = executions.find((execution) => ['scheduled', 'waiting', 'in_progress'].includes(execution.state)) ?? null;
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
      executions: executions.map(toExecutionView),
      signals: signals.map((signal) => toSignalView(signal, executions)),
      waitingSince: current?.state === 'waiting' ? current.waitingSince : null,
      signalNames: this.catalog.signalNames(record.type),
    };
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
    const byId = ID_PATTERN.test(q) ? await this.workflows.find(q).catch(() => null) : null;
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
    errorMessage: execution.errorMessage,
    errorBacktrace: execution.errorBacktrace,
    cursor: execution.cursor ?? null,
    reattemptReason: execution.metadata?.reattemptReason ?? null,
    signalId: execution.signalId,
    waitingSince: execution.waitingSince,
    continuesFromId: execution.continuesFromId,
  };
}

function toSignalView(signal: Signal, executions: StepExecution[]): SignalView {
  return {
    id: signal.id,
    name: signal.name,
    idempotencyKey: signal.idempotencyKey,
    state: signal.state,
    claimed: signal.claimed,
    consumed: signal.consumed,
    payload: signal.payload,
    createdAt: signal.createdAt,
    claimedAt: signal.claimedAt,
    consumedAt: signal.consumedAt,
    claimedBy: executions.filter((execution) => execution.signalId === signal.id).map((execution) => execution.id),
  };
}

function parseDate(name: string, value: string): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new DashboardInputError(name, value, 'a date such as 2026-12-01 or 2026-12-01T14:30:00Z');
  return date;
}

/** Raw selects return driver values: Date objects, or strings on SQLite. */
function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value;
  const text = String(value);
  return new Date(/[zZ]|[+-]\d\d:?\d\d$/.test(text) ? text : `${text.replace(' ', 'T')}Z`);
}
