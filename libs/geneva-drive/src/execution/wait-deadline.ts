import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { DeadlinesNotMigratedError } from '../errors/signal.errors.js';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { withMetadata } from './error-record.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import type { TimeoutAction } from '../workflow/step-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { deadlineGauges } from '../persistence/gauges.js';
import { overdueDeadlinePage } from '../persistence/recovery-queries.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { jobOptionsFor, WorkflowStore } from '../persistence/workflow-store.js';
import { deadlineJobId } from '../queue/deadline-job.js';
import type { StepDefinition, WorkflowDefinition } from '../registry/workflow-definition.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { SignalRendezvous } from './signal-rendezvous.js';
import { StepOutcomes } from './step-outcome.js';
import { UnownedSteps } from './unowned-steps.js';

/**
 * A timer may fire a little early by the wall clock (Node's timers, clocks of two hosts): a deadline
 * job this close to its time counts as due rather than being dropped for housekeeping to find later.
 */
const DUE_TOLERANCE_MS = 1_000;

/** What one expired wait did, for the `geneva-drive:signal` event and the test helpers. */
export interface ExpiredWait {
  workflowId: string;
  executionId: string;
  stepName: string;
  onTimeout: TimeoutAction;
}

/** Counts of housekeeping's sweep of lost deadline jobs. */
export interface DeadlineSweep {
  recovered: number;
  unrecoverable: string[];
}

/**
 * Wait deadlines of `waitFor` steps with a `timeout`: park with a deadline, fire a deadline, time a
 * step out. The deadline is `timeout_at` on the parked execution (the truth) and a delayed queue job
 * with its own id (the clock); nothing polls. Every decision is taken under the workflow row lock,
 * like every rendezvous, so a signal and the deadline settle one way: the signal that commits first
 * wakes the step and the deadline job finds nothing parked; a deadline that commits first times the
 * step out and the later signal is buffered for a later waiter.
 */
