import { channel } from 'node:diagnostics_channel';

/**
 * Events on `node:diagnostics_channel`, for metrics and tracing without coupling. Subscribe with
 * `diagnostics_channel.subscribe('geneva-drive:step', (event) => ...)`.
 * @publicApi
 */
export const GENEVA_DRIVE_CHANNELS = {
  precondition: 'geneva-drive:precondition',
  step: 'geneva-drive:step',
  finalize: 'geneva-drive:finalize',
  signal: 'geneva-drive:signal',
  housekeeping: 'geneva-drive:housekeeping',
} as const;

/** Common keys of the execution events. @publicApi */
export interface ExecutionEvent {
  executionId: string;
  workflowId: string;
  workflowClass: string;
  stepName: string;
  durationMs: number;
}

/** `geneva-drive:precondition`: cancelIf / skipIf / the signal gate were evaluated. @publicApi */
export interface PreconditionEvent extends ExecutionEvent {
  outcome: 'passed' | 'canceled' | 'skipped' | 'waiting' | 'exception';
  exception?: unknown;
  /** When the execution was due: the queue delay runs from it to the start of this phase. */
  scheduledFor: Date;
  /**
   * The execution had parked and a delivery woke it (a signal, or `resume` with a buffered one):
   * `scheduledFor` is then the moment of that wake-up.
   */
  woken: boolean;
}

/** The keys of a `PreconditionEvent` that tell when the execution was due and whether a delivery woke it. */
export function dueKeys(execution: { scheduledFor: Date; waitingSince?: Date | null; signalId?: string | null }): Pick<PreconditionEvent, 'scheduledFor' | 'woken'> {
  // Only a delivery takes a parked execution back to `scheduled` with a signal pinned; a parked row keeps its waitingSince.
  return { scheduledFor: execution.scheduledFor, woken: Boolean(execution.waitingSince) && Boolean(execution.signalId) };
}

/**
 * `geneva-drive:step`: the step body ran. `durationMs` is the body's own time; `hooksDurationMs` the
 * time spent in `beforeStepExecution`, `aroundStepExecution` (outside the body) and `afterStepExecution`.
 * @publicApi
 */
export interface StepEvent extends ExecutionEvent {
  hooksDurationMs: number;
  /** `continue`: a resumable step stopped at a checkpoint and continues in a successor. */
  outcome: 'completed' | 'cancel' | 'pause' | 'reattempt' | 'skip' | 'finished' | 'continue' | 'exception';
  exception?: unknown;
  /** Present (true) when the body ran because its wait timed out (`onTimeout: 'run'`). */
  timedOut?: true;
}

/** `geneva-drive:finalize`: the outcome was committed (states are absent when it was discarded). @publicApi */
export interface FinalizeEvent extends ExecutionEvent {
  workflowState?: string;
  stepState?: string;
  exception?: unknown;
}

/** `geneva-drive:signal`: one delivery, or one the workflow refused. @publicApi */
export interface SignalEvent {
  workflowId: string;
  /** Null when the signal was rejected (nothing was written). */
  signalId: string | null;
  name: string;
  duplicate: boolean;
  /** Parked executions this delivery woke. */
  woken: number;
  /**
   * `woke`: it woke a parked step; `buffered`: stored for a step that has not parked yet (or a paused
   * workflow); `duplicate`: a redelivery of a known idempotency key; `rejected`: the workflow is
   * finished or canceled (`WorkflowNotOngoingError`).
   */
  disposition: 'woke' | 'buffered' | 'duplicate' | 'rejected';
}

/** The disposition of a committed delivery. */
export function deliveryDisposition(duplicate: boolean, woken: number): SignalEvent['disposition'] {
  return duplicate ? 'duplicate' : woken > 0 ? 'woke' : 'buffered';
}

/**
 * Also on `geneva-drive:signal`: a parked step's `timeout` passed with no matching signal (told
 * apart from a delivery by `timedOut`). `onTimeout` says what followed.
 * @publicApi
 */
export interface SignalTimeoutEvent {
  timedOut: true;
  workflowId: string;
  executionId: string;
  stepName: string;
  onTimeout: 'run' | 'skip' | 'cancel' | 'pause';
}

const channels = {
  precondition: channel(GENEVA_DRIVE_CHANNELS.precondition),
  step: channel(GENEVA_DRIVE_CHANNELS.step),
  finalize: channel(GENEVA_DRIVE_CHANNELS.finalize),
  signal: channel(GENEVA_DRIVE_CHANNELS.signal),
  housekeeping: channel(GENEVA_DRIVE_CHANNELS.housekeeping),
};

/** Publishes an event when anyone listens (no allocation otherwise). */
export function publish(name: keyof typeof channels, build: () => object): void {
  const target = channels[name];
  if (target.hasSubscribers) target.publish(build());
}
