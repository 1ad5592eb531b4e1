import type { LoggerService } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { StepRecoveryLimitError } from '../errors/step-recovery-limit.error.js';
import type { ExceptionPolicy } from '../exception-policy/exception-policy.js';
import type { StepJob } from '../interfaces/queue.port.js';
import { consecutiveErrorReattempts } from '../persistence/sql/error-reattempts.js';
import { jobHints, jobOptionsFor, rerunsTimedOut, successorOf, type NewExecution, type WorkflowStore } from '../persistence/workflow-store.js';
import type { StepDefinition, WorkflowDefinition } from '../registry/workflow-definition.js';
import type { StepOutcome } from '../state/step-execution-state.js';
import { isFlowControl, type FlowControlIntent } from '../workflow/flow-control.js';
import { workflowInternals } from '../workflow/geneva-workflow.js';
import { errorColumns, withMetadata } from './error-record.js';
import type { SignalRendezvous } from './signal-rendezvous.js';
import type { Prepared } from './step-run.js';
import { isRunnable } from '../state/workflow-state.js';
import { timeoutJobId } from '../queue/deadline-job.js';

/**
 * Outcome → state changes: what ending a step execution does to the execution, to the signal it
 * claimed and to its workflow, for every path that ends one — the executor (a body's outcome or
 * exception, a precondition's verdict or exception, a failed prepare), a wait deadline's expiry
 * (WaitDeadline) and housekeeping's stuck recovery. Every end is a {@link Close} of the execution
 * followed by what the workflow does ({@link Then}), written by {@link applyClose} in that order;
 * the rules below only decide which. The caller holds the workflow row lock (or writes with
 * WorkflowStore.writeIfUnchanged) and logs what it decided.
 */

/** How the execution ends: its state, its outcome, and the columns written with them. */
export interface Close {
  state: 'completed' | 'failed' | 'canceled' | 'skipped';
  outcome: StepOutcome;
  columns?: Partial<StepExecution>;
}

/**
 * What the workflow does once the execution is closed: go on after the step (`after`: the step the
 * history places the next one after, by default the current or next one), run the same step again
 * as `execution`, stop in a state, or stay as it is.
 */
export type Then =
  | { workflow: 'next'; after?: string | null }
  | { workflow: 'again'; execution: NewExecution }
  | { workflow: 'finished' | 'paused' | 'canceled' }
  | { workflow: 'unchanged' };

/** The rows an outcome changes. */
export interface OutcomeTarget {
  workflow: WorkflowRecord;
  execution: StepExecution;
  definition: WorkflowDefinition | undefined;
  /** A fan-in step's claimed `child_finished` signals (Prepared.fanInSignals), settled as its pinned signal would be. */
  fanInSignals?: string[];
}

/** Why an error-driven reattempt was made (recorded as `reattemptReason`, counted toward `maxReattempts`). */
export type ExceptionReason = 'exception_policy' | 'precondition';

/** A declarative exception policy's decision for one error (see {@link StepOutcomes.policyVerdict}). */
type PolicyVerdict = { action: 'reattempt'; delayMs: number | undefined } | { action: 'skip' | 'cancel' | 'pause'; exhausted?: true };

const NEXT: Then = { workflow: 'next' };

/** The workflow patch of an outcome recorded after the step ran: it is no longer at that step. */
const atNoStep = (): Partial<WorkflowRecord> => ({ currentStepName: null });

/**
 * Writes an outcome: the execution closed, then its signal settled — a clean completion consumes
 * the signal the step was given, a skip settles it (SignalRendezvous.settleOnSkip); any other end
 * keeps the claim, so a retry re-reads the same event — then the workflow as `then` says, with
 * `patch` in the same UPDATE. `rendezvous` may be null only for closes that settle nothing.
 */
