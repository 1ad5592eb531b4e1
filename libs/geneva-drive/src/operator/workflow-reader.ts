import { Inject, Injectable } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { waitingGauges } from '../persistence/gauges.js';
import { countStuck } from '../persistence/recovery-queries.js';
import { countsByTypeAndState, executionsIn, listWorkflows, typeStateIndexUsable, type WorkflowListQuery } from '../persistence/workflow-list.js';
import { SignalService } from '../client/signal.service.js';
import { WorkflowService } from '../client/workflow.service.js';
import { OPERATOR_DATA_SOURCE } from './operator.constants.js';
import { DashboardInputError } from '../errors/dashboard-input.error.js';
import { WorkflowCatalog, type StepSummary } from './workflow-catalog.js';
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

const ID_PATTERN = /^(\d{1,20}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/i;
const OVERVIEW_LIMIT = 10;

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
    private readonly signals: SignalService,
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
      recentFailures: recentFailures.map((row) => ({ ...row, workflowId: String(row.workflowId), failedAt: toDate(row.failedAt) })) as Overview['recentFailures'],
      longestWaiting: longestWaiting.map((row) => ({ ...row, workflowId: String(row.workflowId), waitingSince: toDate(row.waitingSince) })) as Overview['longestWaiting'],
    };
  }

  /** One page of workflows matching the filters, newest first. Throws DashboardInputError for a bad filter. */
  async list(filters: ListFilters, pageSize: number): Promise<WorkflowPage> {
    if (filters.state && !WORKFLOW_STATES.includes(filters.state as WorkflowState)) throw new DashboardInputError('state', filters.state, `one of ${WORKFLOW_STATES.join(', ')}`);
    const dates: Pick<WorkflowListQuery, 'createdFrom' | 'createdTo' | 'updatedFrom' | 'updatedTo'> = {};
    for (const key of ['createdFrom', 'createdTo', 'updatedFrom', 'updatedTo'] as const) {
      const value = filters[key];
      if (value) dates[key] = parseDate(key, value);
    }
    const search = filters.q ? await this.search(filters.q.trim()) : undefined;
    if (filters.after && !ID_PATTERN.test(filters.after)) throw new DashboardInputError('after', filters.after, 'a workflow id');
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
      before: filters.after,
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

  /** Matches the hero id, or the workflow id (looked up first: a malformed id is simply no match). */
  private async search(q: string): Promise<WorkflowListQuery['search']> {
    const byId = ID_PATTERN.test(q) ? await this.workflows.find(q).catch(() => null) : null;
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