@Injectable()
export class WaitDeadline {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly schema: SchemaCapabilities,
    private readonly rendezvous: SignalRendezvous,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
    private readonly unowned: UnownedSteps,
  ) {
    this.outcomes = new StepOutcomes(store, rendezvous);
  }

  /** What a timed-out wait writes (StepOutcomes.expireWait). */
  private readonly outcomes: StepOutcomes;

  /** At the gate: a step with a `timeout` needs the wait-deadlines migration. */
  assertSchema(workflow: WorkflowRecord, step: StepDefinition): void {
    if (step.timeoutMs !== undefined && !this.schema.hasDeadlines) throw new DeadlinesNotMigratedError(`Step ${workflow.type}.${step.name} (timeout)`);
  }

  /**
   * Just parked: records the deadline (written with the UPDATE that parks the execution, in the same
   * batch) and enqueues its job (after commit). A step without `timeout` has none and costs nothing.
   */
  async arm(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution, step: StepDefinition, definition: WorkflowDefinition): Promise<void> {
    if (step.timeoutMs === undefined) return;
    const timeoutAt = new Date(this.store.now().getTime() + step.timeoutMs);
    await this.updateExecution(manager, execution, { timeoutAt });
    await this.enqueueDeadline(manager, workflow, execution, definition, step);
  }

  /**
   * Whether the execution runs because its wait timed out: marked so by the deadline, or continuing
   * (a resumable step's successor) a chain that timed out — the mark is carried to the successor so
   * the next one finds it on its predecessor.
   */
  async timedOut(manager: EntityManager, execution: StepExecution): Promise<boolean> {
    if (execution.signalId !== null && execution.signalId !== undefined) return false;
    if (execution.metadata?.timedOut === true) return true;
    if (execution.continuesFromId === null) return false;
    await this.store.flush(manager); // a read inside a batched phase sees the phase's writes
    const predecessor = await manager.findOne(StepExecution, { where: { id: execution.continuesFromId }, select: { id: true, metadata: true } });
    if (predecessor?.metadata?.timedOut !== true) return false;
    await this.updateExecution(manager, execution, { metadata: withMetadata(execution, { timedOut: true }) });
    return true;
  }

  /**
   * The deadline job (or `expireWait`, with `force`, or housekeeping): times the wait out if the
   * execution is still parked, its workflow runnable and its deadline reached; otherwise a no-op
   * (a signal won, the workflow is paused — resume applies the deadline — or stopped). Rejects with
   * StepNotDefinedError, having decided nothing, when this process does not have the class or the
   * step (UnownedSteps): the queue leaves the deadline job to a process that has them.
   */
  async fire(executionId: string, options: { force?: boolean } = {}): Promise<ExpiredWait | null> {
    const row = await this.transactions.dataSource.manager.findOne(StepExecution, { where: { id: executionId }, select: { id: true, workflowId: true } });
    if (!row) return null;
    let refused = null as StepNotDefinedError | null; // set inside the transaction
    const expired = await this.transactions.run(
      (manager) =>
        // The phase's writes go out together, as the executor's do (WorkflowStore.batched).
        this.store.batched(manager, async () => {
          refused = null; // a transaction run again after a lost connection decides afresh
          const { workflow, execution } = await this.store.lockStep(manager, row.workflowId, executionId);
          if (!execution || execution.state !== 'waiting' || workflow.state !== 'ready') return null;
          refused = this.unowned.refuse(workflow.type, execution.stepName, workflow.id, execution.id, 'deadline job');
          if (refused) return null;
          if (!options.force && !this.isDue(execution)) {
            this.logger.warn(`Deadline job of execution ${executionId} came before its deadline ${execution.timeoutAt?.toISOString() ?? '(none)'}: ignored`);
            return null;
          }
          return this.expire(manager, workflow, execution);
        }),
      undefined,
      { idempotent: true },
    );
    if (refused) throw refused;
    if (expired) publish('signal', () => ({ ...expired, timedOut: true }));
    return expired;
  }

  /**
   * `resume` of a workflow whose execution is parked: a deadline that passed while it was paused
   * applies now (true); otherwise its job is enqueued again (the local queue does not rebuild the
   * timers of paused workflows, and a re-enqueue of a job still queued adds nothing) and false.
   */
  async onResume(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution): Promise<boolean> {
    const definition = this.registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    if (!definition || !step || step.timeoutMs === undefined || !this.schema.hasDeadlines || !execution.timeoutAt) return false;
    if (this.isDue(execution)) {
      const expired = await this.expire(manager, workflow, execution);
      if (expired) publish('signal', () => ({ ...expired, timedOut: true }));
      return expired !== null;
    }
    await this.enqueueDeadline(manager, workflow, execution, definition, step);
    return false;
  }

  /**
   * A takeover of the run that parked the execution (its process died, perhaps before the deadline job
   * reached the queue): the job is enqueued again — an add of a job still queued adds nothing — or,
   * the deadline passed meanwhile, the wait times out now. Nothing for an execution no longer
   * parked, a workflow not runnable, or a class or step this process does not have.
   */
  async rearm(executionId: string): Promise<void> {
    if (!this.schema.hasDeadlines) return;
    const manager = this.transactions.dataSource.manager;
    const execution = await manager.findOne(StepExecution, { where: { id: executionId } });
    if (execution?.state !== 'waiting' || !execution.timeoutAt) return;
    const workflow = await manager.findOne(WorkflowRecord, { where: { id: execution.workflowId } });
    const definition = workflow && this.registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    if (!workflow || workflow.state !== 'ready' || !definition || step?.timeoutMs === undefined) return;
    const due = this.isDue(execution);
    this.logger.warn(`The run that parked execution ${execution.id} was taken over from a dead process: its deadline ${due ? 'applies now' : 'job is enqueued again'}`);
    if (due) await this.fire(execution.id);
    else await this.enqueueDeadline(manager, workflow, execution, definition, step);
  }

  /**
   * Housekeeping: parked executions of runnable workflows whose deadline passed more than
   * `stuckScheduledThreshold` ago — their job was lost — are timed out now (see overdueDeadlinePage).
   */
  async recoverOverdue(): Promise<DeadlineSweep> {
    const sweep: DeadlineSweep = { recovered: 0, unrecoverable: [] };
    if (!this.schema.hasDeadlines) return sweep;
    const cutoff = this.overdueCutoff();
    const batch = this.options.housekeepingBatchSize;
    let after: string | null = null;
    for (;;) {
      const candidates = await overdueDeadlinePage(this.transactions.dataSource.manager, cutoff, batch, after);
      for (const candidate of candidates) {
        try {
          if (await this.fire(candidate.id)) sweep.recovered++;
        } catch (error) {
          // Another version's step: not this process's to time out (housekeeping reports it as unrunnable if no live process has it).
          if (error instanceof StepNotDefinedError) continue;
          sweep.unrecoverable.push(candidate.id);
          this.logger.error(`Housekeeping could not time out execution ${candidate.id}: ${String(error)}`);
        }
      }
      if (candidates.length < batch) return sweep;
      after = candidates[candidates.length - 1].id;
    }
  }

  /**
   * Per workflow type: parked executions with a deadline, and those whose deadline passed more than
   * `stuckScheduledThreshold` ago on a runnable workflow (their job was lost; housekeeping recovers them).
   */
  async readGauges(): Promise<{ withDeadline: Record<string, number>; overdue: Record<string, number> } | null> {
    if (!this.schema.hasDeadlines) return null;
    return deadlineGauges(this.transactions.dataSource.manager, this.overdueCutoff());
  }

  private overdueCutoff(): Date {
    return new Date(this.store.now().getTime() - this.options.stuckScheduledThresholdMs);
  }

  private isDue(execution: StepExecution): boolean {
    return execution.timeoutAt !== null && execution.timeoutAt !== undefined && execution.timeoutAt.getTime() <= this.store.now().getTime() + DUE_TOLERANCE_MS;
  }

  private async enqueueDeadline(
    manager: EntityManager,
    workflow: WorkflowRecord,
    execution: StepExecution,
    definition: WorkflowDefinition,
    step: StepDefinition,
  ): Promise<void> {
    // The job runs at the deadline: the store's enqueue takes its time from `scheduledFor`. Never
    // started inline or in the enqueuing process (`chain: false`): it goes through the queue's delay.
    const job = { id: execution.id, stepName: execution.stepName, scheduledFor: execution.timeoutAt } as StepExecution;
    await this.store.enqueue(manager, workflow, job, { ...jobOptionsFor(definition, step), chain: false }, deadlineJobId(execution.id));
  }

  /** Writes columns of the execution through the store (batched with the phase's other writes) and keeps the in-memory row in step. */
  private async updateExecution(manager: EntityManager, execution: StepExecution, changes: Partial<StepExecution>): Promise<void> {
    await this.store.updateRow<StepExecution>(manager, 'executions', execution.id, changes);
    Object.assign(execution, changes);
  }

  /**
   * Times the parked execution out as its step's `onTimeout` says, the locks held and the workflow
   * `ready`. The execution's metadata records `timedOut: true` whatever the action.
   */
  private async expire(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution): Promise<ExpiredWait | null> {
    const definition = this.registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    // A deploy removed the step or its timeout: the execution stays parked (resume or a signal deals with it).
    if (!definition || !step?.waitFor || step.timeoutMs === undefined) return null;
    this.logger.log(`Step ${workflow.type}.${step.name} of workflow ${workflow.id} timed out waiting: ${step.onTimeout}`);
    await this.outcomes.expireWait(manager, { workflow, execution, definition }, step);
    return { workflowId: workflow.id, executionId: execution.id, stepName: step.name, onTimeout: step.onTimeout };
  }
}