export async function applyClose(
  store: WorkflowStore,
  rendezvous: SignalRendezvous | null,
  manager: EntityManager,
  { workflow, execution, definition, fanInSignals }: OutcomeTarget,
  close: Close,
  then: Then,
  patch: Partial<WorkflowRecord> = {},
): Promise<void> {
  await store.transitionExecution(manager, execution, close.state, close.outcome, close.columns);
  if (close.outcome === 'success') await rendezvous!.settleOnSuccess(manager, execution);
  else if (close.state === 'skipped') await rendezvous!.settleOnSkip(manager, execution);
  if (close.outcome === 'success' || close.state === 'skipped') await rendezvous?.settleFanIn(manager, fanInSignals);
  switch (then.workflow) {
    case 'next':
      await store.scheduleNextStep(manager, workflow, definition, patch, then.after);
      return;
    case 'again':
      await store.rescheduleCurrentStep(manager, workflow, definition, then.execution, patch);
      return;
    case 'unchanged':
      return;
    default:
      await store.transitionWorkflow(manager, workflow, then.workflow, patch);
  }
}

/**
 * An execution of a gravestone (`removedSteps`) is released: skipped, its metadata marked
 * `removedStep: true`, its signal settled as a skip's, and the workflow goes on with the step after
 * the gravestone's position — by the executor (scheduled before the deploy) or by `resume()` (parked).
 */
export function skipRemovedStep(store: WorkflowStore, rendezvous: SignalRendezvous, manager: EntityManager, target: OutcomeTarget): Promise<void> {
  const close: Close = { state: 'skipped', outcome: 'skipped', columns: { metadata: withMetadata(target.execution, { removedStep: true }) } };
  return applyClose(store, rendezvous, manager, target, close, { workflow: 'next', after: target.execution.stepName }, atNoStep());
}

/** The outcome rules of the executor and of wait deadlines, written through the store and the rendezvous. */
export class StepOutcomes {
  constructor(
    private readonly store: WorkflowStore,
    private readonly rendezvous: SignalRendezvous,
  ) {}

  /** See {@link skipRemovedStep}. */
  skipRemoved(manager: EntityManager, target: OutcomeTarget): Promise<void> {
    return skipRemovedStep(this.store, this.rendezvous, manager, target);
  }

  /** Writes `close` then `then` (see {@link applyClose}). */
  apply(manager: EntityManager, target: OutcomeTarget, close: Close, then: Then, patch: Partial<WorkflowRecord> = {}): Promise<void> {
    return applyClose(this.store, this.rendezvous, manager, target, close, then, patch);
  }

  /**
   * A completed body (no intent) or a flow-control intent — the body's, or an exception handler's
   * (with the error's `columns`, and the reason its reattempt counts under) — and what follows.
   */
  async applyIntent(
    manager: EntityManager,
    prepared: Prepared,
    intent: FlowControlIntent | undefined,
    columns: Partial<StepExecution> = {},
    reason: 'flow_control' | ExceptionReason = 'flow_control',
  ): Promise<void> {
    const { execution } = prepared;
    const target = targetOf(prepared);
    switch (intent?.kind) {
      case undefined:
        return this.apply(manager, target, { state: 'completed', outcome: 'success', columns }, NEXT, atNoStep());
      case 'finished':
        return this.apply(manager, target, { state: 'completed', outcome: 'success', columns }, { workflow: 'finished' }, atNoStep());
      case 'skip':
        return this.apply(manager, target, { state: 'skipped', outcome: 'skipped', columns }, NEXT, atNoStep());
      case 'cancel':
        return this.apply(manager, target, { state: 'canceled', outcome: 'canceled', columns }, { workflow: 'canceled' }, atNoStep());
      case 'pause':
        // A resumable step closes as continued with its cursor: resume continues the chain from
        // there. A plain one is canceled; nextStepName still names it, so resume runs it again.
        return this.apply(
          manager,
          target,
          prepared.step.resumable ? { state: 'completed', outcome: 'continued', columns } : { state: 'canceled', outcome: 'canceled', columns },
          { workflow: 'paused' },
          atNoStep(),
        );
      case 'reattempt': {
        const metadata = withMetadata({ ...execution, ...columns } as StepExecution, { reattemptReason: reason });
        const again = retryOf(prepared, intent.waitMs, intent.rewind);
        return this.apply(manager, target, { state: 'completed', outcome: 'reattempted', columns: { ...columns, metadata } }, { workflow: 'again', execution: again }, atNoStep());
      }
      case 'continue':
        return this.apply(manager, target, { state: 'completed', outcome: 'continued', columns }, { workflow: 'again', execution: successorOf(execution, intent.waitMs) }, atNoStep());
    }
  }

