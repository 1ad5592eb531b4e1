import { Inject, Injectable, Optional, type LoggerService, type OnModuleInit } from '@nestjs/common';
import { In, LessThan, type EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { StepRecoveryLimitError } from '../errors/step-recovery-limit.error.js';
import { recoverStuck } from '../execution/step-outcome.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { WorkflowStore } from '../persistence/workflow-store.js';
import { isDeadlineJob } from '../queue/deadline-job.js';
import type { QueuePort, StepJob, StepJobHints } from '../interfaces/queue.port.js';
import { STEP_JOB_GATE } from '../queue/queue.tokens.js';
import type { StepJobGate } from '../queue/step-job-gate.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { WaitDeadline } from '../execution/wait-deadline.js';

const RECOVERY_PAGE = 100;
/** A takeover recovers what a dead run left whatever its age: the cutoff of `recover` is never reached. */
const NO_CUTOFF = new Date(8.64e15);

/** A gauge: a total and the same count per workflow type. @publicApi */
export interface Gauge {
  total: number;
  byWorkflow: Record<string, number>;
}

/** What one housekeeping run did, and the gauges it read. @publicApi */
export interface HousekeepingSummary {
  workflowsDeleted: number;
  stepExecutionsDeleted: number;
  signalsDeleted: number;
  stuckInProgressRecovered: number;
  /** Overdue `scheduled` executions whose job was missing from the queue (a lost enqueue) and was added again. */
  stuckScheduledRecovered: number;
  /**
   * Overdue `scheduled` executions whose job was still in the queue (a backlog, not a loss): the
   * re-enqueue added nothing, so they are not counted as recovered.
   */
  stuckScheduledStillQueued: number;
  /**
   * Parked executions whose `timeout` passed more than `stuckScheduledThreshold` ago with the workflow
   * runnable (their deadline job was lost), timed out by this run.
   */
  overdueDeadlinesRecovered: number;
  /**
   * Workflows paused in this run because their step was found stuck `in_progress` once more after
   * `maxRecoveries` recoveries in a row (each also logged at error level).
   */
  pausedAtRecoveryLimit: string[];
  /**
   * Executions housekeeping could not recover (each is logged with its error): the recovery threw,
   * or its job could not be enqueued. They stay eligible and are retried by the next run.
   */
  unrecoverable: string[];
  gauges: {
    'geneva_drive.waiting_step_executions': Gauge;
    /** Absent when `waitingVisibilityThreshold` is null. */
    'geneva_drive.waiting_overdue'?: Gauge;
    /** Workflows paused by the recovery limit and not resumed, skipped or canceled since. */
    'geneva_drive.recovery_limit_paused': Gauge;
    /** Every paused workflow, whatever paused it (an operator, a step, a failure, the recovery limit). */
    'geneva_drive.paused_workflows': Gauge;
    /** Parked executions with a deadline (`timeout`). Absent without the wait-deadlines migration. */
    'geneva_drive.waiting_with_deadline'?: Gauge;
    /** Of those, deadlines overdue by more than `stuckScheduledThreshold` (a lost job; housekeeping times them out). */
    'geneva_drive.deadlines_overdue'?: Gauge;
  } | null;
}

/**
 * Deletes old finished/canceled workflows in batches, recovers executions stuck `in_progress` or
 * `scheduled` (a crashed worker, a lost enqueue), times out parked executions whose deadline job
 * was lost, and reads the waiting gauges. Never touches a paused workflow, nor a parked (`waiting`)
 * execution before its deadline, and always terminates: every sweep walks the candidates once, in id order.
 * With a Redis queue it also takes over the runs of dead worker processes as soon as the queue tells
 * (see takeOverRun), so that their steps need not wait for the stuck thresholds.
 * @publicApi
 */
@Injectable()
export class HousekeepingService implements OnModuleInit {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly schema: SchemaCapabilities,
    @Inject(QUEUE_PORT) private readonly queue: QueuePort,
    private readonly deadline: WaitDeadline,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
    @Optional() @Inject(STEP_JOB_GATE) private readonly gate?: StepJobGate,
  ) {}

  onModuleInit(): void {
    this.gate?.onTakeover((executionId, jobId, hints) => this.takeOverRun(executionId, jobId, hints));
  }

  async run(): Promise<HousekeepingSummary> {
    const summary = emptySummary();
    await this.deleteOldWorkflows(summary);
    await this.recoverStuck('in_progress', summary);
    await this.recoverStuck('scheduled', summary);
    const deadlines = await this.deadline.recoverOverdue();
    summary.overdueDeadlinesRecovered = deadlines.recovered;
    summary.unrecoverable.push(...deadlines.unrecoverable);
    summary.gauges = await this.readGauges();
    this.logger.log(`Housekeeping: ${JSON.stringify({ ...summary, gauges: undefined })}`);
    publish('housekeeping', () => summary);
    return summary;
  }

  /**
   * The process that ran job `jobId` (execution `executionId`) died: the queue says so, through Bull's
   * stalled-job check (the job's lock expired) or a RunLedger takeover job (the lease of the process
   * that started it in-process expired). What the run was at is found from the rows: the job's own
   * execution once it started it (its `jobId` is the job's), then each step chained inline after it
   * (a chained start records no job id), up to the first execution a job of its own started. The
   * last of these is recovered as a stuck one would be — in progress: closed as `recovered` and run
   * again (same `stuckRecoveryAction`, same `maxRecoveries`), its successor starting in this worker
   * once the takeover ends rather than behind the queue's backlog; scheduled by the run: its job,
   * which may have died with the process, enqueued again — only without waiting for the thresholds.
   * The job's own execution still scheduled is left to the job, which runs next.
   */
  private async takeOverRun(executionId: string, jobId: string, hints?: StepJobHints): Promise<void> {
    try {
      const last = await this.lastOfRun(executionId, jobId, hints?.workflowId);
      if (!last || (last.state !== 'in_progress' && last.state !== 'scheduled')) return;
      if (last.state === 'scheduled' && last.id === executionId && !isDeadlineJob(jobId)) return;
      const summary = emptySummary();
      await this.recoverOne(last, last.state, NO_CUTOFF, summary, true);
      if (summary.stuckInProgressRecovered + summary.stuckScheduledRecovered + summary.pausedAtRecoveryLimit.length > 0) {
        this.logger.warn(`Job ${jobId} was taken over from a dead process: execution ${last.id} (${last.state}) recovered`);
      }
    } catch (error) {
      this.logger.error(`Taking job ${jobId} over from a dead process failed (housekeeping recovers its execution later): ${String(error)}`);
    }
  }

  /** The last execution of the run of job `jobId` (see takeOverRun); null when the job's own execution was started by another job. */
  private async lastOfRun(executionId: string, jobId: string, workflowId?: string): Promise<StepExecution | null> {
    const head = await this.manager.findOne(StepExecution, {
      where: workflowId === undefined ? { id: executionId } : { id: executionId, workflowId },
      select: { id: true, workflowId: true, state: true, jobId: true, createdAt: true },
    });
    if (!head || (head.jobId !== null && head.jobId !== jobId)) return null;
    const after = await this.manager
      .createQueryBuilder(StepExecution, 'e')
      .select(['e.id', 'e.workflowId', 'e.state', 'e.jobId', 'e.createdAt'])
      .where('e.workflowId = :workflowId', { workflowId: head.workflowId })
      .andWhere('(e.createdAt > :createdAt OR (e.createdAt = :createdAt AND e.id > :id))', { createdAt: head.createdAt, id: head.id })
      .orderBy('e.createdAt', 'ASC')
      .addOrderBy('e.id', 'ASC')
      // A chain is at most maxSteps long; the row after it, if any, ends the walk.
      .limit(this.options.chainSteps.maxSteps + 1)
      .getMany();
    let last = head;
    for (const row of after) {
      if (row.jobId !== null) break;
      last = row;
    }
    return last;
  }

  private async deleteOldWorkflows(summary: HousekeepingSummary): Promise<void> {
    if (this.options.deleteCompletedWorkflowsAfterMs === null) return;
    const cutoff = new Date(Date.now() - this.options.deleteCompletedWorkflowsAfterMs);
    const batch = this.options.housekeepingBatchSize;
    for (;;) {
      // Ids first, then deletes by id: portable (MySQL refuses LIMIT inside IN (subquery)) and bounded.
      const ids = (
        await this.manager.find(WorkflowRecord, {
          select: { id: true },
          where: { state: In(['finished', 'canceled']), finishedAt: LessThan(cutoff) },
          take: batch,
        })
      ).map((row) => row.id);
      if (ids.length === 0) return;
      await this.transactions.run(async (manager) => {
        if (this.schema.hasSignals) summary.signalsDeleted += (await manager.delete(Signal, { workflowId: In(ids) })).affected ?? 0;
        summary.stepExecutionsDeleted += (await manager.delete(StepExecution, { workflowId: In(ids) })).affected ?? 0;
        summary.workflowsDeleted += (await manager.delete(WorkflowRecord, { id: In(ids) })).affected ?? 0;
      });
      if (ids.length < batch) return;
    }
  }

  private async recoverStuck(state: 'in_progress' | 'scheduled', summary: HousekeepingSummary): Promise<void> {
    const threshold = state === 'in_progress' ? this.options.stuckInProgressThresholdMs : this.options.stuckScheduledThresholdMs;
    const cutoff = new Date(Date.now() - threshold);
    const batch = this.options.housekeepingBatchSize;
    // Keyset paging by id: any key type works (the database compares ids of one type), so the first
    // page has no lower bound rather than a sentinel such as '0' (not a valid PostgreSQL uuid).
    let after: string | null = null;
    for (;;) {
      const query = this.manager
        .createQueryBuilder(StepExecution, 'e')
        .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
        .select(['e.id', 'e.workflowId'])
        .where('e.state = :state', { state })
        .andWhere(state === 'in_progress' ? 'e.startedAt < :cutoff' : 'e.scheduledFor < :cutoff', { cutoff })
        .andWhere('w.state IN (:...runnable)', { runnable: ['ready', 'performing'] })
        .orderBy('e.id', 'ASC')
        // limit, not take: the join selects nothing, so one plain LIMIT query (take would add a DISTINCT pre-query).
        .limit(batch);
      if (after !== null) query.andWhere('e.id > :after', { after });
      const candidates = await query.getMany();
      for (const candidate of candidates) await this.recoverOne(candidate, state, cutoff, summary);
      if (candidates.length < batch) return;
      after = candidates[candidates.length - 1].id;
    }
  }

  /**
   * One row: the recovery transaction, then (after its commit) the job it calls for, awaited, so a
   * failed enqueue is reported instead of being counted as a recovery.
   */
  private async recoverOne(
    candidate: Pick<StepExecution, 'id' | 'workflowId'>,
    state: 'in_progress' | 'scheduled',
    cutoff: Date,
    summary: HousekeepingSummary,
    /** A takeover's: the successor of an execution in progress may start in this worker (DueJobStarter), which just freed a slot for it. */
    mayStartHere = false,
  ): Promise<void> {
    let job: StepJob | null | false | StepRecoveryLimitError;
    try {
      // Idempotent: `recover` re-checks under the locks that the row is still stuck, so a retry after
      // a COMMIT that went through unacknowledged finds nothing to do.
      job = await this.transactions.run((manager) => this.recover(manager, candidate.workflowId, candidate.id, state, cutoff), undefined, { idempotent: true });
    } catch (error) {
      summary.unrecoverable.push(candidate.id);
      this.logger.error(`Housekeeping could not recover execution ${candidate.id}: ${String(error)}`);
      return;
    }
    if (job === false) return;
    if (job instanceof StepRecoveryLimitError) {
      summary.pausedAtRecoveryLimit.push(job.workflowId);
      this.logger.error(`Housekeeping: ${job.message}`);
      return;
    }
    let added: boolean | void = true;
    if (job) {
      try {
        added = await this.queue.enqueue(job, mayStartHere && state === 'in_progress' ? undefined : { reportAdded: true });
      } catch (error) {
        // Committed but not enqueued: the execution is `scheduled` and overdue, so a later run retries.
        summary.unrecoverable.push(job.executionId);
        this.logger.error(`Housekeeping could not enqueue execution ${job.executionId} (recovering ${candidate.id}): ${String(error)}`);
        return;
      }
    }
    if (state === 'in_progress') summary.stuckInProgressRecovered++;
    else if (added === false) summary.stuckScheduledStillQueued++;
    else summary.stuckScheduledRecovered++;
  }

  /**
   * Re-checks under the locks, then applies `stuckRecoveryAction` (StepOutcomes' recoverStuck).
   * Returns false when the row is no longer stuck, the reason when the recovery limit paused the
   * workflow, else the job to enqueue once committed (null: none).
   */
  private async recover(
    manager: EntityManager,
    workflowId: string,
    executionId: string,
    state: 'in_progress' | 'scheduled',
    cutoff: Date,
  ): Promise<StepJob | null | false | StepRecoveryLimitError> {
    const workflow = await this.store.lockWorkflow(manager, workflowId);
    const execution = await this.store.lockExecution(manager, executionId);
    const stuckSince = state === 'in_progress' ? execution?.startedAt : execution?.scheduledFor;
    if (!execution || execution.state !== state || !stuckSince || stuckSince >= cutoff) return false;
    if (workflow.state !== 'ready' && workflow.state !== 'performing') return false;
    const definition = this.registry.findByName(workflow.type);
    return recoverStuck(this.store, manager, { workflow, execution, definition }, state, this.options, () =>
      this.consecutiveRecoveries(manager, workflow.id, execution.stepName),
    );
  }

  /**
   * How many times in a row `stepName` was recovered from a dead worker: its `recovered` rows, newest
   * first, until a row that shows the step got through (success, continued, skipped) or was stopped
   * (failed, canceled — and so resumed or skipped by an operator since). Reattempted rows are passed
   * over: a body that throws between crashes is no less poisonous. Counting the history, not a
   * counter carried from row to row, holds whatever successor came between (a reattempt, a resumable
   * step's continuation), needs no schema change, and orders by creation time then id like every
   * history walk, so integer and uuid keys alike.
   */
  private async consecutiveRecoveries(manager: EntityManager, workflowId: string, stepName: string): Promise<number> {
    let count = 0;
    for (let skip = 0; ; skip += RECOVERY_PAGE) {
      const rows = await manager.find(StepExecution, {
        where: { workflowId, stepName, state: In(['completed', 'failed', 'canceled', 'skipped']) },
        select: { id: true, outcome: true, createdAt: true },
        order: { createdAt: 'DESC', id: 'DESC' },
        skip,
        take: RECOVERY_PAGE,
      });
      for (const row of rows) {
        if (row.outcome === 'recovered') count++;
        else if (row.outcome !== 'reattempted') return count;
      }
      if (rows.length < RECOVERY_PAGE) return count;
    }
  }

  private async readGauges(): Promise<HousekeepingSummary['gauges']> {
    if (!this.schema.hasSignals) return null;
    const threshold = this.options.waitingVisibilityThresholdMs;
    // With the threshold off, nothing is ever overdue and the overdue gauge is not reported.
    const overdueBefore = new Date(threshold === null ? 0 : Date.now() - threshold);
    const rows: Array<{ type: unknown; waiting: string | number; overdue: string | number | null }> = await this.manager
      .createQueryBuilder(StepExecution, 'e')
      .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
      .select('w.type', 'type')
      .addSelect('COUNT(*)', 'waiting')
      .addSelect('SUM(CASE WHEN e.waitingSince < :overdueBefore THEN 1 ELSE 0 END)', 'overdue')
      .where('e.state = :waiting', { waiting: 'waiting' })
      .setParameter('overdueBefore', overdueBefore)
      .groupBy('w.type')
      .getRawMany();
    const waiting: Gauge = { total: 0, byWorkflow: {} };
    const overdue: Gauge = { total: 0, byWorkflow: {} };
    for (const row of rows) {
      const type = String(identifierText(row.type)); // a raw read: no entity transformer
      waiting.byWorkflow[type] = Number(row.waiting);
      waiting.total += Number(row.waiting);
      overdue.byWorkflow[type] = Number(row.overdue ?? 0);
      overdue.total += Number(row.overdue ?? 0);
    }
    const paused = await this.readRecoveryLimitGauge();
    const always = { 'geneva_drive.recovery_limit_paused': paused, 'geneva_drive.paused_workflows': await this.readPausedGauge() };
    const gauges: NonNullable<HousekeepingSummary['gauges']> =
      threshold === null
        ? { 'geneva_drive.waiting_step_executions': waiting, ...always }
        : { 'geneva_drive.waiting_step_executions': waiting, 'geneva_drive.waiting_overdue': overdue, ...always };
    const deadlines = await this.deadline.readGauges();
    if (deadlines) {
      gauges['geneva_drive.waiting_with_deadline'] = gaugeOf(deadlines.withDeadline);
      gauges['geneva_drive.deadlines_overdue'] = gaugeOf(deadlines.overdue);
    }
    return gauges;
  }

  /** Paused workflows whose latest execution is the one the recovery limit failed (nothing came after it). */
  private async readRecoveryLimitGauge(): Promise<Gauge> {
    const rows: Array<{ type: string; paused: string | number }> = await this.manager
      .createQueryBuilder(StepExecution, 'e')
      .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
      .select('w.type', 'type')
      .addSelect('COUNT(*)', 'paused')
      .where('w.state = :paused', { paused: 'paused' })
      .andWhere('e.state = :failed', { failed: 'failed' })
      .andWhere('e.errorClassName = :limit', { limit: StepRecoveryLimitError.name })
      .andWhere((qb) => {
        const later = qb.subQuery().select('1').from(StepExecution, 'l').where('l.workflow_id = e.workflow_id').andWhere('l.created_at > e.created_at');
        return `NOT EXISTS ${later.getQuery()}`;
      })
      .groupBy('w.type')
      .getRawMany();
    const gauge: Gauge = { total: 0, byWorkflow: {} };
    for (const row of rows) {
      gauge.byWorkflow[row.type] = Number(row.paused);
      gauge.total += Number(row.paused);
    }
    return gauge;
  }

  /** Paused workflows by type: a read of the (type, state, id) index. */
  private async readPausedGauge(): Promise<Gauge> {
    const rows: Array<{ type: unknown; paused: string | number }> = await this.manager
      .createQueryBuilder(WorkflowRecord, 'w')
      .select('w.type', 'type')
      .addSelect('COUNT(*)', 'paused')
      .where('w.state = :paused', { paused: 'paused' })
      .groupBy('w.type')
      .getRawMany();
    const gauge: Gauge = { total: 0, byWorkflow: {} };
    for (const row of rows) {
      gauge.byWorkflow[String(identifierText(row.type))] = Number(row.paused);
      gauge.total += Number(row.paused);
    }
    return gauge;
  }

  private get manager(): EntityManager {
    return this.transactions.dataSource.manager;
  }
}

function emptySummary(): HousekeepingSummary {
  return {
    workflowsDeleted: 0,
    stepExecutionsDeleted: 0,
    signalsDeleted: 0,
    stuckInProgressRecovered: 0,
    stuckScheduledRecovered: 0,
    stuckScheduledStillQueued: 0,
    overdueDeadlinesRecovered: 0,
    pausedAtRecoveryLimit: [],
    unrecoverable: [],
    gauges: null,
  };
}

function gaugeOf(byWorkflow: Record<string, number>): Gauge {
  return { total: Object.values(byWorkflow).reduce((sum, n) => sum + n, 0), byWorkflow };
}
