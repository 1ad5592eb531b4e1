import { AsyncResource } from 'node:async_hooks';
import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import { StepExecution } from '../entities/step-execution.entity.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { runInJobContext } from '../instrumentation/job-context.js';
import { pause, TransactionRunner } from '../persistence/transaction-runner.js';
import { WorkflowStore } from '../persistence/workflow-store.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { ChildStart } from './child-start.js';
import { ConcurrencySlots } from './concurrency-slots.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { FinalizePhase } from './finalize-phase.js';
import { PreparePhase } from './prepare-phase.js';
import { RateWindows } from './rate-windows.js';
import { SignalRendezvous } from './signal-rendezvous.js';
import { StepBody } from './step-body.js';
import { StepOutcomes } from './step-outcome.js';
import { TransactionalStep } from './transactional-step.js';
import { UnownedSteps } from './unowned-steps.js';
import { LOOKUP_ATTEMPTS, LOOKUP_PAUSE_MS, type BodyResult, type Chain, type ExecuteOptions, type Prepared } from './step-run.js';
import { WaitDeadline } from './wait-deadline.js';
import { WorkflowInstances } from './workflow-instances.js';
import { ChainedStarts } from './chained-start.js';

export type { ExecuteOptions } from './step-run.js';

/**
 * Runs one step execution in three phases, each in a file of its own:
 *  1. prepare (prepare-phase.ts), under the workflow + execution row locks: reject duplicate or late
 *     jobs, check the workflow and hero, evaluate cancelIf / skipIf / the signal gate, and mark the
 *     execution started;
 *  2. run the body (step-body.ts) with no lock held (hooks around it, flow control and errors captured);
 *  3. finalize (finalize-phase.ts), under the locks again: record the outcome (step-outcome.ts) and
 *     schedule what comes next, starting it inline when it is due and the chain allows.
 * A transactional step runs 2 and 3 in one transaction (transactional-step.ts).
 * A step's own exception is re-thrown to the queue only after its outcome is committed.
 *
 * The engine's own worker: queue adapters and test helpers call it; an application does not.
 * @internal
 */
@Injectable()
export class ExecutorService {
  private readonly preparePhase: PreparePhase;
  private readonly body: StepBody;
  private readonly finalizePhase: FinalizePhase;
  private readonly transactionalStep: TransactionalStep;

  constructor(
    private readonly transactions: TransactionRunner,
    store: WorkflowStore,
    registry: WorkflowRegistry,
    instances: WorkflowInstances,
    gate: SignalRendezvous,
    // [deadline hook] wait deadlines of `waitFor` steps with a `timeout` (execution/wait-deadline.ts).
    deadline: WaitDeadline,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
    private readonly unowned: UnownedSteps,
    schema: SchemaCapabilities,
    slots: ConcurrencySlots,
  ) {
    const outcomes = new StepOutcomes(store, gate);
    const childStart = new ChildStart(store, schema, () => ({
      registry,
      dataSource: transactions.dataSource,
      schema,
      payloadLimit: options.maxSignalPayloadSize,
    }));
    this.preparePhase = new PreparePhase(
      transactions,
      store,
      registry,
      instances,
      gate,
      deadline,
      outcomes,
      logger,
      (prepared, result) => this.finalizePhase.finalize(prepared, result),
      unowned,
      slots,
      new RateWindows(store, schema),
    );
    this.body = new StepBody(transactions, options, () => this.shuttingDown, () => childStart.outputs());
    this.finalizePhase = new FinalizePhase(transactions, store, outcomes, this.preparePhase, childStart, slots, new ChainedStarts(store, instances, logger));
    this.transactionalStep = new TransactionalStep(transactions, store, this.body, this.finalizePhase);
  }

  private shuttingDown = false;