  /**
   * Applies an exception policy, after a body exception (execution `in_progress`) or a precondition
   * exception (execution still `scheduled`, reason `precondition`). A handler decides with flow
   * control, as the body would have; a declarative policy by {@link policyVerdict}.
   */
  async applyExceptionPolicy(manager: EntityManager, prepared: Prepared, policy: ExceptionPolicy, error: unknown, reason: ExceptionReason): Promise<void> {
    const { workflow, execution, instance, logger } = prepared;
    const target = targetOf(prepared);
    const failWith = (outcome: 'failed' | 'canceled', state: 'paused' | 'canceled') =>
      this.apply(manager, target, { state: 'failed', outcome, columns: errorColumns(execution, error) }, { workflow: state }, atNoStep());

    if (policy.handler) {
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
      return this.applyIntent(manager, prepared, intent, errorColumns(execution, error), reason);
    }

    logger.log(`Exception policy: ${policy.action}`);
    const verdict = await this.policyVerdict(manager, workflow, execution, policy, policy.action, logger);
    switch (verdict.action) {
      case 'reattempt': {
        const described = errorColumns(execution, error);
        const columns = { metadata: { ...described.metadata, reattemptReason: reason } };
        return this.apply(manager, target, { state: 'completed', outcome: 'reattempted', columns }, { workflow: 'again', execution: retryOf(prepared, verdict.delayMs) }, atNoStep());
      }
      case 'skip':
        return this.apply(manager, target, { state: 'skipped', outcome: 'skipped' }, NEXT, atNoStep());
      case 'cancel':
        if (verdict.exhausted) logger.warn(`Reattempts exhausted (${policy.maxReattempts}): ${policy.terminalAction}`);
        return failWith('canceled', 'canceled');
      case 'pause':
        if (verdict.exhausted) logger.warn(`Reattempts exhausted (${policy.maxReattempts}): ${policy.terminalAction}`);
        return failWith('failed', 'paused');
    }
  }

  /**
   * Phase 1 failed (its transaction is gone): the execution, still `scheduled`, fails with the
   * error, and only the workflow follows the policy — the step never started, so handlers do not run
   * (an imperative policy pauses). A workflow no longer runnable is left as it is.
   */
  async applyPrepareFailure(manager: EntityManager, target: OutcomeTarget, policy: ExceptionPolicy, error: unknown, logger: LoggerService): Promise<void> {
    const { workflow, execution } = target;
    const runnable = isRunnable(workflow.state);
    const verdict = runnable ? await this.policyVerdict(manager, workflow, execution, policy, policy.isImperative ? 'pause' : policy.action, logger) : undefined;
    const columns = errorColumns(execution, error);
    // A retried prepare failure is marked, so it counts toward maxReattempts like any error reattempt.
    if (verdict?.action === 'reattempt') columns.metadata = { ...columns.metadata, reattemptReason: 'precondition' };
    let then: Then;
    switch (verdict?.action) {
      case undefined:
        then = { workflow: 'unchanged' };
        break;
      case 'reattempt':
        then = { workflow: 'again', execution: { waitMs: verdict.delayMs, timedOut: rerunsTimedOut(target.definition?.step(execution.stepName), execution) } };
        break;
      case 'skip':
        then = NEXT;
        break;
      case 'cancel':
        then = { workflow: 'canceled' };
        break;
      default:
        then = { workflow: 'paused' };
    }
    await this.apply(manager, target, { state: 'failed', outcome: 'failed', columns }, then);
  }

