import type { EntityManager } from 'typeorm';
import { TransactionTimeoutError } from '../errors/transactional-step.errors.js';
import { resolveExceptionPolicy } from '../exception-policy/exception-policy.js';
import { CommitOutcomeUnknownError } from '../errors/commit-outcome-unknown.error.js';
import { isStaleStatement } from '../persistence/stale-statement.js';
import { isConnectionError, isDeadlock, type TransactionOptions, type TransactionRunner } from '../persistence/transaction-runner.js';
import { writeCursor } from '../persistence/sql/step-checkpoint.js';
import { EndRefusedError, type StepTransaction } from '../persistence/step-transaction.js';
import type { WorkflowStore } from '../persistence/workflow-store.js';
import { workflowInternals } from '../workflow/geneva-workflow.js';
import { ChainedPrepareError, type FinalizePhase, type Recorded } from './finalize-phase.js';
import type { StepBody } from './step-body.js';
import { keepsOutputs, type BodyResult, type Chain, type Prepared } from './step-run.js';

/**
 * The step's transaction: run again here, not by the runner (a re-run must re-run the body with it),
 * begun as `opening` says (bounded by the step's `transactionTimeout` where the database can).
 * `commit`, when given, replaces the opening's COMMIT (a step started inline: FinalizePhase.commitChaining).
 */
const stepTransaction = (opening: StepTransaction, commit = opening.commit): TransactionOptions => ({ once: true, begin: opening.begin, commit, rollback: opening.rollback, runner: opening.runner });
/** Runs of a transaction lost to a deadlock or a connection before COMMIT, body included. */
const TRANSIENT_TRIES = 4;

/** A statement's error that lost the transaction but not its outcome: nothing committed (a COMMIT whose answer was lost is not one). */
function isTransient(error: unknown): boolean {
  return !(error instanceof CommitOutcomeUnknownError) && (isDeadlock(error) || isStaleStatement(error) || isConnectionError(error));
}

/** Thrown inside the body's transaction to roll it back; the outcome is then recorded on its own. */
class RollBack extends Error {
  constructor() {
    super('The transactional step does not keep its writes');
  }
}

/**
 * Phases 2 and 3 of a transactional step (`@Step({ transactional: true })`), in one database
 * transaction: the body writes through `this.manager` (the hero read again through it), then the
 * outcome is recorded in the same transaction, so the body's writes and the step's completion commit
 * together or not at all. No engine lock is held while the body runs: the workflow and execution
 * rows are locked and checked only once it returned (FinalizePhase.recordWithBody).
 *
 * Kept with the outcome: a completion, `finished()` and `skip()` (the step decided; its work stands).
 * Rolled back, the outcome then recorded by the ordinary phase 3 in a transaction of its own (the
 * audit trail keeps the attempt): an exception (its policy applies), `reattempt()` and `pause()` (the
 * body runs again later, and must find nothing of this attempt), `cancel()`, a body over its
 * `transactionTimeout`, and an end refused because the rows moved on (recovered, canceled, paused).
 *
 * A deadlock or a connection lost before COMMIT runs the whole transaction again, body included:
 * nothing of it was committed. So does a failure to start the next step inline (`chainAfter`), with
 * that step left to the queue. A connection lost during COMMIT leaves the outcome unknown: either
 * both the writes and the outcome are in the database, or neither is and housekeeping's stuck-step
 * recovery runs the step again.
 */
