import type { EntityManager, QueryRunner } from 'typeorm';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { isStaleStatement } from '../persistence/stale-statement.js';
import { isConnectionError, isDeadlock, type TransactionRunner } from '../persistence/transaction-runner.js';
import { jobOptionsFor, type WorkflowStore } from '../persistence/workflow-store.js';
import type { StepDefinition, WorkflowDefinition } from '../registry/workflow-definition.js';
import type { ExpectedStates } from '../persistence/sql/hot-path-sql.js';
import { phaseOneReadsHero, type PreparePhase } from './prepare-phase.js';
import type { StepOutcomes } from './step-outcome.js';
import { eventBase, IDEMPOTENT, keepsOutputs, type BodyResult, type Chain, type Prepared } from './step-run.js';
import { ChildrenRefused, type ChildStart } from './child-start.js';
import type { ConcurrencySlots } from './concurrency-slots.js';
import type { ChainedStarts, PlannedStart } from './chained-start.js';
import { SentAfterWriteError } from '../persistence/phase-batch.js';
import { resolveExceptionPolicy } from '../exception-policy/exception-policy.js';
import { isChildrenMatcher } from '../workflow/children-matcher.js';

/** What phase 3 recorded (null states: the outcome was discarded), and the step it started inline. */
export interface Recorded {
  states: { workflowState: string; stepState: string } | null;
  next: Prepared | null;
}

/** The inline phase 1 of a chained step failed: its transaction is lost, the outcome is recorded again without it. */
export class ChainedPrepareError extends Error {
  constructor(readonly cause: unknown) {
    super('The chained step could not start');
  }
}

/**
 * Phase 3 of a step execution: records the body's outcome (StepOutcomes) and schedules what comes
 * next — from the rows as phase 1 left them in one statement when nothing can have moved them
 * (recordUnlocked), else under the workflow and execution row locks (recordLocked). With a chain,
 * the step that outcome makes due starts in the same transaction (PreparePhase.prepareLocked). A
 * step's own exception is re-thrown only after its outcome is committed.
 */