  /**
   * A parked execution's wait timed out, the locks held and the workflow `ready`: its step's
   * `onTimeout`, the execution's metadata marked `timedOut: true` whatever the action. `run` makes it
   * due now under a job id of its own (the deadline job is the one running): if that enqueue is
   * lost, the stuck-scheduled sweep finds the row overdue, and the gate lets it through unsignaled.
   * `pause` is like a pause from the step: nextStepName still names it, so resume waits again (or
   * finds a buffered signal).
   */
  async expireWait(manager: EntityManager, target: OutcomeTarget & { definition: WorkflowDefinition }, step: StepDefinition): Promise<void> {
    const { workflow, execution, definition } = target;
    const metadata = withMetadata(execution, { timedOut: true });
    switch (step.onTimeout) {
      case 'run': {
        const jobId = timeoutJobId(execution.id);
        await this.store.transitionExecution(manager, execution, 'scheduled', null, { scheduledFor: this.store.now(), jobId, metadata });
        await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, step), jobId);
        return;
      }
      case 'skip':
        return this.apply(manager, target, { state: 'skipped', outcome: 'skipped', columns: { metadata } }, NEXT);
      case 'cancel':
        return this.apply(manager, target, { state: 'canceled', outcome: 'canceled', columns: { metadata } }, { workflow: 'canceled' });
      case 'pause':
        return this.apply(manager, target, { state: 'canceled', outcome: 'canceled', columns: { metadata } }, { workflow: 'paused' });
    }
  }

  /**
   * A declarative policy's decision for one error (`action`: the policy's, or `pause` for one that
   * must not run a handler): `reattempt` with its wait while `maxReattempts` allows (error-driven
   * reattempts since the step's last clean completion, plus this one), else its `terminalAction`
   * (`exhausted`); a wait function that throws pauses.
   */
  private async policyVerdict(
    manager: EntityManager,
    workflow: WorkflowRecord,
    execution: StepExecution,
    policy: ExceptionPolicy,
    action: ExceptionPolicy['action'] | 'pause',
    logger: LoggerService,
  ): Promise<PolicyVerdict> {
    switch (action) {
      case 'reattempt': {
        await this.store.flush(manager); // the history is read with the phase's writes
        const attempt = (await consecutiveErrorReattempts(manager, workflow.id, execution.stepName)) + 1;
        if (policy.maxReattempts !== null && attempt > policy.maxReattempts) return { action: policy.terminalAction, exhausted: true };
        try {
          return { action: 'reattempt', delayMs: policy.reattemptDelay(attempt) };
        } catch (waitError) {
          // A broken wait function must not strand the step: pause with the original error.
          logger.error(`The reattempt wait raised ${String(waitError)}: workflow paused`);
          return { action: 'pause' };
        }
      }
      case 'skip':
      case 'cancel':
        return { action };
      default:
        return { action: 'pause' };
    }
  }
}

/** What stuck recovery wrote: the job to enqueue once committed (null: none), or the limit that paused the workflow. */
export type Recovery = StepJob | null | StepRecoveryLimitError;

/**
 * Stuck recovery of an execution of a runnable workflow, re-checked as stuck under the locks (see
 * HousekeepingService): `stuckRecoveryAction: 'cancel'` cancels the workflow. Otherwise a lost
 * enqueue (`scheduled`) is enqueued again with nothing changed, and a worker that died mid-step
 * (`in_progress`) has its row closed as `recovered` and the step run again — a resumable step from
 * its cursor; the successor keeps the signal pin, so it re-reads the very event the row was given —
 * unless it was recovered `maxRecoveries` times in a row already (`countRecoveries`): a poison step,
 * whose next run would only kill another worker, fails and pauses the workflow. The job is returned,
 * not enqueued through the store: housekeeping sends it after the commit and reports a failed send.
 * Nothing here settles a signal (no recovery ends an execution cleanly), hence no rendezvous.
 */
