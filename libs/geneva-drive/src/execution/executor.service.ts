import { AsyncResource } from 'node:async_hooks';
import { Inject, Injectable, type LoggerService } from '@nestjs/common';
import { In, QueryFailedError, type EntityManager } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { DeadlinesNotMigratedError, SignalsNotMigratedError } from '../errors/signal.errors.js';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { PAUSE_POLICY, resolveExceptionPolicy, type ExceptionPolicy } from '../exception-policy/exception-policy.js';
import { isFlowControl, type FlowControlIntent } from '../workflow/flow-control.js';
import { GENEVA_DRIVE_LOGGER, GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import type { StepJobHints } from '../interfaces/queue.port.js';
import { ContextLogger } from '../instrumentation/context-logger.js';
import { dueKeys, publish } from '../instrumentation/geneva-drive.events.js';
import { runInJobContext } from '../instrumentation/job-context.js';
import { isStaleStatement } from '../persistence/stale-statement.js';
import { isConnectionError, isDeadlock, pause, TransactionRunner, type TransactionOptions } from '../persistence/transaction-runner.js';
import { jobOptionsFor, successorOf, WorkflowStore, type NewExecution } from '../persistence/workflow-store.js';
import { evaluateCondition, type StepDefinition, type WorkflowDefinition } from '../registry/workflow-definition.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { SignalRendezvous } from './signal-rendezvous.js';
import { WaitDeadline } from './wait-deadline.js';
import { workflowInternals, type GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { errorColumns, withMetadata } from './error-record.js';
import { isInterrupt, StepIteration } from '../workflow/step-iteration.js';
import { WorkflowInstances } from './workflow-instances.js';

/** Everything phase 1 hands to phases 2 and 3. */
interface Prepared {
  executionId: string;
  workflowId: string;
  definition: WorkflowDefinition;
  step: StepDefinition;
  instance: GenevaWorkflow<any>;
  /** The rows as phase 1 left them (phase 3 checks them as it writes, or reads them again under the locks). */
  workflow: WorkflowRecord;
  execution: StepExecution;
  logger: LoggerService;
  run: ExecuteOptions;
}

/**
 * How to run one execution. Test helpers run resumable steps to their end (`interruptible: false`)
 * or for a number of checkpoints (`maxIterations`).
 */
export interface ExecuteOptions {
  /** Whether checkpoints may stop a resumable step (runtime and iteration budgets, shutdown). @default true */
  interruptible?: boolean;
  /** Overrides the step's `maxIterations` for this execution. */
  maxIterations?: number;
  /** The id of the queue job running the execution, recorded on it (`StepExecution.jobId`) when it starts. */
  jobId?: string;
  /** What the job carries besides the execution id: its workflow, type, step and hero (they save lookups; see StepJob.hints). */
  hints?: StepJobHints;
  /** Run the steps that come due as each finishes in this call, within the module's `chainSteps` bounds (queue workers do; test helpers run one step). */
  chain?: boolean;
}

/** How far the current chain of inline steps has gone. */
interface Chain {
  steps: number;
  startedAt: number;
}

/** `missing`: no such workflow (yet: the transaction that enqueued the job may not have committed). */
type PrepareResult = { run: Prepared } | { done: true; error?: unknown } | { missing: true };

/** What phase 3 recorded (null states: the outcome was discarded), and the step it started inline. */
interface Recorded {
  states: { workflowState: string; stepState: string } | null;
  next: Prepared | null;
}

type BodyResult =
  | { kind: 'completed' }
  | { kind: 'flow'; intent: FlowControlIntent }
  | { kind: 'exception'; error: unknown; policy: ExceptionPolicy };

type ExceptionReason = 'exception_policy' | 'precondition';

/** The inline phase 1 of a chained step failed: its transaction is lost, the outcome is recorded again without it. */
class ChainedPrepareError extends Error {
  constructor(readonly cause: unknown) {
    super('The chained step could not start');
  }
}

const LOOKUP_ATTEMPTS = 5;
const IDEMPOTENT: TransactionOptions = { idempotent: true };
const LOOKUP_PAUSE_MS = 100;

/**
 * Runs one step execution in three phases:
 *  1. prepare, under the workflow + execution row locks: reject duplicate or late jobs, check the
 *     workflow and hero, evaluate cancelIf / skipIf / the signal gate, and mark the execution started;
 *  2. run the body with no lock held (hooks around it, flow control and errors captured);
 *  3. finalize, under the locks again: record the outcome and schedule what comes next.
 * A step's own exception is re-thrown to the queue only after its outcome is committed.
 * @publicApi
 */
@Injectable()
export class ExecutorService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly instances: WorkflowInstances,
    private readonly gate: SignalRendezvous,
    // [deadline hook] wait deadlines of `waitFor` steps with a `timeout` (signals/wait-deadline.ts).
    private readonly deadline: WaitDeadline,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
    @Inject(GENEVA_DRIVE_LOGGER) private readonly logger: LoggerService,
  ) {}

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

  /** Runs the execution with this id if it is due to run; a duplicate or late job is a logged no-op. */
  execute(executionId: string, options: ExecuteOptions = {}): Promise<void> {
    // In the trace context of the call that created the job (steps chained inline stay in it).
    return this.jobScope.runInAsyncScope(() => runInJobContext(options.hints?.traceparent, () => this.executeJob(executionId, options)));
  }

  private async executeJob(executionId: string, options: ExecuteOptions): Promise<void> {
    const workflowId = options.hints?.workflowId ?? (await this.findWorkflowId(executionId));
    let prepared = workflowId === null ? null : await this.prepareSafely(executionId, workflowId, options);
    // A job may start before the transaction that enqueued it commits (enqueueAfterCommit: false,
    // a replica behind): a few short lookups give the commit time to land.
    for (let attempt = 1; prepared !== null && 'missing' in prepared && attempt < LOOKUP_ATTEMPTS; attempt++) {
      await pause(LOOKUP_PAUSE_MS);
      prepared = await this.prepareSafely(executionId, workflowId!, options);
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
      const result = await this.runBody(run);
      run = await this.finalize(run, result, this.mayChain(run, result, chain) ? chain : undefined);
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

  // ---------------------------------------------------------------- phase 1: prepare

  private async prepareSafely(executionId: string, workflowId: string, options: ExecuteOptions): Promise<PrepareResult> {
    // Both transactions act only on an execution still `scheduled` under its lock, so one run again
    // after a lost connection (even after a COMMIT that went through) cannot start or fail it twice.
    // A prepare whose COMMIT went through unacknowledged finds its execution `in_progress` on the
    // retry and runs no body: stuck recovery picks it up (the body then runs once, later).
    try {
      return (
        (await this.prepareUnlocked(executionId, workflowId, options)) ??
        (await this.transactions.run((manager) => this.store.batched(manager, () => this.prepare(manager, executionId, workflowId, options)), undefined, IDEMPOTENT))
      );
    } catch (error) {
      // The prepare transaction is gone (a database error aborts it on PostgreSQL): record the
      // failure in a transaction of its own, then surface the original error.
      await this.transactions.run((manager) => this.store.batched(manager, () => this.recordPrepareFailure(manager, executionId, workflowId, error)), undefined, IDEMPOTENT);
      throw error;
    }
  }

  private async prepare(manager: EntityManager, executionId: string, workflowId: string, options: ExecuteOptions): Promise<PrepareResult> {
    // The hero is read by a statement of its own once the locks are held (prepareLocked), never with
    // the locking read: that statement's snapshot (PostgreSQL) or read view (MySQL's subqueries) is
    // taken before it waits for the locks, and would miss what their holder committed meanwhile — a
    // hero changed in the transaction that delivered the signal this step is about to attach.
    let locked: Awaited<ReturnType<WorkflowStore['lockStep']>>;
    try {
      locked = await this.store.lockStep(manager, workflowId, executionId);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return { missing: true };
      throw error;
    }
    return this.prepareLocked(manager, locked.workflow, locked.execution, executionId, options, locked.signal);
  }

  /** Phase 1 once the workflow and execution rows are locked and read. */
  private async prepareLocked(
    manager: EntityManager,
    workflow: WorkflowRecord,
    execution: StepExecution | null,
    executionId: string,
    options: ExecuteOptions,
    pinned: Signal | null = null,
    preloadedHero?: object | null,
  ): Promise<PrepareResult> {
    const workflowId = workflow.id;
    if (!execution || execution.state !== 'scheduled') {
      // Tagged like every other line about the execution, when it still exists.
      const lateLogger = execution ? new ContextLogger(this.logger, workflow, execution) : this.logger;
      lateLogger.log(`Step execution ${executionId} is ${execution?.state ?? 'gone'}, not scheduled: duplicate or late job ignored`);
      return { done: true };
    }
    const definition = this.registry.findByName(workflow.type);
    const logger = new ContextLogger(this.logger, workflow, execution);
    if (workflow.state !== 'ready' && workflow.state !== 'performing') {
      logger.log(`Workflow is ${workflow.state}: execution canceled`);
      await this.store.transitionExecution(manager, execution, 'canceled', 'canceled');
      return { done: true };
    }

    const hero = preloadedHero !== undefined ? preloadedHero : await this.store.readHero(manager, workflow.heroType, workflow.heroId);
    if (hero === null && !definition?.mayProceedWithoutHero) {
      logger.log('Hero is gone: workflow canceled');
      await this.store.transitionExecution(manager, execution, 'canceled', 'canceled');
      await this.store.transitionWorkflow(manager, workflow, 'canceled');
      return { done: true };
    }

    const step = definition?.step(execution.stepName);
    if (definition && !step && definition.skipUndefinedSteps) {
      await this.skipUndefinedStep(manager, workflow, execution, definition, logger);
      return { done: true };
    }
    if (!definition || !step) {
      const error = new StepNotDefinedError(workflow.type, execution.stepName, workflow.id, execution.id);
      logger.error(error.message);
      await this.store.transitionExecution(manager, execution, 'failed', 'failed', { errorClassName: error.name, errorMessage: error.message });
      await this.store.transitionWorkflow(manager, workflow, 'paused');
      return { done: true, error };
    }

    const instance = await this.instances.create(definition);
    workflowInternals.bind(instance, { hero, record: workflow, execution, signal: null, logger });
    const prepared: Prepared = { executionId, workflowId, definition, step, instance, workflow, execution, logger, run: options };

    const started = performance.now();
    const event = (outcome: string, exception?: unknown) =>
      publish('precondition', () => ({ ...this.eventBase(prepared, started), ...dueKeys(execution), outcome, ...(exception === undefined ? {} : { exception }) }));
    let verdict: 'cancel' | 'skip' | 'wait' | 'pass';
    try {
      verdict = await this.evaluatePreconditions(manager, prepared, workflow, pinned);
    } catch (error) {
      // A database error is the transaction's, not the precondition's: it may be gone (PostgreSQL
      // aborts it; MySQL rolls a deadlock victim back whole). Transient ones run it again; others
      // are recorded by recordPrepareFailure, in a transaction of its own.
      if (error instanceof QueryFailedError || isDeadlock(error) || isConnectionError(error) || isStaleStatement(error)) throw error;
      event('exception', error);
      logger.error(`Precondition raised ${String(error)}`);
      // A waitFor step on a database without the signals migration fails and pauses whatever the
      // policy says: skipping or retrying would run past the event the step was written for.
      const notMigrated = error instanceof SignalsNotMigratedError || error instanceof DeadlinesNotMigratedError; // [deadline hook]
      const policy = notMigrated ? PAUSE_POLICY : resolveExceptionPolicy(step, definition.exceptionPolicies, error);
      await this.applyExceptionPolicy(manager, prepared, workflow, policy, error, 'precondition');
      return { done: true, error };
    }
    switch (verdict) {
      case 'cancel':
        event('canceled');
        logger.log('cancelIf is true: workflow canceled');
        await this.store.transitionExecution(manager, execution, 'canceled', 'canceled');
        await this.store.transitionWorkflow(manager, workflow, 'canceled');
        return { done: true };
      case 'skip':
        event('skipped');
        logger.log('skipIf is true: step skipped');
        await this.store.transitionExecution(manager, execution, 'skipped', 'skipped');
        await this.gate.settleOnSkip(manager, execution);
        await this.store.scheduleNextStep(manager, workflow, definition);
        return { done: true };
      case 'wait':
        event('waiting');
        return { done: true };
      case 'pass':
        event('passed');
    }

    await this.markStarted(manager, workflow, execution, step, options);
    return { run: prepared };
  }

  /** The execution `in_progress` and the workflow `performing` at the step. */
  private async markStarted(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution, step: StepDefinition, options: ExecuteOptions): Promise<void> {
    // The job id rides on the UPDATE that starts the execution: no statement of its own.
    await this.store.transitionExecution(manager, execution, 'in_progress', null, options.jobId === undefined ? {} : { jobId: options.jobId });
    await this.store.transitionWorkflow(manager, workflow, 'performing', { currentStepName: step.name });
  }

  /**
   * Phase 1 without a transaction, for a step that runs none of the application's code before its
   * body — no cancelIf, no skipIf, and a `waitFor` step only once woken with its signal — as its
   * job's hints tell before any read: the rows are read without locks, and the start is written by
   * one statement that writes only while they are still as read (WorkflowStore.writeIfUnchanged).
   * The hero is read after that statement took (and released) the row locks, so the body sees every
   * commit made under them before. Three statements instead of a transaction of five. Null whenever
   * anything is not as the happy path expects (a duplicate job, a paused workflow, a failed
   * statement): the locked phase 1 then decides, from the rows as they are.
   */
  private async prepareUnlocked(executionId: string, workflowId: string, options: ExecuteOptions): Promise<PrepareResult | null> {
    const { workflowType, stepName, heroType, heroId } = options.hints ?? {};
    const definition = workflowType === undefined ? undefined : this.registry.findByName(workflowType);
    const step = definition?.step(stepName);
    if (!definition || !step || definition.cancelIf.length > 0 || step.skipIf !== undefined || heroType === undefined || heroId === undefined) return null;
    if (!this.store.writesIfUnchanged(this.transactions.dataSource.manager)) return null;
    const manager = this.transactions.dataSource.createEntityManager();
    let prepared: Prepared;
    let signal: Signal | null;
    const started = performance.now();
    try {
      const read = await this.store.readStep(manager, workflowId, executionId, heroType);
      if (!read) return null;
      const { workflow, execution } = read;
      signal = read.signal;
      const woken = !step.waitFor || (execution.signalId != null && signal?.id === execution.signalId);
      const runnable = workflow.state === 'ready' || workflow.state === 'performing';
      const ownHero = workflow.heroType === heroType && workflow.heroId === heroId;
      if (workflow.type !== definition.name || execution.stepName !== step.name || execution.state !== 'scheduled' || !runnable || !woken || !ownHero) return null;
      if (step.waitFor) this.deadline.assertSchema(workflow, step); // [deadline hook]
      const logger = new ContextLogger(this.logger, workflow, execution);
      const instance = await this.instances.create(definition);
      prepared = { executionId, workflowId, definition, step, instance, workflow, execution, logger, run: options };
      const expected = { workflowId: workflow.id, workflowState: workflow.state, executionId: execution.id, executionState: execution.state };
      if (!(await this.store.writeIfUnchanged(manager, expected, () => this.markStarted(manager, workflow, execution, step, options)))) return null;
    } catch {
      // Nothing was written (or, the answer to a statement that went through lost, the locked phase
      // finds the execution started and leaves it to stuck recovery, as after a lost COMMIT).
      return null;
    }
    // Started: from here on nothing may send the job to the locked phase, which would not run it.
    const { workflow, execution, instance, logger } = prepared;
    let hero: object | null;
    try {
      hero = await this.readHeroOutsideTransaction(manager, heroType, heroId);
    } catch (error) {
      // The body cannot run without its hero: the attempt fails as one whose body raised would.
      return this.finalize(prepared, { kind: 'exception', error, policy: resolveExceptionPolicy(step, definition.exceptionPolicies, error) }).then(
        () => ({ done: true }),
        (raised: unknown) => ({ done: true, error: raised }),
      );
    }
    if (hero === null && !definition.mayProceedWithoutHero) {
      logger.log('Hero is gone: workflow canceled');
      await this.finalize(prepared, { kind: 'flow', intent: { kind: 'cancel' } });
      return { done: true };
    }
    workflowInternals.bind(instance, { hero, record: workflow, execution, signal: step.waitFor ? signal : null, logger });
    publish('precondition', () => ({ ...this.eventBase(prepared, started), ...dueKeys(prepared.execution), outcome: 'passed' }));
    return { run: prepared };
  }

  /** The hero, read with no transaction: a read alone, so it runs again after a lost connection. */
  private async readHeroOutsideTransaction(manager: EntityManager, heroType: string, heroId: string): Promise<object | null> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.store.readHero(manager, heroType, heroId);
      } catch (error) {
        if (tries >= LOOKUP_ATTEMPTS || !(isConnectionError(error) || isStaleStatement(error))) throw error;
        await pause(LOOKUP_PAUSE_MS);
      }
    }
  }

  /**
   * `skipUndefinedSteps`: a step removed by a deploy is skipped, and the workflow goes on after the
   * most recent step of its history that still exists (the first step when none does) — never
   * re-running steps that already ran (WorkflowDefinition.stepAfter places the removed name).
   */
  private async skipUndefinedStep(
    manager: EntityManager,
    workflow: WorkflowRecord,
    execution: StepExecution,
    definition: WorkflowDefinition,
    logger: LoggerService,
  ): Promise<void> {
    logger.warn(`Step "${execution.stepName}" is no longer defined in ${definition.name}: skipped (skipUndefinedSteps)`);
    await this.store.transitionExecution(manager, execution, 'skipped', 'skipped');
    await this.gate.settleOnSkip(manager, execution);
    await this.store.scheduleNextStep(manager, workflow, definition, { currentStepName: null }, execution.stepName);
  }

  /** cancelIf, then skipIf, then (for `waitFor` steps) the signal gate, in that order. */
  private async evaluatePreconditions(
    manager: EntityManager,
    prepared: Prepared,
    workflow: WorkflowRecord,
    pinned: Signal | null,
  ): Promise<'cancel' | 'skip' | 'wait' | 'pass'> {
    const { definition, step, instance, execution } = prepared;
    if (step.waitFor) {
      this.gate.assertSchemaSupportsSignals(workflow, step);
      this.deadline.assertSchema(workflow, step); // [deadline hook]
    }
    for (const condition of definition.cancelIf) {
      if (await evaluateCondition(condition, instance)) return 'cancel';
    }
    if (step.skipIf !== undefined && (await evaluateCondition(step.skipIf, instance))) return 'skip';
    if (step.waitFor) {
      // [deadline hook] a wait that timed out (onTimeout 'run') passes its gate with no signal.
      if (await this.deadline.timedOut(manager, execution)) {
        workflowInternals.bind(instance, { hero: instance.hero, record: workflow, execution, signal: null, logger: prepared.logger, timedOut: true });
        return 'pass';
      }
      const signal = await this.gate.attachOrPark(manager, workflow, execution, step, instance, pinned);
      if (signal === null) {
        await this.deadline.arm(manager, workflow, execution, step, definition); // [deadline hook] parked: arm its deadline
        return 'wait';
      }
      workflowInternals.bind(instance, { hero: instance.hero, record: workflow, execution, signal, logger: prepared.logger });
    }
    return 'pass';
  }

  private async recordPrepareFailure(manager: EntityManager, executionId: string, workflowId: string, error: unknown): Promise<void> {
    const { workflow, execution } = await this.store.lockStep(manager, workflowId, executionId);
    if (!execution || execution.state !== 'scheduled') return;
    const logger = new ContextLogger(this.logger, workflow, execution);
    logger.error(`Preparing the step failed: ${String(error)}`);
    const definition = this.registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    // Only the workflow follows the policy here: the step never started, and handlers do not run.
    const policy = resolveExceptionPolicy(step, definition?.exceptionPolicies ?? [], error);
    const action = workflow.state === 'ready' || workflow.state === 'performing' ? (policy.isImperative ? 'pause' : policy.action) : undefined;
    const attempt = action === 'reattempt' ? (await this.consecutiveErrorReattempts(manager, workflow.id, execution.stepName)) + 1 : 0;
    let retrying = action === 'reattempt' && (policy.maxReattempts === null || attempt <= policy.maxReattempts);
    let delay: number | undefined;
    try {
      delay = retrying ? policy.reattemptDelay(attempt) : undefined;
    } catch (waitError) {
      logger.error(`The reattempt wait raised ${String(waitError)}: workflow paused`);
      retrying = false;
    }
    const recorded = errorColumns(execution, error);
    // A retried prepare failure is marked, so it counts toward maxReattempts like any error reattempt.
    if (retrying) recorded.metadata = { ...recorded.metadata, reattemptReason: 'precondition' };
    await this.store.transitionExecution(manager, execution, 'failed', 'failed', recorded);
    switch (action) {
      case undefined:
        return;
      case 'reattempt':
        if (retrying) await this.store.rescheduleCurrentStep(manager, workflow, definition, { waitMs: delay });
        else await this.store.transitionWorkflow(manager, workflow, attempt > (policy.maxReattempts ?? Infinity) && policy.terminalAction === 'cancel' ? 'canceled' : 'paused');
        return;
      case 'cancel':
        await this.store.transitionWorkflow(manager, workflow, 'canceled');
        return;
      case 'skip':
        await this.store.scheduleNextStep(manager, workflow, definition);
        return;
      default:
        await this.store.transitionWorkflow(manager, workflow, 'paused');
    }
  }

  // ---------------------------------------------------------------- phase 2: run

  private async runBody(prepared: Prepared): Promise<BodyResult> {
    const { instance, step, execution, logger } = prepared;
    const started = performance.now();
    const iteration = step.resumable ? this.iterationFor(prepared) : undefined;
    let thrown: { error: unknown } | undefined;
    // The body's own time, apart from the hooks around it (the step event reports both).
    let bodyMs = 0;
    try {
      await instance.beforeStepExecution(execution);
      await instance.aroundStepExecution(execution, async () => {
        const bodyStarted = performance.now();
        try {
          await (iteration ? step.invoke(instance, iteration) : step.invoke(instance));
        } finally {
          bodyMs += performance.now() - bodyStarted;
        }
      });
    } catch (error) {
      thrown = { error };
    }
    // The after hook runs for every outcome; its own error counts only when the body succeeded.
    try {
      await instance.afterStepExecution(execution);
    } catch (error) {
      thrown ??= { error };
    }
    // A recorded intent wins over whatever was thrown: flow control holds even inside user try/catch.
    const intent = workflowInternals.takeIntent(instance);
    let result: BodyResult;
    if (intent) result = { kind: 'flow', intent };
    else if (iteration?.interruption) result = { kind: 'flow', intent: { kind: 'continue', waitMs: iteration.interruption.waitMs } };
    else if (!thrown) result = { kind: 'completed' };
    else if (isFlowControl(thrown.error)) result = { kind: 'flow', intent: thrown.error.intent };
    else if (isInterrupt(thrown.error)) result = { kind: 'completed' }; // unreachable: an interrupt always records itself
    else {
      logger.error(`Step raised ${String(thrown.error)}`, thrown.error instanceof Error ? thrown.error.stack : undefined);
      result = { kind: 'exception', error: thrown.error, policy: resolveExceptionPolicy(step, prepared.definition.exceptionPolicies, thrown.error) };
    }
    publish('step', () => ({
      ...this.eventBase(prepared, started),
      durationMs: bodyMs,
      hooksDurationMs: performance.now() - started - bodyMs,
      outcome: result.kind === 'flow' ? result.intent.kind : result.kind,
      ...(result.kind === 'exception' ? { exception: result.error } : {}),
      ...(instance.timedOut ? { timedOut: true } : {}), // [deadline hook]
    }));
    return result;
  }

  /** The iteration object of a resumable step: checkpoints write the cursor with one UPDATE, no lock. */
  private iterationFor(prepared: Prepared): StepIteration {
    const { execution, step, run } = prepared;
    const manager = this.transactions.dataSource.manager;
    return new StepIteration(execution.cursor ?? null, execution.continuesFromId !== null, {
      persist: async (encoded) => {
        // Only while the row is still ours: a stalled worker whose execution housekeeping recovered
        // meanwhile must not rewrite the closed row's cursor.
        await manager
          .createQueryBuilder()
          .update(StepExecution)
          .set({ cursor: () => ':cursor' })
          .setParameter('cursor', encoded)
          .where('id = :id', { id: execution.id })
          .andWhere('state = :inProgress', { inProgress: 'in_progress' })
          .execute();
      },
      shouldStop: async () => {
        if (this.shuttingDown) return true;
        // Stop when the workflow was paused or canceled behind our back, or when this execution is no
        // longer in progress (recovered from a stalled worker: its successor may be performing now).
        const row: { workflowState?: string; executionState?: string } | undefined = await manager
          .createQueryBuilder(StepExecution, 'e')
          .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
          .select('w.state', 'workflowState')
          .addSelect('e.state', 'executionState')
          .where('e.id = :id', { id: execution.id })
          .getRawOne();
        return row?.workflowState !== 'performing' || row?.executionState !== 'in_progress';
      },
      maxCursorSize: this.options.maxCursorSize,
      maxIterations: run.maxIterations ?? step.maxIterations,
      maxRuntimeMs: step.maxRuntimeMs,
      interruptible: run.interruptible !== false,
    });
  }

  // ---------------------------------------------------------------- phase 3: finalize

  /**
   * Records the outcome. With `chain`, when the outcome schedules a step that is due now, that
   * step's phase 1 runs in the same transaction and the prepared run is returned for the caller to
   * carry on with; should that fail, the outcome is recorded again alone and the step goes through
   * the queue (its own phase 1 then deals with the failure).
   */
  private async finalize(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Prepared | null> {
    if (chain) {
      try {
        return await this.finalizeOnce(prepared, result, chain);
      } catch (error) {
        if (!(error instanceof ChainedPrepareError)) throw error;
        prepared.logger.warn(`Starting the next step inline failed (${String(error.cause)}): it goes through the queue`);
      }
    }
    return this.finalizeOnce(prepared, result);
  }

  private async finalizeOnce(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Prepared | null> {
    const started = performance.now();
    const recorded = (this.mayRecordUnlocked(prepared, result, chain) && (await this.recordUnlocked(prepared, result))) || (await this.recordLocked(prepared, result, chain));
    const { states } = recorded;
    publish('finalize', () => ({
      ...this.eventBase(prepared, started),
      workflowState: states?.workflowState,
      stepState: states?.stepState,
      ...(result.kind === 'exception' ? { exception: result.error } : {}),
    }));
    prepared.logger.log(`Step finished: ${states ? `${states.stepState}, workflow ${states.workflowState}` : 'outcome discarded'}`);
    if (result.kind === 'exception' && states) throw result.error;
    return recorded.next;
  }

  /**
   * Whether the outcome may be recorded from the rows as phase 1 left them, without a transaction
   * (recordUnlocked): not an exception (its policy's handler is the user's code, which must run once),
   * not a resumable step (its checkpoints rewrote the row), and nothing to start inline after it.
   */
  private mayRecordUnlocked(prepared: Prepared, result: BodyResult, chain?: Chain): boolean {
    const { step, definition } = prepared;
    return result.kind !== 'exception' && !step.resumable && (!chain || definition.steps[definition.steps.length - 1] === step);
  }

  /**
   * Records the outcome in one statement that writes only while the workflow is still `performing`
   * and the execution `in_progress` (WorkflowStore.writeIfUnchanged): as long as they are, nothing
   * else has touched them since phase 1, so the decisions can be made on the records it left in
   * memory. Null when that cannot be (they moved on, recording needs a read, the statement failed,
   * or the dialect has no such statement): the outcome is then recorded under the locks, from the
   * rows as they are (the records the attempt changed are read again).
   */
  private async recordUnlocked(prepared: Prepared, result: BodyResult): Promise<Recorded | null> {
    const { workflow, execution } = prepared;
    const expected = { workflowId: workflow.id, workflowState: 'performing', executionId: execution.id, executionState: 'in_progress' };
    if (workflow.state !== expected.workflowState || execution.state !== expected.executionState) return null;
    const manager = this.transactions.dataSource.createEntityManager();
    const intent = result.kind === 'flow' ? result.intent : undefined;
    try {
      if (!(await this.store.writeIfUnchanged(manager, expected, () => this.applyOutcome(manager, prepared, workflow, intent)))) return null;
    } catch {
      // Whatever failed (a lost connection, even one that lost the answer to a statement that went
      // through), the locked path runs next: it re-reads the rows and records only what is still due.
      return null;
    }
    return { states: { workflowState: workflow.state, stepState: execution.state }, next: null };
  }

  /** Records the outcome under the workflow and execution row locks, and with `chain` starts the step it made due (see finalize). */
  private async recordLocked(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Recorded> {
    let next: Prepared | null = null;
    // Retried after a lost connection, even one lost during COMMIT: the transaction records the
    // outcome only while the execution is still `in_progress` under its lock, so a retry after a
    // COMMIT that did go through (or after recordUnlocked's statement that did) finds it closed and
    // changes nothing; it sends the job of the step that outcome scheduled again, the first one
    // having died with the lost answer.
    const states = await this.transactions.run((manager) => this.store.batched(manager, async () => {
      next = null; // a transaction run again after a lost connection starts over
      const { workflow, execution } = await this.store.lockStep(manager, prepared.workflowId, prepared.executionId);
      if (!execution || execution.state !== 'in_progress') {
        prepared.logger.warn(`Execution is ${execution?.state ?? 'gone'} after the body ran (recorded by a lost answer, or recovered meanwhile): outcome discarded`);
        await this.resendScheduled(manager, workflow, prepared.definition);
        return null;
      }
      prepared.workflow = workflow;
      prepared.execution = execution;
      if (workflow.state !== 'performing') {
        if (prepared.step.resumable && workflow.state === 'paused') {
          // Keep the cursor: resume continues the chain from this row.
          prepared.logger.warn('Workflow was paused while the resumable step ran: execution closed as continued');
          await this.store.transitionExecution(manager, execution, 'completed', 'continued');
          return null;
        }
        prepared.logger.warn(`Workflow became ${workflow.state} while the step ran: execution canceled, outcome discarded`);
        await this.store.transitionExecution(manager, execution, 'canceled', 'canceled');
        return null;
      }
      if (result.kind === 'exception') {
        await this.applyExceptionPolicy(manager, prepared, workflow, result.policy, result.error, 'exception_policy');
      } else {
        await this.applyOutcome(manager, prepared, workflow, result.kind === 'flow' ? result.intent : undefined);
      }
      const due = chain ? this.store.takeDueJob(manager) : null;
      if (due) {
        const states = { workflowState: workflow.state, stepState: execution.state };
        try {
          // The hero's read writes this outcome and the new row with it, in one statement where the dialect allows.
          const hero = await this.store.readHero(manager, workflow.heroType, workflow.heroId);
          const started = await this.prepareLocked(manager, workflow, due, due.id, { ...prepared.run, jobId: undefined }, null, hero);
          if ('run' in started) next = started.run;
        } catch (error) {
          // A deadlock, a lost connection or a stale prepared statement is the transaction's: it runs
          // again whole, chain included.
          if (isDeadlock(error) || isConnectionError(error) || isStaleStatement(error)) throw error;
          throw new ChainedPrepareError(error);
        }
        return states;
      }
      return { workflowState: workflow.state, stepState: execution.state };
    }), undefined, IDEMPOTENT);
    return { states, next };
  }

  /**
   * Sends the job of the workflow's scheduled execution again, if it has one: what a COMMIT whose
   * answer was lost would have sent. A job that finds its execution started already is ignored.
   */
  private async resendScheduled(manager: EntityManager, workflow: WorkflowRecord, definition: WorkflowDefinition): Promise<void> {
    const current = await this.store.currentExecution(manager, workflow.id);
    if (current?.state === 'scheduled') await this.store.enqueue(manager, workflow, current, jobOptionsFor(definition, definition.step(current.stepName)), current.jobId ?? undefined);
  }

  /** Records a completed body (no intent) or a flow-control intent, and schedules what follows. */
  private async applyOutcome(
    manager: EntityManager,
    prepared: Prepared,
    workflow: WorkflowRecord,
    intent: FlowControlIntent | undefined,
    errorPatch: Partial<StepExecution> = {},
    reason: 'flow_control' | ExceptionReason = 'flow_control',
  ): Promise<void> {
    const { execution, definition } = prepared;
    const clear = { currentStepName: null };
    switch (intent?.kind) {
      case undefined:
        await this.store.transitionExecution(manager, execution, 'completed', 'success', errorPatch);
        await this.gate.settleOnSuccess(manager, execution);
        await this.store.scheduleNextStep(manager, workflow, definition, clear);
        return;
      case 'finished':
        await this.store.transitionExecution(manager, execution, 'completed', 'success', errorPatch);
        await this.gate.settleOnSuccess(manager, execution);
        await this.store.transitionWorkflow(manager, workflow, 'finished', clear);
        return;
      case 'skip':
        await this.store.transitionExecution(manager, execution, 'skipped', 'skipped', errorPatch);
        await this.gate.settleOnSkip(manager, execution);
        await this.store.scheduleNextStep(manager, workflow, definition, clear);
        return;
      case 'cancel':
        await this.store.transitionExecution(manager, execution, 'canceled', 'canceled', errorPatch);
        await this.store.transitionWorkflow(manager, workflow, 'canceled', clear);
        return;
      case 'pause':
        if (prepared.step.resumable) {
          // Closed as continued with its cursor: resume continues the chain from here.
          await this.store.transitionExecution(manager, execution, 'completed', 'continued', errorPatch);
        } else {
          // Canceled; nextStepName still names this step, so resume runs it again.
          await this.store.transitionExecution(manager, execution, 'canceled', 'canceled', errorPatch);
        }
        await this.store.transitionWorkflow(manager, workflow, 'paused', clear);
        return;
      case 'reattempt':
        await this.store.transitionExecution(manager, execution, 'completed', 'reattempted', {
          ...errorPatch,
          metadata: withMetadata({ ...execution, ...errorPatch } as StepExecution, { reattemptReason: reason }),
        });
        await this.store.rescheduleCurrentStep(manager, workflow, definition, this.retryOf(prepared, intent.waitMs, intent.rewind), clear);
        return;
      case 'continue':
        await this.store.transitionExecution(manager, execution, 'completed', 'continued', errorPatch);
        await this.store.rescheduleCurrentStep(manager, workflow, definition, successorOf(execution, intent.waitMs), clear);
        return;
    }
  }

  /**
   * Applies an exception policy, after a body exception (execution `in_progress`) or a precondition
   * exception (execution still `scheduled`, reason `precondition`).
   */
  private async applyExceptionPolicy(
    manager: EntityManager,
    prepared: Prepared,
    workflow: WorkflowRecord,
    policy: ExceptionPolicy,
    error: unknown,
    reason: ExceptionReason,
  ): Promise<void> {
    const { execution, definition, instance, logger } = prepared;
    const clear = { currentStepName: null };
    const failWith = async (outcome: 'failed' | 'canceled', state: 'paused' | 'canceled') => {
      await this.store.transitionExecution(manager, execution, 'failed', outcome, errorColumns(execution, error));
      await this.store.transitionWorkflow(manager, workflow, state, clear);
    };

    if (policy.handler) {
      // Imperative: the handler decides with flow control, exactly as the body would have.
      let handlerError: unknown;
      try {
        await policy.handler(error, instance);
      } catch (thrown) {
        if (!isFlowControl(thrown)) handlerError = thrown;
      }
      const intent = workflowInternals.takeIntent(instance);
      if (handlerError !== undefined) {
        // A broken handler must not strand the step in progress: pause with the original error recorded.
        logger.error(`Exception handler raised ${String(handlerError)}: workflow paused`);
        return failWith('failed', 'paused');
      }
      if (!intent) {
        logger.warn('Exception handler decided nothing: workflow paused');
        return failWith('failed', 'paused');
      }
      logger.log(`Exception handler decided: ${intent.kind}`);
      return this.applyOutcome(manager, prepared, workflow, intent, errorColumns(execution, error), reason);
    }

    logger.log(`Exception policy: ${policy.action}`);
    switch (policy.action) {
      case 'reattempt': {
        const attempt = (await this.consecutiveErrorReattempts(manager, workflow.id, execution.stepName)) + 1;
        if (policy.maxReattempts !== null && attempt > policy.maxReattempts) {
          logger.warn(`Reattempts exhausted (${policy.maxReattempts}): ${policy.terminalAction}`);
          return failWith(policy.terminalAction === 'cancel' ? 'canceled' : 'failed', policy.terminalAction === 'cancel' ? 'canceled' : 'paused');
        }
        let delay: number | undefined;
        try {
          delay = policy.reattemptDelay(attempt);
        } catch (waitError) {
          // A broken wait function must not strand the step in progress: pause with the original error.
          logger.error(`The reattempt wait raised ${String(waitError)}: workflow paused`);
          return failWith('failed', 'paused');
        }
        const described = errorColumns(execution, error);
        await this.store.transitionExecution(manager, execution, 'completed', 'reattempted', {
          metadata: { ...described.metadata, reattemptReason: reason },
        });
        await this.store.rescheduleCurrentStep(manager, workflow, definition, this.retryOf(prepared, delay), clear);
        return;
      }
      case 'skip':
        await this.store.transitionExecution(manager, execution, 'skipped', 'skipped');
        await this.gate.settleOnSkip(manager, execution);
        await this.store.scheduleNextStep(manager, workflow, definition, clear);
        return;
      case 'cancel':
        return failWith('canceled', 'canceled');
      default:
        return failWith('failed', 'paused');
    }
  }

  /**
   * Error-driven reattempts of `stepName` since its last clean completion (flow-control reattempts
   * do not count). Ordered by creation time and id, so it works with any key type.
   */
  private async consecutiveErrorReattempts(manager: EntityManager, workflowId: string, stepName: string): Promise<number> {
    await this.store.flush(manager);
    const rows = await manager.find(StepExecution, {
      where: { workflowId, stepName, state: In(['completed', 'failed']) },
      select: { id: true, state: true, outcome: true, metadata: true, createdAt: true },
      order: { createdAt: 'DESC', id: 'DESC' },
    });
    let count = 0;
    for (const row of rows) {
      if (row.outcome === 'success' || row.outcome === 'recovered') break; // a clean completion resets the count
      const reason = row.metadata?.reattemptReason;
      if (row.outcome === 'reattempted' ? reason !== 'flow_control' : row.state === 'failed' && reason !== undefined) count++;
    }
    return count;
  }

  /**
   * The execution that retries this one: a resumable step continues from its cursor (or from the
   * start with `rewind`) and keeps its signal; a plain step starts afresh and its gate re-attaches
   * the still-claimed signal.
   */
  private retryOf(prepared: Prepared, waitMs: number | undefined, rewind = false): NewExecution {
    if (!prepared.step.resumable) return { waitMs };
    const successor = successorOf(prepared.execution, waitMs);
    return rewind ? { ...successor, cursor: null } : successor;
  }

  private eventBase(prepared: Prepared, started: number) {
    return {
      executionId: prepared.executionId,
      workflowId: prepared.workflowId,
      workflowClass: prepared.definition.name,
      stepName: prepared.step.name,
      durationMs: performance.now() - started,
    };
  }
}