export class FinalizePhase {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly outcomes: StepOutcomes,
    private readonly prepare: PreparePhase,
    private readonly childStart: ChildStart,
    private readonly slots: ConcurrencySlots,
    private readonly starts: ChainedStarts,
  ) {}

  /**
   * Records the outcome. With `chain`, when the outcome schedules a step that is due now, that
   * step's phase 1 runs in the same transaction and the prepared run is returned for the caller to
   * carry on with; should that fail, the outcome is recorded again alone and the step goes through
   * the queue (its own phase 1 then deals with the failure).
   */
  async finalize(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Prepared | null> {
    try {
      if (chain) {
        try {
          return await this.finalizeOnce(prepared, result, chain);
        } catch (error) {
          if (!(error instanceof ChainedPrepareError)) throw error;
          prepared.logger.warn(`Recording the outcome with the next step started inline failed (${String(error.cause)}): it is recorded alone, and the next step goes through the queue`);
        }
      }
      return await this.finalizeOnce(prepared, result);
    } catch (error) {
      const refused = this.childrenRefused(prepared, error);
      if (!refused) throw error;
      return this.finalize(prepared, refused);
    }
  }

  /**
   * When writing the body's children was refused (a child's hero has an ongoing workflow of its
   * class): the step's outcome becomes that exception under the step's policy, with nothing of the
   * body kept. Null for any other error.
   */
  childrenRefused(prepared: Prepared, error: unknown): BodyResult | null {
    if (!(error instanceof ChildrenRefused)) return null;
    prepared.outputs = undefined;
    prepared.logger.error(`Starting a child was refused: ${error.message}`);
    return { kind: 'exception', error: error.error, policy: resolveExceptionPolicy(prepared.step, prepared.definition.exceptionPolicies, error.error) };
  }

  private async finalizeOnce(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Prepared | null> {
    const started = performance.now();
    const recorded =
      (this.mayRecordUnlocked(prepared, result, chain) && (await this.recordUnlocked(prepared, result))) ||
      (chain && this.mayStartNextUnlocked(prepared, result) && (await this.recordStartingNext(prepared, result))) ||
      (await this.recordLocked(prepared, result, chain));
    return this.report(prepared, result, recorded, started);
  }

  /**
   * Phase 3 of a transactional step, in the transaction its body wrote in (TransactionalStep): the
   * workflow and execution rows are locked and checked only now, and the outcome is recorded when
   * they are as phase 1 left them (`performing`, `in_progress`). Null, having written nothing, when
   * they moved on (recovered, canceled or paused meanwhile): the caller rolls the body's writes back
   * and records the outcome with `finalize`, which deals with the rows as they are. With `chain`, the
   * step the outcome makes due starts in the same transaction (as in recordLocked): a ChainedPrepareError
   * then rolls back the body's writes with it.
   */
  async recordWithBody(manager: EntityManager, prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Recorded | null> {
    // Where the dialect allows, one statement that locks, checks and writes, as recordUnlocked's (a
    // resumable step's checkpoints rewrote its row: it is read again under the locks; a step to start
    // inline needs the rows written before its phase 1).
    const expected = !prepared.step.resumable && !startsChildren(prepared) && !(chain && !isLastStep(prepared)) ? asPhaseOneLeftThem(prepared) : undefined;
    if (expected && (await this.store.writeIfUnchanged(manager, expected, () => this.recordOutcome(manager, prepared, result)))) {
      return { states: { workflowState: prepared.workflow.state, stepState: prepared.execution.state }, next: null };
    }
    return this.store.batched(manager, async () => {
      const { workflow, execution } = await this.store.lockStep(manager, prepared.workflowId, prepared.executionId, parentToTell(prepared, result));
      if (!execution || execution.state !== 'in_progress' || workflow.state !== 'performing') return null;
      prepared.workflow = workflow;
      prepared.execution = execution;
      await this.recordOutcome(manager, prepared, result);
      // As the outcome left them: starting the next step inline changes the workflow's state.
      const states = { workflowState: workflow.state, stepState: execution.state };
      const next = chain ? await this.startDue(manager, prepared, workflow) : null;
      return { states, next };
    });
  }

  /** What every phase 3 ends with: the finalize event, the log line, and the step's own exception re-thrown once its outcome is recorded. */
  report(prepared: Prepared, result: BodyResult, recorded: Recorded, started: number): Prepared | null {
    const { states } = recorded;
    publish('finalize', () => ({
      ...eventBase(prepared, started),
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
    return result.kind !== 'exception' && !prepared.step.resumable && !startsChildren(prepared) && (!chain || isLastStep(prepared));
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
    const expected = asPhaseOneLeftThem(prepared);
    if (!expected) return null;
    const manager = this.transactions.dataSource.createEntityManager();
    try {
      if (!(await this.store.writeIfUnchanged(manager, expected, () => this.recordOutcome(manager, prepared, result)))) return null;
    } catch (error) {
      // Whatever failed (a lost connection, even one that lost the answer to a statement that went
      // through), the locked path runs next: it re-reads the rows and records only what is still due.
      if (!(error instanceof SentAfterWriteError)) return null;
      // Recorded, and only its jobs or wake-ups failed to go: the locked path, finding the execution
      // closed, sends them again; the outcome is the one written.
      await this.recordLocked(prepared, result);
    }
    return { states: { workflowState: workflow.state, stepState: execution.state }, next: null };
  }

  /**
   * Whether a chained outcome may be recorded as recordUnlocked's is, with the phase 1 of the step it
   * makes due in the same message (recordStartingNext): as for recordUnlocked, and no parent to tell
   * and no concurrency key to free (their writes need the locks held).
   */
  private mayStartNextUnlocked(prepared: Prepared, result: BodyResult): boolean {
    return this.mayRecordUnlocked(prepared, result) && !isLastStep(prepared) && parentToTell(prepared, result) === undefined && !prepared.step.concurrency && this.starts.mayStartAfter(this.transactions.dataSource.manager, prepared);
  }

  /**
   * A chained outcome as recordUnlocked records it, and where the step it made due decides nothing in
   * Node (ChainedStarts), that step's phase 1 by a statement in the same message, which commits with
   * it: one round trip where the locked path takes two. Null when that cannot be (the rows moved on,
   * the due step decides in Node, the message failed): the locked path then records the outcome from
   * the rows as they are, and starts the due step. When the answer was lost after the message
   * committed, that path finds the outcome recorded and sends the job of a step left scheduled; one
   * it started is recovered as any step whose run was lost.
   */
  private async recordStartingNext(prepared: Prepared, result: BodyResult): Promise<Recorded | null> {
    const expected = asPhaseOneLeftThem(prepared);
    if (!expected) return null;
    const manager = this.transactions.dataSource.createEntityManager();
    // The records as phase 1 left them: when nothing was sent, the locked path begins guarded from them (beginChain).
    const before = { workflow: { ...prepared.workflow }, execution: { ...prepared.execution } };
    let planned: PlannedStart | null = null;
    // An instance that cannot be built fails the inline start as the locked path's would (finalize).
    const instance = await this.starts.instance(prepared).catch((error: unknown) => {
      throw new ChainedPrepareError(error);
    });
    let written: Awaited<ReturnType<WorkflowStore['writeIfUnchanged']>>;
    try {
      written = await this.store.writeIfUnchanged(manager, expected, () => this.recordOutcome(manager, prepared, result), (due) => {
        if (!due) return undefined;
        planned = this.starts.plan(manager, prepared, due, instance);
        return planned?.read ?? null;
      });
    } catch (error) {
      // As a failed recordUnlocked's: the locked path re-reads the rows and records only what is
      // still due. Recorded, with only its jobs failing to go: that path sends them again.
      if (!(error instanceof SentAfterWriteError)) return null;
      const states = { workflowState: prepared.workflow.state, stepState: prepared.execution.state };
      await this.recordLocked(prepared, result);
      return { states, next: null };
    }
    if (!written) {
      if (!planned) {
        Object.assign(prepared.workflow, before.workflow);
        Object.assign(prepared.execution, before.execution);
      }
      return null;
    }
    // As the outcome left them: starting the next step changes the workflow's state.
    const states = { workflowState: prepared.workflow.state, stepState: prepared.execution.state };
    const start = planned as PlannedStart | null;
    if (!start) return { states, next: null };
    try {
      const { next, started } = start.finish(written.then);
      const { withheld } = written;
      if (started === null && withheld) await this.store.enqueue(manager, withheld.workflow, withheld.execution, withheld.jobOptions, withheld.jobId);
      return { states, next };
    } catch {
      // Committed; reading the answer or sending the job of a step left scheduled failed: the locked
      // path sends that job again (a step the message started is recovered as any run lost).
      await this.recordLocked(prepared, result);
      return { states, next: null };
    }
  }

  /** Records the outcome under the workflow and execution row locks, and with `chain` starts the step it made due (see finalize). */
  private async recordLocked(prepared: Prepared, result: BodyResult, chain?: Chain): Promise<Recorded> {
    let next: Prepared | null = null;
    // Retried after a lost connection, even one lost during COMMIT: the transaction records the
    // outcome only while the execution is still `in_progress` under its lock, so a retry after a
    // COMMIT that did go through (or after recordUnlocked's statement that did) finds it closed and
    // changes nothing; it sends the job of the step that outcome scheduled again, the first one
    // having died with the lost answer.
    // With a chain, the transaction begins with the outcome's guarded write where it can (beginChain).
    let guard: ExpectedStates | undefined;
    const states = await this.transactions.run((manager) => this.store.batched(manager, async () => {
      next = null; // a transaction run again after a lost connection starts over
      this.store.writeOnCommit(manager);
      if (guard) {
        const begun = await this.beginChain(manager, prepared, result, guard);
        if (begun === 'unsent') await this.beginLocking(manager.queryRunner!, prepared, result);
        else if (begun !== 'begun') {
          next = begun.next;
          return begun.states;
        }
      }
      const { workflow, execution } = await this.store.lockStep(manager, prepared.workflowId, prepared.executionId, parentToTell(prepared, result));
      if (!execution || execution.state !== 'in_progress') {
        prepared.logger.warn(`Execution is ${execution?.state ?? 'gone'} after the body ran (its outcome recorded already, by a write whose answer was lost or whose wake-ups failed, or recovered meanwhile): not recorded again`);
        await this.resendScheduled(manager, workflow, prepared.definition);
        await this.slots.wakeAfterLostEnd(manager, execution);
        return null;
      }
      prepared.workflow = workflow;
      prepared.execution = execution;
      const target = { workflow, execution, definition: prepared.definition };
      if (workflow.state !== 'performing') {
        if (prepared.step.resumable && workflow.state === 'paused') {
          // Keep the cursor: resume continues the chain from this row.
          prepared.logger.warn('Workflow was paused while the resumable step ran: execution closed as continued');
          await this.outcomes.apply(manager, target, { state: 'completed', outcome: 'continued' }, { workflow: 'unchanged' });
          return null;
        }
        prepared.logger.warn(`Workflow became ${workflow.state} while the step ran: execution canceled, outcome discarded`);
        await this.outcomes.apply(manager, target, { state: 'canceled', outcome: 'canceled' }, { workflow: 'unchanged' });
        return null;
      }
      await this.recordOutcome(manager, prepared, result);
      // As the outcome left them: starting the next step inline changes the workflow's state.
      const states = { workflowState: workflow.state, stepState: execution.state };
      if (chain) next = await this.startDue(manager, prepared, workflow);
      return states;
    }), undefined, {
      ...IDEMPOTENT,
      // Where the dialect can, the BEGIN goes with the lock read (or the chain's guarded write: the
      // work's first message then begins it), and the last writes with the COMMIT.
      begin: async (runner) => {
        // Not for a key's holder: its slot freed inside a transaction goes with the guarded write only
        // while nobody waits (PhaseBatch.changeSlot), and a refused write would cost a round trip more.
        // A retry after a failed attempt takes the locked path: that attempt's outcome moved the execution's state in memory.
        const mayGuard = chain && this.mayRecordUnlocked(prepared, result) && parentToTell(prepared, result) === undefined && !prepared.step.concurrency;
        guard = mayGuard && this.store.beginsWritingIfUnchanged(runner) ? asPhaseOneLeftThem(prepared) : undefined;
        if (!guard) await this.beginLocking(runner, prepared, result);
      },
      commit: (runner) => this.store.commitWithLastWrites(runner, (own) => this.commitChaining(own, next), !continuesInTransaction(next)),
    });
    return { states, next };
  }

  private beginLocking(runner: QueryRunner, prepared: Prepared, result: BodyResult): Promise<void> {
    return this.store.beginLockingStep(runner, prepared.workflowId, prepared.executionId, parentToTell(prepared, result));
  }

  /**
   * A chained finalize's first round trip, where the dialect can (WorkflowStore.beginWritingIfUnchanged):
   * BEGIN, the outcome decided on the rows as phase 1 left them and written only while they still are
   * (as recordUnlocked's; the rows then stay locked), and after it, by a statement of its own, the
   * hero and signals the step it made due reads in phase 1 (startDue). The due step's phase 1 then
   * runs in this transaction, as after the locked path's writes. `'begun'` or `'unsent'` when the
   * outcome was not written (see there): the locked path records it.
   */
  private async beginChain(manager: EntityManager, prepared: Prepared, result: BodyResult, expected: ExpectedStates): Promise<{ states: Recorded['states']; next: Prepared | null } | 'begun' | 'unsent'> {
    let read: ReturnType<WorkflowStore['heroRead']>;
    const written = await this.store
      .beginWritingIfUnchanged(manager, expected, () => this.recordOutcome(manager, prepared, result), (due) => {
        const step = due ? prepared.definition.step(due.stepName) : undefined;
        read = step && phaseOneReadsHero(prepared.definition, step) ? this.store.heroRead(manager, prepared.workflow.heroType, prepared.workflow.heroId, gateSignals(prepared.workflow, step)) : undefined;
        return read?.read;
      })
      .catch((error: unknown) => {
        // As a failed recordUnlocked's: the outcome is recorded under the locks, in a transaction of its own.
        if (isDeadlock(error) || isConnectionError(error) || isStaleStatement(error)) throw error;
        throw new ChainedPrepareError(error);
      });
    if (written === 'begun' || written === 'unsent') return written;
    const { workflow, execution } = prepared;
    const states = { workflowState: workflow.state, stepState: execution.state };
    return { states, next: await this.startDue(manager, prepared, workflow, read && written.then ? { hero: read.hero(written.then) } : undefined) };
  }

  /**
   * Phase 1, in this transaction, of the step the outcome just recorded made due now (the one job
   * the phase scheduled: WorkflowStore.takeDueJob), taken out of the queue; null when there is none.
   * A deadlock, a lost connection or a stale prepared statement is the transaction's (it runs again
   * whole, chain included); any other failure is a ChainedPrepareError.
   */
  private async startDue(manager: EntityManager, prepared: Prepared, workflow: WorkflowRecord, read?: { hero: object | null }): Promise<Prepared | null> {
    const due = this.store.takeDueJob(manager);
    if (!due) return null;
    try {
      // The hero's read (unless it came with the outcome's write: beginChain) writes this outcome and
      // the new row with it (its id is needed next), in one statement where the dialect allows; a
      // step whose own transaction reads its hero is left to it.
      const step = prepared.definition.step(due.stepName);
      const readsHero = phaseOneReadsHero(prepared.definition, step);
      const hero = read ? read.hero : readsHero ? await this.store.readHero(manager, workflow.heroType, workflow.heroId, gateSignals(workflow, step)) : undefined;
      if (!readsHero) await this.store.flush(manager);
      const started = await this.prepare.prepareLocked(manager, workflow, due, due.id, { ...prepared.run, jobId: undefined }, null, hero).finally(() => this.store.forgetReadSignals(manager));
      return 'run' in started ? started.run : null;
    } catch (error) {
      if (isDeadlock(error) || isConnectionError(error) || isStaleStatement(error)) throw error;
      throw new ChainedPrepareError(error);
    }
  }

  /**
   * The COMMIT of a finalize (`commit`: the transaction's own, a transactional step's); where it
   * chained into a transactional step, that step's transaction begins in the same round trip, on the
   * same connection, where the dialect can (StepTransaction.continueOn): the step then runs in it
   * (Prepared.transaction).
   */
  async commitChaining(runner: QueryRunner, next: Prepared | null, commit: (runner: QueryRunner) => Promise<void> = (own) => own.commitTransaction()): Promise<void> {
    const { step, workflow } = next ?? {};
    if (!continuesInTransaction(next)) return commit(runner);
    const transaction = this.store.stepTransaction(runner.manager, step!.transactionTimeoutMs, { type: workflow!.heroType, id: workflow!.heroId });
    const continued = await transaction.continueOn(runner);
    if (continued === false) return commit(runner);
    if (continued === 'continued') next.transaction = transaction;
  }

  /** The body's outputs (children, result) when the outcome keeps them, then the outcome. */
  private async recordOutcome(manager: EntityManager, prepared: Prepared, result: BodyResult): Promise<void> {
    if (prepared.outputs && keepsOutputs(result)) await this.childStart.write(manager, prepared.workflow, prepared.step.name, prepared.outputs);
    if (result.kind === 'exception') await this.outcomes.applyExceptionPolicy(manager, prepared, result.policy, result.error, 'exception_policy');
    else await this.outcomes.applyIntent(manager, prepared, result.kind === 'flow' ? result.intent : undefined);
  }

  /**
   * After a transactional step's end whose answer was lost with its COMMIT's: when it committed (the
   * execution is no longer in progress), the job of the step it scheduled goes out, as the jobs of
   * any lost COMMIT do (AfterCommitSubscriber.commitOutcomeUnknown); the ids it wrote were lost.
   */
  async resendIfRecorded(prepared: Prepared): Promise<void> {
    await this.transactions.run(
      (manager) =>
        this.store.batched(manager, async () => {
          const { workflow, execution } = await this.store.lockStep(manager, prepared.workflowId, prepared.executionId);
          if (execution && execution.state !== 'in_progress') await this.resendScheduled(manager, workflow, prepared.definition);
        }),
      undefined,
      IDEMPOTENT,
    );
  }

  /**
   * Sends the job of the workflow's scheduled execution again, if it has one: what a COMMIT whose
   * answer was lost would have sent. A job that finds its execution started already is ignored.
   */
  private async resendScheduled(manager: EntityManager, workflow: WorkflowRecord, definition: WorkflowDefinition): Promise<void> {
    const current = await this.store.currentExecution(manager, workflow.id);
    if (current?.state === 'scheduled') await this.store.enqueue(manager, workflow, current, jobOptionsFor(definition, definition.step(current.stepName)), current.jobId ?? undefined);
  }
}

/**
 * The states phase 1 left the rows in (`performing`, `in_progress`), for a write that goes out only
 * while they still are (WorkflowStore.writeIfUnchanged); undefined when the records say otherwise.
 */
function asPhaseOneLeftThem({ workflow, execution }: Prepared): ExpectedStates | undefined {
  if (workflow.state !== 'performing' || execution.state !== 'in_progress') return undefined;
  return { workflowId: workflow.id, workflowState: 'performing', executionId: execution.id, executionState: 'in_progress' };
}

/** The signals a gate's phase 1 reads with the hero, where the dialect can: the read the gate would make next. */
function gateSignals(workflow: WorkflowRecord, step: StepDefinition | undefined): { workflowId: string; name: string | null } | undefined {
  return step?.waitFor && !isChildrenMatcher(step.waitFor) ? { workflowId: workflow.id, name: step.waitFor.signalName || null } : undefined;
}

/** Whether the step started inline runs in a transaction that its finalize's COMMIT begins (commitChaining). */
function continuesInTransaction(next: Prepared | null): next is Prepared {
  return next !== null && next.step.transactional && !next.step.resumable;
}

/** Whether the body started children: they are written under the row locks, never by the one-statement end. */
function startsChildren(prepared: Prepared): boolean {
  return (prepared.outputs?.children.length ?? 0) > 0;
}

/** Whether the step is its workflow's last: nothing can come due after it, so there is nothing to chain into. */
function isLastStep({ step, definition }: Prepared): boolean {
  return definition.steps[definition.steps.length - 1] === step;
}

/**
 * The parent of a child whose outcome may end it (its last step, or a flow intent: `finished()`,
 * `cancel()`), to be locked with the step's rows (WorkflowStore.lockStep): the end tells it.
 */
function parentToTell(prepared: Prepared, result: BodyResult): string | undefined {
  const { parentId } = prepared.workflow;
  return parentId && (result.kind === 'flow' || isLastStep(prepared)) ? parentId : undefined;
}