export class TransactionalStep {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly body: StepBody,
    private readonly finalize: FinalizePhase,
  ) {}

  /**
   * `chainAfter` says, from the body's result, whether the step the outcome makes due may start
   * inline, in this transaction (ExecutorService.mayChain); never after a resumable step.
   */
  async run(prepared: Prepared, chainAfter: (result: BodyResult) => Chain | undefined = () => undefined): Promise<Prepared | null> {
    if (prepared.step.resumable) return this.runInSegments(prepared);
    let chaining = true;
    // The rows as phase 1 left them, for a run again: an end that did not commit may have changed them in memory.
    const { workflow, execution } = prepared;
    const rows = { workflow: { ...workflow }, execution: { ...execution } };
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) {
        prepared.workflow = Object.assign(workflow, rows.workflow);
        prepared.execution = Object.assign(execution, rows.execution);
      }
      const started = performance.now();
      // Begun already by the COMMIT that chained this step, the first time.
      const opening = prepared.transaction ?? this.opening(prepared, true);
      prepared.transaction = undefined;
      let ran: BodyResult | null = null;
      let undone: BodyResult | null = null;
      let next: Prepared | null = null;
      try {
        const { result, recorded } = await this.transactions.run(
          async (manager): Promise<{ result: BodyResult; recorded: Recorded }> => {
            const result = (ran = await this.runBody(manager, prepared, opening));
            const chain = chaining ? chainAfter(result) : undefined;
            const recorded = keepsOutputs(result) ? await this.finalize.recordWithBody(manager, prepared, result, chain) : null;
            if (recorded) {
              next = recorded.next;
              return { result, recorded };
            }
            undone = result;
            throw new RollBack();
          },
          undefined,
          stepTransaction(opening, (runner) => this.finalize.commitChaining(runner, next, opening.commit)),
        );
        return this.finalize.report(prepared, result, recorded, started);
      } catch (error) {
        // The transaction is over: an exception handler run by the ordinary phase 3 must not use it.
        workflowInternals.rebind(prepared.instance, { manager: undefined });
        // The rollback itself may fail on a dead connection: the result decided before it still stands.
        if (undone !== null) return this.finalize.finalize(prepared, undone);
        // The end, sent with the COMMIT, found the rows moved on: nothing committed (as undone above).
        if (error instanceof EndRefusedError && ran !== null) return this.finalize.finalize(prepared, ran);
        // A child refused (an ongoing workflow of its class for its hero): the step fails, nothing kept.
        const refused = this.finalize.childrenRefused(prepared, error);
        if (refused) return this.finalize.finalize(prepared, refused);
        // The next step could not start inline: nothing committed; this one runs again, that one through the queue.
        if (error instanceof ChainedPrepareError) {
          prepared.logger.warn(`Starting the next step inline failed (${String(error.cause)}): the transactional step runs again, and that step goes through the queue`);
          chaining = false;
          continue;
        }
        // Its answer lost, the end may have committed: the jobs of the rows it wrote go out if so.
        if (error instanceof CommitOutcomeUnknownError && opening.endSent) await this.finalize.resendIfRecorded(prepared).catch(() => undefined);
        // Nothing of the transaction committed: the body runs again, on a fresh transaction.
        if (attempt < TRANSIENT_TRIES && isTransient(error)) {
          prepared.logger.warn(`The transactional step's transaction was lost (${String(error)}): it runs again`);
          // Without the inline start, which may be what outlasted the transaction's bounds.
          chaining = false;
          continue;
        }
        throw error;
      }
    }
  }

  /**
   * The body, bound to the transaction, with the hero read through it. A body over its
   * `transactionTimeout` fails with TransactionTimeoutError; one whose statement lost the
   * transaction (a deadlock, a lost connection) throws, so that the whole transaction runs again.
   */
  private async runBody(manager: EntityManager, prepared: Prepared, opening: StepTransaction): Promise<BodyResult> {
    const { step, definition } = prepared;
    const started = performance.now();
    if (!(await this.bindTo(manager, prepared, opening))) return CANCEL;
    const result = await this.body.run(prepared);
    const elapsedMs = performance.now() - started;
    if (elapsedMs > step.transactionTimeoutMs) {
      const error = new TransactionTimeoutError(step.name, step.transactionTimeoutMs, elapsedMs);
      prepared.logger.error(error.message);
      return { kind: 'exception', error, policy: resolveExceptionPolicy(step, definition.exceptionPolicies, error) };
    }
    if (result.kind === 'exception' && isTransient(result.error)) throw result.error;
    return result;
  }

  /**
   * Binds the body to the transaction: `this.manager`, and the hero read through it. False when the
   * hero is gone (and the workflow may not proceed without it): the workflow is to be canceled.
   */
  private async bindTo(manager: EntityManager, prepared: Prepared, opening: StepTransaction): Promise<boolean> {
    const { definition, instance } = prepared;
    const hero = await opening.hero(manager);
    if (hero === null && !definition.mayProceedWithoutHero) {
      prepared.logger.log('Hero is gone: workflow canceled');
      return false;
    }
    workflowInternals.rebind(instance, { hero, manager });
    return true;
  }

  /** How the step's transaction opens; `withHero`: the hero read in it (the first of a resumable step's segments, or a plain step's one). */
  private opening(prepared: Prepared, withHero: boolean): StepTransaction {
    const { workflow, step } = prepared;
    return this.store.stepTransaction(this.transactions.dataSource.manager, step.transactionTimeoutMs, withHero ? { type: workflow.heroType, id: workflow.heroId } : undefined);
  }

  /**
   * A transactional resumable step: the body runs in a chain of transactions (segments), each ended
   * by a checkpoint, which writes the cursor in it, after checking under the row locks that the
   * execution is still this run's, then commits it and begins the next: the writes between two
   * checkpoints commit with the second one, so each item is done exactly once. The last segment
   * ends with the outcome, as a plain transactional step's transaction does. A segment that cannot
   * commit (an exception, a deadlock, a lost connection, a COMMIT whose answer was lost) is rolled
   * back: the successor continues from the cursor that did commit.
   */
  private async runInSegments(prepared: Prepared): Promise<Prepared | null> {
    const { step, definition, instance } = prepared;
    const started = performance.now();
    let segment: Segment;
    let heroThere: boolean;
    try {
      const opening = this.opening(prepared, true);
      segment = await this.openSegment(opening);
      heroThere = await this.bindTo(segment.manager, prepared, opening);
    } catch {
      return this.finalize.finalize(prepared, CONTINUE);
    }
    if (!heroThere) {
      await segment.end(false);
      return this.finalize.finalize(prepared, CANCEL);
    }
    /** Why the body must stop writing, once it must (a holder: the checkpoints set it). */
    const run: { stopped: Stop | null } = { stopped: null };
    const stop = async (reason: Stop): Promise<never> => {
      run.stopped = reason;
      workflowInternals.rebind(instance, { manager: undefined });
      await segment.end(false).catch(() => undefined);
      throw reason.why === 'timeout' ? reason.error : new RollBack();
    };
    const persist = async (encoded: string): Promise<void> => {
      if (run.stopped) throw new RollBack();
      const elapsedMs = performance.now() - segment.openedAt;
      if (elapsedMs > step.transactionTimeoutMs) return stop({ why: 'timeout', error: new TransactionTimeoutError(step.name, step.transactionTimeoutMs, elapsedMs) });
      try {
        const { workflow: now, execution } = await this.store.lockStep(segment.manager, prepared.workflowId, prepared.executionId);
        // A pause from outside stops the step at this checkpoint (StepIteration.shouldStop): its items so far are kept.
        if (execution?.state !== 'in_progress' || (now.state !== 'performing' && now.state !== 'paused')) return stop({ why: 'refused' });
        await writeCursor(segment.manager, prepared.executionId, encoded);
        await segment.end(true);
        segment = await this.openSegment(this.opening(prepared, false));
      } catch (error) {
        if (error instanceof RollBack) throw error;
        return stop({ why: 'lost' });
      }
      workflowInternals.rebind(instance, { manager: segment.manager });
    };

    const result = await this.body.run(prepared, persist);
    const reason = run.stopped;
    if (reason?.why === 'refused') return this.finalize.finalize(prepared, result); // the rows moved on: phase 3 finds them so
    if (reason?.why === 'timeout') return this.finalize.finalize(prepared, { kind: 'exception', error: reason.error, policy: resolveExceptionPolicy(step, definition.exceptionPolicies, reason.error) });
    const lost = reason?.why === 'lost' || (result.kind === 'exception' && isTransient(result.error));
    const kept = !lost && (keepsOutputs(result) || (result.kind === 'flow' && result.intent.kind === 'continue'));
    const recorded = kept ? await this.finalize.recordWithBody(segment.manager, prepared, result).catch(() => null) : null;
    workflowInternals.rebind(instance, { manager: undefined });
    if (!recorded) {
      await segment.end(false).catch(() => undefined);
      return this.finalize.finalize(prepared, lost ? CONTINUE : result);
    }
    try {
      await segment.end(true);
    } catch (error) {
      // A COMMIT whose answer was lost: stuck recovery settles the execution. Any other failure wrote nothing.
      if (error instanceof CommitOutcomeUnknownError) throw error;
      return this.finalize.finalize(prepared, CONTINUE);
    }
    return this.finalize.report(prepared, result, recorded, started);
  }

  /**
   * A transaction held open across part of a body (a segment of a resumable step), begun now and
   * ended on demand: committed, or rolled back. It runs through the TransactionRunner like any
   * other (SQLite's writer queue, a lost COMMIT's jobs).
   */
  private async openSegment(opening: StepTransaction): Promise<Segment> {
    let opened!: (manager: EntityManager) => void;
    let failed!: (error: unknown) => void;
    const ready = new Promise<EntityManager>((resolve, reject) => {
      opened = resolve;
      failed = reject;
    });
    let finish!: (commit: boolean) => void;
    const ending = new Promise<boolean>((resolve) => (finish = resolve));
    const done = this.transactions.run(
      async (manager) => {
        opened(manager);
        if (!(await ending)) throw new RollBack();
      },
      undefined,
      stepTransaction(opening),
    );
    done.catch(failed);
    const manager = await ready;
    return {
      manager,
      openedAt: performance.now(),
      end: async (commit) => {
        finish(commit);
        await done.catch((error: unknown) => {
          if (!(error instanceof RollBack)) throw error;
        });
      },
    };
  }
}

/** Why a resumable step's body must stop writing: the rows moved on, its segment outlasted its timeout, or a segment was lost. */
type Stop = { why: 'refused' | 'lost' } | { why: 'timeout'; error: TransactionTimeoutError };

/** A transaction of a resumable step's body, between two checkpoints. */
interface Segment {
  manager: EntityManager;
  openedAt: number;
  end(commit: boolean): Promise<void>;
}

const CANCEL: BodyResult = { kind: 'flow', intent: { kind: 'cancel' } };

/** A resumable step whose segment was lost hands on to a successor, which continues from the cursor that committed. */
const CONTINUE: BodyResult = { kind: 'flow', intent: { kind: 'continue', waitMs: undefined } };
