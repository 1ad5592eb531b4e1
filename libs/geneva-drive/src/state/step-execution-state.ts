import { InvalidTransitionError } from '../errors/invalid-transition.error.js';

/**
 * Step execution states. `scheduled` waits for its time (and holds a queue job), `waiting` is parked
 * until a signal arrives (no job, no timer), `in_progress` runs the body; the rest are terminal.
 * @publicApi
 */
export type StepExecutionState = 'scheduled' | 'waiting' | 'in_progress' | 'completed' | 'failed' | 'canceled' | 'skipped';

/** Why a terminal execution ended the way it did (the audit trail). @publicApi */
export type StepOutcome = 'success' | 'reattempted' | 'skipped' | 'canceled' | 'failed' | 'recovered' | 'continued';

/** At most one execution per workflow is in one of these states (a unique index enforces it). */
export const ACTIVE_EXECUTION_STATES: readonly StepExecutionState[] = ['scheduled', 'waiting', 'in_progress'];

const ALLOWED: Record<StepExecutionState, readonly StepExecutionState[]> = {
  scheduled: ['scheduled', 'waiting', 'in_progress', 'completed', 'failed', 'canceled', 'skipped'],
  // Parked: only a signal (or resume) wakes it, an operator cancels or skips it; it never runs directly.
  waiting: ['scheduled', 'canceled', 'skipped'],
  in_progress: ['in_progress', 'completed', 'failed', 'canceled', 'skipped'],
  completed: [],
  failed: [],
  canceled: [],
  skipped: [],
};

/** The timestamp column each terminal state stamps (besides `finishedAt`). */
export const TERMINAL_TIMESTAMP = {
  completed: 'completedAt',
  failed: 'failedAt',
  canceled: 'canceledAt',
  skipped: 'skippedAt',
} as const;

export function assertExecutionTransition(from: StepExecutionState, to: StepExecutionState): void {
  if (!ALLOWED[from].includes(to)) throw new InvalidTransitionError('step execution', from, to);
}
