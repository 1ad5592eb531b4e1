import type { LoggerService } from '@nestjs/common';
import { QueryFailedError, type EntityManager } from 'typeorm';
import type { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { DeadlinesNotMigratedError, SignalsNotMigratedError } from '../errors/signal.errors.js';
import { FlowControlNotMigratedError } from '../errors/flow-control-not-migrated.error.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { PAUSE_POLICY, resolveExceptionPolicy } from '../exception-policy/exception-policy.js';
import { ContextLogger } from '../instrumentation/context-logger.js';
import { dueKeys, publish } from '../instrumentation/geneva-drive.events.js';
import { isStaleStatement } from '../persistence/stale-statement.js';
import { isConnectionError, isDeadlock, pause, type TransactionRunner } from '../persistence/transaction-runner.js';
import type { WorkflowStore } from '../persistence/workflow-store.js';
import { lacksStep } from '../registry/runnable-steps.js';
import { evaluateCondition, startsWithoutDecisions, type StepDefinition, type WorkflowDefinition } from '../registry/workflow-definition.js';
import type { WorkflowRegistry } from '../registry/workflow.registry.js';
import { workflowInternals } from '../workflow/geneva-workflow.js';
import { isChildrenMatcher } from '../workflow/children-matcher.js';
import type { ConcurrencySlots } from './concurrency-slots.js';
import type { RateStart, RateWindows } from './rate-windows.js';
import type { SignalRendezvous } from './signal-rendezvous.js';
import type { StepOutcomes } from './step-outcome.js';
import type { UnownedSteps } from './unowned-steps.js';
import { eventBase, IDEMPOTENT, LOOKUP_ATTEMPTS, LOOKUP_PAUSE_MS, type ExecuteOptions, type Finalize, type Prepared, type PrepareResult } from './step-run.js';
import type { WaitDeadline } from './wait-deadline.js';
import type { WorkflowInstances } from './workflow-instances.js';
import { isRunnable } from '../state/workflow-state.js';

/** The closes phase 1 writes most (StepOutcomes.apply). */
const CANCELED = { state: 'canceled', outcome: 'canceled' } as const;
const SKIPPED = { state: 'skipped', outcome: 'skipped' } as const;

/**
 * Whether the locked phase 1 reads the hero: something it runs may decide on it (cancelIf, skipIf, a
 * signal matcher that looks at the workflow, a concurrency or rate-limit key), or the body takes it from there. A transactional
 * step's body reads it through its own transaction (TransactionalStep), which also cancels the
 * workflow when it is gone: read here as well, it would be read twice.
 */
export function phaseOneReadsHero(definition: WorkflowDefinition, step: StepDefinition | undefined): boolean {
  if (!step?.transactional) return true;
  return definition.cancelIf.length > 0 || step.skipIf !== undefined || step.concurrency !== undefined || step.rateLimit !== undefined || (step.waitFor !== undefined && step.waitFor.needsWorkflow !== false);
}

/**
 * Phase 1 of a step execution: under the workflow + execution row locks, reject duplicate or late
 * jobs, leave a job of a class or step this process does not have to another process (UnownedSteps),
 * check the workflow and its hero, evaluate cancelIf / skipIf / the signal gate, and mark the
 * execution started — or, for a step that runs none of the application's code before its body,
 * without a transaction (prepareUnlocked). A failure is recorded in a transaction of its own
 * (recordPrepareFailure). What ends the execution here is written by StepOutcomes.
 */
export class PreparePhase {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly instances: WorkflowInstances,
    private readonly gate: SignalRendezvous,
    // [deadline hook] wait deadlines of `waitFor` steps with a `timeout` (execution/wait-deadline.ts).
    private readonly deadline: WaitDeadline,
    private readonly outcomes: StepOutcomes,
    private readonly logger: LoggerService,
    /** Phase 3, for an execution started without a transaction whose body cannot run (its hero unreadable or gone). */
    private readonly finalize: Finalize,
    /** Jobs of a class or step this process does not have. */
    private readonly unowned: UnownedSteps,
    /** The slots of concurrency keys, phase 1's last gate. */
    private readonly slots: ConcurrencySlots,
    /** The windows of rate limits, the gate before it. */
    private readonly rates: RateWindows,
  ) {}

  async prepareSafely(executionId: string, workflowId: string, options: ExecuteOptions): Promise<PrepareResult> {
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

  /** Phase 1 once the workflow and execution rows are locked and read (also a chained step's, in phase 3's transaction). */
  async prepareLocked(
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
    // A class or step this process does not have: another version's execution. Nothing is decided
    // here — not even for a workflow no longer runnable — and the job goes to a process that has them.
    if (!definition || lacksStep(definition, execution.stepName)) {
      return { done: true, error: this.unowned.refuse(workflow.type, execution.stepName, workflow.id, execution.id)! };
    }
    const logger = new ContextLogger(this.logger, workflow, execution);
    const target = { workflow, execution, definition };
    if (!isRunnable(workflow.state)) {
      logger.log(`Workflow is ${workflow.state}: execution canceled`);
      await this.outcomes.apply(manager, target, CANCELED, { workflow: 'unchanged' });
      return { done: true };
    }

    const step = definition.step(execution.stepName);
    // Unknown here (a transactional step's transaction reads it), not gone: no verdict on it.
    const heroKnown = preloadedHero !== undefined || phaseOneReadsHero(definition, step);
    const hero = preloadedHero !== undefined ? preloadedHero : heroKnown ? await this.store.readHero(manager, workflow.heroType, workflow.heroId) : null;
    if (heroKnown && hero === null && !definition.mayProceedWithoutHero) {
      logger.log('Hero is gone: workflow canceled');
      await this.outcomes.apply(manager, target, CANCELED, { workflow: 'canceled' });
      return { done: true };
    }

    if (definition.removedStep(execution.stepName)) {
      logger.warn(`Step "${execution.stepName}" is one of ${definition.name}'s removedSteps: skipped`);
      await this.outcomes.skipRemoved(manager, target);
      return { done: true };
    }
    if (!step) {
      // Only a class with skipUndefinedSteps gets here without the step (lacksStep above).
      await this.skipUndefinedStep(manager, workflow, execution, definition, logger);
      return { done: true };
    }

    const instance = await this.instances.create(definition);
    workflowInternals.bind(instance, { hero, record: workflow, execution, signal: null, logger });
    const prepared: Prepared = { executionId, workflowId, definition, step, instance, workflow, execution, logger, run: options };

    const started = performance.now();
    const event = (outcome: string, exception?: unknown) =>
      publish('precondition', () => ({ ...eventBase(prepared, started), ...dueKeys(execution), outcome, ...(exception === undefined ? {} : { exception }) }));
    let verdict: 'cancel' | 'skip' | 'wait' | 'throttle' | 'pass';
    let rateStart: RateStart | null = null;
    try {
      verdict = await this.evaluatePreconditions(manager, prepared, workflow, pinned);
      // The last gates, for a step about to start: its rate window (the start it allows is recorded
      // only once the step does start), then a slot of its concurrency key.
      if (verdict === 'pass' && step.rateLimit && !(rateStart = await this.rates.admit(manager, prepared))) verdict = 'throttle';
      if (verdict === 'pass' && step.concurrency && !(await this.slots.admit(manager, prepared))) verdict = 'throttle';
      if (verdict === 'pass' && rateStart) await rateStart.record();
    } catch (error) {
      // A database error is the transaction's, not the precondition's: it may be gone (PostgreSQL
      // aborts it; MySQL rolls a deadlock victim back whole). Transient ones run it again; others
      // are recorded by recordPrepareFailure, in a transaction of its own.
      if (error instanceof QueryFailedError || isDeadlock(error) || isConnectionError(error) || isStaleStatement(error)) throw error;
      event('exception', error);
      logger.error(`Precondition raised ${String(error)}`);
      // A waitFor step on a database without the signals migration fails and pauses whatever the
      // policy says: skipping or retrying would run past the event the step was written for.
      const notMigrated = error instanceof SignalsNotMigratedError || error instanceof DeadlinesNotMigratedError || error instanceof FlowControlNotMigratedError; // [deadline hook]
      const policy = notMigrated ? PAUSE_POLICY : resolveExceptionPolicy(step, definition.exceptionPolicies, error);
      await this.outcomes.applyExceptionPolicy(manager, prepared, policy, error, 'precondition');
      return { done: true, error };
    }
    switch (verdict) {
      case 'cancel':
        event('canceled');
        logger.log('cancelIf is true: workflow canceled');
        await this.outcomes.apply(manager, target, CANCELED, { workflow: 'canceled' });
        return { done: true };
      case 'skip':
        event('skipped');
        logger.log('skipIf is true: step skipped');
        await this.outcomes.apply(manager, target, SKIPPED, { workflow: 'next' });
        return { done: true };
      case 'wait':
        event('waiting');
        return { done: true };
      case 'throttle':
        event('throttled');
        if (!step.rateLimit || execution.flowKey) logger.log(`Concurrency key "${execution.flowKey}" is at its limit: the step waits for a slot`);
        return { done: true };
      case 'pass':
        event('passed');
    }

    await this.markStarted(manager, workflow, execution, step, options, rateStart ? { startedAt: rateStart.at } : {});
    return { run: prepared };
  }

  /**
   * The execution `in_progress` and the workflow `performing` at the step; `patch` rides on the
   * execution's UPDATE (the time its rate window counted, the concurrency key it holds).
   */
  private async markStarted(manager: EntityManager, workflow: WorkflowRecord, execution: StepExecution, step: StepDefinition, options: ExecuteOptions, patch: Partial<StepExecution> = {}): Promise<void> {
    // The job id rides on the UPDATE that starts the execution: no statement of its own.
    await this.store.transitionExecution(manager, execution, 'in_progress', null, { ...(options.jobId === undefined ? {} : { jobId: options.jobId }), ...patch });
    await this.store.transitionWorkflow(manager, workflow, 'performing', { currentStepName: step.name });
  }

  /**
   * Phase 1 without a transaction, for a step that runs none of the application's code before its
   * body — no cancelIf, no skipIf, and a `waitFor` step only once woken with its signal — as its
   * job's hints tell before any read: the rows are read without locks (or taken as the statement
   * that scheduled the job left them, when that ran in this process: WorkflowStore.takeRows), and
   * the start is written by one statement that writes only while they are still as read
   * (WorkflowStore.writeIfUnchanged). The hero is read after that statement took the row locks, so
   * the body sees every commit made under them before: in the same round trip where the dialect can
   * (PostgreSQL: one message, whose statements commit together), else by a statement of its own.
   * Two round trips (one on kept rows) instead of a transaction of five. Null whenever
   * anything is not as the happy path expects (a duplicate job, a paused workflow, a failed
   * statement): the locked phase 1 then decides, from the rows as they are.
   */
  private async prepareUnlocked(executionId: string, workflowId: string, options: ExecuteOptions): Promise<PrepareResult | null> {
    const { workflowType, stepName, heroType, heroId } = options.hints ?? {};
    const definition = workflowType === undefined ? undefined : this.registry.findByName(workflowType);
    const step = definition?.step(stepName);
    if (!definition || !step || !startsWithoutDecisions(definition, step) || heroType === undefined || heroId === undefined) return null;
    if (!this.store.writesIfUnchanged(this.transactions.dataSource.manager)) return null;
    const manager = this.transactions.dataSource.createEntityManager();
    let prepared: Prepared;
    let signal: Signal | null;
    // The body's hero, read in the start's round trip where the dialect can (a transactional step's transaction reads its own).
    const heroRead = step.transactional ? undefined : this.store.heroRead(manager, heroType, heroId);
    let heroRows: Array<Record<string, unknown>> | undefined;
    const started = performance.now();
    try {
      // A job started in the process whose statement scheduled it (start(), a signal's message) starts on the rows that statement left.
      const known = this.store.takeRows(options.jobId);
      const kept = known?.execution.id === executionId && known.workflow.id === workflowId && this.store.sql(manager).heroCodec(heroType) ? known : undefined;
      const read = kept ?? (await this.store.readStep(manager, workflowId, executionId, heroType));
      if (!read) return null;
      const { workflow, execution } = read;
      signal = read.signal;
      const woken = !step.waitFor || (execution.signalId != null && signal?.id === execution.signalId);
      const runnable = isRunnable(workflow.state);
      const ownHero = workflow.heroType === heroType && workflow.heroId === heroId;
      if (workflow.type !== definition.name || execution.stepName !== step.name || execution.state !== 'scheduled' || !runnable || !woken || !ownHero) return null;
      // A waiter for a concurrency key's slot, woken: its place in the key's queue is read under the locks.
      if (step.concurrency && execution.flowKey) return null;
      if (step.waitFor) this.deadline.assertSchema(workflow, step); // [deadline hook]
      const logger = new ContextLogger(this.logger, workflow, execution);
      const instance = await this.instances.create(definition);
      prepared = { executionId, workflowId, definition, step, instance, workflow, execution, logger, run: options };
      if (step.concurrency) {
        // The key is the workflow's, hero included: read for it here, and again below for the body
        // (which must see what was committed under the locks the start takes).
        const keyHero = await this.store.readHero(manager, heroType, heroId);
        if (keyHero === null) return null;
        workflowInternals.bind(instance, { hero: keyHero, record: workflow, execution, signal: null, logger });
      }
      const expected = {
        workflowId: workflow.id,
        workflowState: workflow.state,
        executionId: execution.id,
        executionState: execution.state,
        ...(kept ? { versions: kept.versions } : {}),
      };
      const start = async () => {
        // A concurrency key's slot goes with the start, which goes out only if the key is uncontended.
        const key = step.concurrency ? this.slots.takeUnlocked(manager, prepared) : undefined;
        await this.markStarted(manager, workflow, execution, step, options, key === undefined ? {} : { flowKey: key });
      };
      const written = await this.store.writeIfUnchanged(manager, expected, start, heroRead?.read);
      if (!written) return null;
      heroRows = written.then;
    } catch {
      // Nothing was written (or, the answer to a statement that went through lost, the locked phase
      // finds the execution started and leaves it to stuck recovery, as after a lost COMMIT).
      return null;
    }
    // Started: from here on nothing may send the job to the locked phase, which would not run it.
    const { workflow, execution, instance, logger } = prepared;
    // A transactional step's transaction reads the hero (TransactionalStep), and cancels the workflow when it is gone.
    let hero: object | null = null;
    if (!step.transactional) {
      try {
        hero = heroRead && heroRows ? heroRead.hero(heroRows) : await this.readHeroOutsideTransaction(manager, heroType, heroId);
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
    }
    workflowInternals.bind(instance, { hero, record: workflow, execution, signal: step.waitFor ? signal : null, logger });
    publish('precondition', () => ({ ...eventBase(prepared, started), ...dueKeys(prepared.execution), outcome: 'passed' }));
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
    await this.outcomes.apply(manager, { workflow, execution, definition }, SKIPPED, { workflow: 'next', after: execution.stepName }, { currentStepName: null });
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
      const timedOut = await this.deadline.timedOut(manager, execution);
      if (isChildrenMatcher(step.waitFor)) {
        const pass = await this.gate.fanIn.gate(manager, workflow, execution, step.waitFor, timedOut);
        if (pass === null) {
          await this.deadline.arm(manager, workflow, execution, step, definition); // [deadline hook] parked: arm its deadline
          return 'wait';
        }
        workflowInternals.rebind(instance, { children: pass.children, timedOut });
        prepared.fanInSignals = pass.signalIds;
        return 'pass';
      }
      // [deadline hook] a wait that timed out (onTimeout 'run') passes its gate with no signal.
      if (timedOut) {
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

  /** Phase 1 failed: the execution, if still `scheduled`, fails and its workflow follows the policy (StepOutcomes.applyPrepareFailure). */
  private async recordPrepareFailure(manager: EntityManager, executionId: string, workflowId: string, error: unknown): Promise<void> {
    const { workflow, execution } = await this.store.lockStep(manager, workflowId, executionId);
    if (!execution || execution.state !== 'scheduled') return;
    const definition = this.registry.findByName(workflow.type);
    // Not this process's to record either: a process that has the class runs the job again.
    if (!definition || lacksStep(definition, execution.stepName)) return;
    const logger = new ContextLogger(this.logger, workflow, execution);
    logger.error(`Preparing the step failed: ${String(error)}`);
    const step = definition?.step(execution.stepName);
    const policy = resolveExceptionPolicy(step, definition?.exceptionPolicies ?? [], error);
    await this.outcomes.applyPrepareFailure(manager, { workflow, execution, definition }, policy, error, logger);
  }
}
