import { resolveExceptionPolicy } from '../exception-policy/exception-policy.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { readRunStates, writeCursor } from '../persistence/sql/step-checkpoint.js';
import type { TransactionRunner } from '../persistence/transaction-runner.js';
import { isFlowControl } from '../workflow/flow-control.js';
import { workflowInternals } from '../workflow/geneva-workflow.js';
import { isInterrupt, StepIteration } from '../workflow/step-iteration.js';
import { eventBase, type BodyResult, type Prepared } from './step-run.js';
import type { StepOutputs } from './child-start.js';

/**
 * Phase 2 of a step execution: the body runs with no lock held, between the workflow's hooks, and
 * ends as a {@link BodyResult} — completed, a flow-control intent, or an exception with the policy
 * that applies to it. A resumable step's checkpoints write its cursor as it goes (StepIteration).
 */
export class StepBody {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly options: ResolvedGenevaDriveOptions,
    /** Whether the application is shutting down (resumable steps then stop at their next checkpoint). */
    private readonly shuttingDown: () => boolean,
    /** Fresh outputs (children, a result) for a run of a body (ChildStart). */
    private readonly outputs: () => StepOutputs,
  ) {}

  /** `persist`: how a resumable step's checkpoints write the cursor, when not by one UPDATE of their own (a transactional step's). */
  async run(prepared: Prepared, persist?: (encodedCursor: string) => Promise<void>): Promise<BodyResult> {
    const { instance, step, execution, logger } = prepared;
    const started = performance.now();
    const iteration = step.resumable ? this.iterationFor(prepared, persist) : undefined;
    let thrown: { error: unknown } | undefined;
    // The body's own time, apart from the hooks around it (the step event reports both).
    let bodyMs = 0;
    // A run again (a transactional body after a deadlock) hands over afresh.
    const outputs = (prepared.outputs = this.outputs());
    workflowInternals.rebind(instance, { outputs });
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
    // Only the body hands over: an exception handler run later does not.
    workflowInternals.rebind(instance, { outputs: undefined });
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
      ...eventBase(prepared, started),
      durationMs: bodyMs,
      hooksDurationMs: performance.now() - started - bodyMs,
      outcome: result.kind === 'flow' ? result.intent.kind : result.kind,
      ...(result.kind === 'exception' ? { exception: result.error } : {}),
      ...(instance.timedOut ? { timedOut: true } : {}), // [deadline hook]
      ...(step.transactional ? { transactional: true } : {}),
    }));
    return result;
  }

  /** The iteration object of a resumable step: checkpoints write the cursor with one UPDATE, no lock. */
  private iterationFor(prepared: Prepared, persist?: (encodedCursor: string) => Promise<void>): StepIteration {
    const { execution, step, run } = prepared;
    const manager = this.transactions.dataSource.manager;
    return new StepIteration(execution.cursor ?? null, execution.continuesFromId !== null, {
      // Only while the row is still ours (see writeCursor).
      persist: persist ?? ((encoded) => writeCursor(manager, execution.id, encoded)),
      shouldStop: async () => {
        if (this.shuttingDown()) return true;
        // Stop when the workflow was paused or canceled behind our back, or when this execution is no
        // longer in progress (recovered from a stalled worker: its successor may be performing now).
        const row = await readRunStates(manager, execution.id);
        return row?.workflowState !== 'performing' || row?.executionState !== 'in_progress';
      },
      maxCursorSize: this.options.maxCursorSize,
      maxIterations: run.maxIterations ?? step.maxIterations,
      maxRuntimeMs: step.maxRuntimeMs,
      interruptible: run.interruptible !== false,
    });
  }
}
