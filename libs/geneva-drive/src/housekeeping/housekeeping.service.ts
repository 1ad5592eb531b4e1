import { Inject, Injectable, Optional, type LoggerService, type OnModuleInit } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../entities/step-execution.entity.js';
import { StepRecoveryLimitError } from '../errors/step-recovery-limit.error.js';
import { recoverStuck } from '../execution/step-outcome.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { consecutiveRecoveries, executionsAfter, runHead, stuckPage } from '../persistence/recovery-queries.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { WorkflowStore } from '../persistence/workflow-store.js';
import { isDeadlineJob, timeoutJobId } from '../queue/deadline-job.js';
import type { QueuePort, StepJob, StepJobHints } from '../interfaces/queue.port.js';
import { STEP_JOB_GATE } from '../queue/queue.tokens.js';
import type { StepJobGate } from '../queue/step-job-gate.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { ConcurrencySlots } from '../execution/concurrency-slots.js';
import { WaitDeadline } from '../execution/wait-deadline.js';
import { readHousekeepingGauges } from './gauges.js';
import { emptySummary, type HousekeepingSummary } from './housekeeping-summary.js';
import { ProcessRoster } from './process-roster.js';
import { purgeStoppedWorkflows } from './purge.js';
import { isRunnable } from '../state/workflow-state.js';

export type { Gauge, StepGauge } from '../persistence/gauges.js';
export type { HousekeepingSummary } from './housekeeping-summary.js';

/** A takeover recovers what a dead run left whatever its age: the cutoff of `recover` is never reached. */
const NO_CUTOFF = new Date(8.64e15);

/**
 * Deletes old finished/canceled workflows in batches, recovers executions stuck `in_progress` or
 * `scheduled` (a crashed worker, a lost enqueue), times out parked executions whose deadline job
 * was lost, reports executions no live process can run (ProcessRoster), and reads the waiting gauges. Never touches a paused workflow, nor a parked (`waiting`)
 * execution before its deadline, and always terminates: every sweep walks the candidates once, in id order.
 * With a Redis queue it also takes over the runs of dead worker processes as soon as the queue tells
 * (see takeOverRun), so that their steps need not wait for the stuck thresholds.
 *
 * This file is the run and the recovery; the purge is purge.ts, the gauges gauges.ts, and the
 * queries of all three are in persistence/ (recovery-queries, purge-queries, gauges).
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
    private readonly roster: ProcessRoster,
    private readonly slots: ConcurrencySlots,
    @Optional() @Inject(STEP_JOB_GATE) private readonly gate?: StepJobGate,
  ) {}

  onModuleInit(): void {
    this.gate?.onTakeover((executionId, jobId, hints) => this.takeOverRun(executionId, jobId, hints));
  }

  async run(): Promise<HousekeepingSummary> {
    const summary = emptySummary();
    await purgeStoppedWorkflows(this.transactions, this.schema, this.options, summary);
    await this.recoverStuck('in_progress', summary);
    await this.recoverStuck('scheduled', summary);
    // Executions waiting for a concurrency key are not stuck (recoverStuck leaves them); a wake whose job was lost is sent again.
    const untouchedSince = new Date(Date.now() - this.options.stuckScheduledThresholdMs);
    summary.flowWaitersWoken = await this.transactions.run((manager) => this.slots.wakeStranded(manager, untouchedSince), undefined, { idempotent: true });
    const deadlines = await this.deadline.recoverOverdue();
    summary.overdueDeadlinesRecovered = deadlines.recovered;
    summary.unrecoverable.push(...deadlines.unrecoverable);
    summary.unrunnableExecutions = await this.roster.unrunnable();
    summary.gauges = await readHousekeepingGauges(this.manager, this.schema, this.options, this.deadline);
    this.logger.log(`Housekeeping: ${JSON.stringify({ ...summary, gauges: undefined })}`);
    const unrunnable = summary.unrunnableExecutions;
    if (unrunnable && unrunnable.total > 0) {
      const steps = Object.entries(unrunnable.byWorkflow).flatMap(([type, bySteps]) => Object.entries(bySteps).map(([step, count]) => `${type}.${step} (${count})`));
      this.logger.warn(
        `Housekeeping: ${unrunnable.total} scheduled or parked execution(s) can be run by no live process — ${steps.join(', ')}: no worker seen lately registers the workflow class or defines the step; deploy one that does`,
      );
    }
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
   * which may have died with the process, enqueued again — only without waiting for the thresholds;
   * parked by the run with a deadline: its deadline job, likewise (WaitDeadline.rearm); timed out by
   * a deadline job's run to run the step (onTimeout 'run') and not started yet: that step's job. The
   * job's own execution still scheduled is left to the job, which runs next.
   */
  private async takeOverRun(executionId: string, jobId: string, hints?: StepJobHints): Promise<void> {
    try {
      const last = await this.lastOfRun(executionId, jobId, hints?.workflowId);
      if (last?.state === 'waiting') return await this.deadline.rearm(last.id);
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
    const head = await runHead(this.manager, executionId, workflowId);
    // A deadline job's run that timed the wait out with onTimeout 'run' scheduled the execution under
    // a job id of its own: still scheduled, it is that run's to hand on (started, it is that job's).
    const ranBy = (row: StepExecution) => row.jobId === jobId || (isDeadlineJob(jobId) && row.state === 'scheduled' && row.jobId === timeoutJobId(executionId));
    if (!head || (head.jobId !== null && !ranBy(head))) return null;
    // A chain is at most maxSteps long; the row after it, if any, ends the walk.
    const after = await executionsAfter(this.manager, head, this.options.chainSteps.maxSteps + 1);
    let last = head;
    for (const row of after) {
      if (row.jobId !== null) break;
      last = row;
    }
    return last;
  }

  private async recoverStuck(state: 'in_progress' | 'scheduled', summary: HousekeepingSummary): Promise<void> {
    const threshold = state === 'in_progress' ? this.options.stuckInProgressThresholdMs : this.options.stuckScheduledThresholdMs;
    const cutoff = new Date(Date.now() - threshold);
    const batch = this.options.housekeepingBatchSize;
    // Keyset paging by id: any key type works (the database compares ids of one type), so the first
    // page has no lower bound rather than a sentinel such as '0' (not a valid PostgreSQL uuid).
    let after: string | null = null;
    for (;;) {
      const candidates = await stuckPage(this.manager, state, cutoff, batch, after);
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
    if (!isRunnable(workflow.state)) return false;
    const definition = this.registry.findByName(workflow.type);
    return recoverStuck(this.store, manager, { workflow, execution, definition }, state, this.options, () =>
      consecutiveRecoveries(manager, workflow.id, execution.stepName),
    );
  }

  private get manager(): EntityManager {
    return this.transactions.dataSource.manager;
  }
}