  /** From now on, resumable steps stop at their next checkpoint (the application is shutting down). */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  /**
   * The async context the service was built in (the application's bootstrap): every job runs in it,
   * not in that of whoever hands the job over — a job started in the process that enqueued it would
   * otherwise see the AsyncLocalStorage stores of the start() or signal() call behind it (a request's,
   * a transaction a library keeps there).
   */
  private readonly jobScope = new AsyncResource('GenevaDriveStepJob');

  /**
   * Runs the execution with this id if it is due to run; a duplicate or late job is a logged no-op.
   * Rejects with StepNotDefinedError, having decided nothing, when this process does not have the
   * execution's class or step (UnownedSteps): the queue then leaves the job to another process.
   */
  execute(executionId: string, options: ExecuteOptions = {}): Promise<void> {
    // In the trace context of the call that created the job (steps chained inline stay in it).
    return this.jobScope.runInAsyncScope(() => runInJobContext(options.hints?.traceparent, () => this.executeJob(executionId, options)));
  }

  private async executeJob(executionId: string, options: ExecuteOptions): Promise<void> {
    // A job whose hints name a class or step this process does not have goes back before any read
    // (a workflow's type and an execution's step never change); phase 1 checks the rows all the same.
    const { workflowType, stepName, workflowId: hinted } = options.hints ?? {};
    const refused = workflowType === undefined || stepName === undefined || hinted === undefined ? null : this.unowned.refuse(workflowType, stepName, hinted, executionId);
    if (refused) throw refused;
    const workflowId = options.hints?.workflowId ?? (await this.findWorkflowId(executionId));
    let prepared = workflowId === null ? null : await this.preparePhase.prepareSafely(executionId, workflowId, options);
    // A job may start before the transaction that enqueued it commits (enqueueAfterCommit: false,
    // a replica behind): a few short lookups give the commit time to land.
    for (let attempt = 1; prepared !== null && 'missing' in prepared && attempt < LOOKUP_ATTEMPTS; attempt++) {
      await pause(LOOKUP_PAUSE_MS);
      prepared = await this.preparePhase.prepareSafely(executionId, workflowId!, options);
    }
    if (prepared === null || 'missing' in prepared) {
      this.logger.warn(`Step execution ${executionId} does not exist (deleted, or never committed); job ignored`);
      return;
    }
    if ('done' in prepared) {
      if (prepared.error !== undefined) throw prepared.error;
      return;
    }
    const chain: Chain = { steps: 1, startedAt: performance.now() };
    let run: Prepared | null = prepared.run;
    while (run) {
      if (run.step.transactional) {
        // Body and outcome in one transaction, and the step after it started inline in it when it may.
        const current = run;
        run = await this.transactionalStep.run(current, (result) => (this.mayChain(current, result, chain) ? chain : undefined));
      } else {
        const result = await this.body.run(run);
        run = await this.finalizePhase.finalize(run, result, this.mayChain(run, result, chain) ? chain : undefined);
      }
      chain.steps++;
    }
  }

  /** Whether the step after this one may start inline, in the transaction that records this one's outcome. */
  private mayChain(prepared: Prepared, result: BodyResult, chain: Chain): boolean {
    const { maxSteps, maxDurationMs } = this.options.chainSteps;
    // Only after a plain completion: flow control (a resumable step's `continue` above all) and
    // errors keep going through the queue, which is what lets other work in between.
    return (
      prepared.run.chain === true &&
      result.kind === 'completed' &&
      !this.shuttingDown &&
      chain.steps < maxSteps &&
      performance.now() - chain.startedAt < maxDurationMs
    );
  }

  private async findWorkflowId(executionId: string): Promise<string | null> {
    // A few short retries cover a replica that has not seen the commit that enqueued this job yet.
    for (let attempt = 1; attempt <= LOOKUP_ATTEMPTS; attempt++) {
      const row = await this.transactions.dataSource.manager.findOne(StepExecution, { where: { id: executionId }, select: { id: true, workflowId: true } });
      if (row) return row.workflowId;
      if (attempt < LOOKUP_ATTEMPTS) await pause(LOOKUP_PAUSE_MS);
    }
    return null;
  }
}
