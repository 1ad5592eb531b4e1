import { InvalidTransitionError } from '../errors/invalid-transition.error.js';

/** Workflow states. `ready`, `performing` and `paused` are ongoing; the other two are terminal. @publicApi */
export type WorkflowState = 'ready' | 'performing' | 'paused' | 'finished' | 'canceled';

/** Every workflow state, in the order of its life. */
export const WORKFLOW_STATES: readonly WorkflowState[] = ['ready', 'performing', 'paused', 'finished', 'canceled'];

export const ONGOING_WORKFLOW_STATES: readonly WorkflowState[] = ['ready', 'performing', 'paused'];

/** The states in which a workflow's steps run: ongoing and not paused. */
export const RUNNABLE_WORKFLOW_STATES: readonly WorkflowState[] = ['ready', 'performing'];

export function isRunnable(state: WorkflowState): boolean {
  return RUNNABLE_WORKFLOW_STATES.includes(state);
}

/** States that stamp `transitionedAt` when entered (they stop the workflow, for a while or for good). */
export const STOPPED_WORKFLOW_STATES: readonly WorkflowState[] = ['paused', 'finished', 'canceled'];

/**
 * The one table of transitions the engine may make. Operator actions check their own preconditions
 * (and throw `InvalidStateError`) before they reach this table.
 */
const ALLOWED: Record<WorkflowState, readonly WorkflowState[]> = {
  ready: ['ready', 'performing', 'paused', 'finished', 'canceled'],
  performing: ['ready', 'performing', 'paused', 'finished', 'canceled'],
  paused: ['paused', 'ready', 'finished', 'canceled'],
  finished: [],
  canceled: [],
};

export function assertWorkflowTransition(from: WorkflowState, to: WorkflowState): void {
  if (!ALLOWED[from].includes(to)) throw new InvalidTransitionError('workflow', from, to);
}
