import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import { In, LessThan, type EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS, QUEUE_PORT } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { jobOptionsFor, successorOf, WorkflowStore } from '../persistence/workflow-store.js';
import type { QueuePort, StepJob } from '../queue/queue.port.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';

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
  stuckScheduledRecovered: number;
  /**
   * Executions housekeeping could not recover (each is logged with its error): the recovery threw,
   * or its job could not be enqueued. They stay eligible and are retried by the next run.
   */
  unrecoverable: string[];
  gauges: {
    'geneva_drive.waiting_step_executions': Gauge;
    /** Absent when `waitingVisibilityThreshold` is null. */
    'geneva_drive.waiting_overdue'?: Gauge;
  } | null;
}

/**
 * Deletes old finished/canceled workflows in batches, recovers executions stuck `in_progress` or
 * `scheduled` (a crashed worker, a lost enqueue), and reads the waiting gauges. Never touches a
 * paused workflow or a parked (`waiting`) execution, and always terminates: every sweep walks the
 * candidates once, in id order.
 * @publicApi
 */
@Injectable()
export class HousekeepingService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly schema: SchemaCapabilities,
    @Inject(QUEUE_PORT) private readonly queue: QueuePort,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
  ) {}

  async run(): Promise<HousekeepingSummary> {
    const summary: HousekeepingSummary = {
      workflowsDeleted: 0,
      stepExecutionsDeleted: 0,
      signalsDeleted: 0,
      stuckInProgressRecovered: 0,
      stuckScheduledRecovered: 0,
      unrecoverable: [],
      gauges: null,
    };
    await this.deleteOldWorkflows(summary);
    await this.recoverStuck('in_progress', summary);
    await this.recoverStuck('scheduled', summary);
    summary.gauges = await this.readGauges();
    this.logger.log(`Housekeeping: ${JSON.stringify({ ...summary, gauges: undefined })}`);
    publish('housekeeping', () => summary);
    return summary;
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
  ): Promise<void> {
    let job: StepJob | null | false;
    try {
      job = await this.transactions.run((manager) => this.recover(manager, candidate.workflowId, candidate.id, state, cutoff));
    } catch (error) {
      summary.unrecoverable.push(candidate.id);
      this.logger.error(`Housekeeping could not recover execution ${candidate.id}: ${String(error)}`);
      return;
    }
    if (job === false) return;
    if (job) {
      try {
        await this.queue.enqueue(job);
      } catch (error) {
        // Committed but not enqueued: the execution is `scheduled` and overdue, so a later run retries.
        summary.unrecoverable.push(job.executionId);
        this.logger.error(`Housekeeping could not enqueue execution ${job.executionId} (recovering ${candidate.id}): ${String(error)}`);
        return;
      }
    }
    summary[state === 'in_progress' ? 'stuckInProgressRecovered' : 'stuckScheduledRecovered']++;
  }

  /**
   * Re-checks under the locks, then applies `stuckRecoveryAction`. Returns false when the row is no
   * longer stuck, else the job to enqueue once committed (null: none).
   */
  private async recover(
    manager: EntityManager,
    workflowId: string,
    executionId: string,
    state: 'in_progress' | 'scheduled',
    cutoff: Date,
  ): Promise<StepJob | null | false> {
    const workflow = await this.store.lockWorkflow(manager, workflowId);
    const execution = await this.store.lockExecution(manager, executionId);
    const stuckSince = state === 'in_progress' ? execution?.startedAt : execution?.scheduledFor;
    if (!execution || execution.state !== state || !stuckSince || stuckSince >= cutoff) return false;
    if (workflow.state !== 'ready' && workflow.state !== 'performing') return false;
    const definition = this.registry.findByName(workflow.type);
    if (this.options.stuckRecoveryAction === 'cancel') {
      await this.store.transitionExecution(manager, execution, 'canceled', 'recovered');
      await this.store.transitionWorkflow(manager, workflow, 'canceled', { currentStepName: null });
      return null;
    }
    if (state === 'scheduled') {
      // A lost enqueue: enqueue the same execution again (its job id is its id, so a job that does
      // exist is not duplicated). Nothing changes in the database.
      return { executionId: execution.id, runAt: execution.scheduledFor, jobOptions: jobOptionsFor(definition, definition?.step(execution.stepName)) };
    }
    // A worker died mid-step: close the row and run the step again — a resumable step from its
    // cursor. The successor keeps the signal pin, so it re-reads the very event the row was given.
    const stepName = workflow.currentStepName ?? workflow.nextStepName;
    if (stepName === null) throw new Error(`Workflow ${workflow.id} has no current or next step to run again`);
    await this.store.transitionExecution(manager, execution, 'completed', 'recovered');
    const resumable = definition?.step(execution.stepName)?.resumable ?? execution.continuesFromId !== null;
    const successor = await this.store.insertExecution(
      manager,
      workflow.id,
      stepName,
      resumable ? successorOf(execution, undefined) : { signalId: execution.signalId ?? null },
    );
    await this.store.updateWorkflow(manager, workflow, { ...this.store.transitionChanges(workflow, 'ready', { currentStepName: null }), nextStepName: stepName });
    return { executionId: successor.id, runAt: successor.scheduledFor, jobOptions: jobOptionsFor(definition, definition?.step(stepName)) };
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
    return threshold === null
      ? { 'geneva_drive.waiting_step_executions': waiting }
      : { 'geneva_drive.waiting_step_executions': waiting, 'geneva_drive.waiting_overdue': overdue };
  }

  private get manager(): EntityManager {
    return this.transactions.dataSource.manager;
  }
}