export async function recoverStuck(
  store: WorkflowStore,
  manager: EntityManager,
  { workflow, execution, definition }: OutcomeTarget,
  state: 'in_progress' | 'scheduled',
  options: { stuckRecoveryAction: 'reattempt' | 'cancel'; maxRecoveries: number | null },
  countRecoveries: () => Promise<number>,
): Promise<Recovery> {
  const target = { workflow, execution, definition };
  if (options.stuckRecoveryAction === 'cancel') {
    await applyClose(store, null, manager, target, { state: 'canceled', outcome: 'recovered' }, { workflow: 'canceled' }, atNoStep());
    return null;
  }
  if (state === 'scheduled') {
    // A lost enqueue: enqueue the same execution again (its job id is its id, so a job that does
    // exist is not duplicated). Nothing changes in the database.
    return { executionId: execution.id, hints: jobHints(workflow, execution.stepName), runAt: execution.scheduledFor, jobOptions: jobOptionsFor(definition, definition?.step(execution.stepName)) };
  }
  const stepName = workflow.currentStepName ?? workflow.nextStepName;
  if (stepName === null) throw new Error(`Workflow ${workflow.id} has no current or next step to run again`);
  const step = definition?.step(execution.stepName);
  const maxRecoveries = step?.maxRecoveries === undefined ? options.maxRecoveries : step.maxRecoveries;
  if (maxRecoveries !== null) {
    const recoveries = await countRecoveries();
    if (recoveries >= maxRecoveries) {
      const reason = new StepRecoveryLimitError(workflow.id, execution.id, execution.stepName, recoveries, maxRecoveries);
      const columns = errorColumns(execution, reason);
      const close: Close = { state: 'failed', outcome: 'failed', columns: { ...columns, metadata: { ...columns.metadata, recoveryLimit: { recoveries, maxRecoveries } } } };
      // nextStepName keeps the step, so `resume` runs it again.
      await applyClose(store, null, manager, target, close, { workflow: 'paused' }, { currentStepName: null, nextStepName: stepName });
      return reason;
    }
  }
  await store.transitionExecution(manager, execution, 'completed', 'recovered');
  const resumable = definition?.step(execution.stepName)?.resumable ?? execution.continuesFromId !== null;
  // Run again as it ran: with its signal, or timed out (a resumable successor finds the mark on its predecessor).
  const rerun = resumable ? successorOf(execution, undefined) : { signalId: execution.signalId ?? null, timedOut: rerunsTimedOut(step, execution) };
  const successor = await store.insertExecution(manager, workflow.id, stepName, rerun);
  await store.updateWorkflow(manager, workflow, { ...store.transitionChanges(workflow, 'ready', atNoStep()), nextStepName: stepName });
  return { executionId: successor.id, hints: jobHints(workflow, successor.stepName), runAt: successor.scheduledFor, jobOptions: jobOptionsFor(definition, definition?.step(stepName)) };
}

function targetOf({ workflow, execution, definition, fanInSignals }: Prepared): OutcomeTarget {
  return { workflow, execution, definition, fanInSignals };
}

/**
 * The execution that retries this one: a resumable step continues from its cursor (or from the
 * start with `rewind`) and keeps its signal; a plain step starts afresh and its gate re-attaches
 * the still-claimed signal, or passes again with none when its wait timed out.
 */
function retryOf(prepared: Prepared, waitMs: number | undefined, rewind = false): NewExecution {
  if (!prepared.step.resumable) return { waitMs, timedOut: rerunsTimedOut(prepared.step, prepared.execution) };
  const successor = successorOf(prepared.execution, waitMs);
  return rewind ? { ...successor, cursor: null } : successor;
}
