import { channel, tracingChannel, type TracingChannel } from 'node:diagnostics_channel';

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

/**
 * Tracing channels (`diagnostics_channel.tracingChannel(name)`) around the calls that create step
 * jobs: `start` carries a {@link StartCall}, `signal` a {@link SignalCall}; `asyncEnd` adds the
 * call's `result` (the WorkflowRecord, the Signal) or its `error`. Bind a store to `start` to make a
 * context current for the call: the jobs it creates carry it (see JobContextPropagator).
 * @publicApi
 */
export const GENEVA_DRIVE_TRACING_CHANNELS = {
  start: 'geneva-drive:start',
  signal: 'geneva-drive:signal',
} as const;

/** The context object of a `WorkflowService.start` call on its tracing channel. @publicApi */
export interface StartCall {
  workflowClass: string;
}

/** The context object of a `SignalService.signal` call on its tracing channel. @publicApi */
export interface SignalCall {
  /** As given by the caller. */
  workflowId: string;
  name: string;
}

/** Common keys of the execution events. @publicApi */
export interface ExecutionEvent {
  executionId: string;
  workflowId: string;
  workflowClass: string;
  stepName: string;
  durationMs: number;
}

/** `geneva-drive:precondition`: cancelIf / skipIf / the signal gate / flow control were evaluated. @publicApi */
export interface PreconditionEvent extends ExecutionEvent {
  /** `waiting`: parked for a signal; `throttled`: waiting for a concurrency key's slot or a rate limit's window. */
  outcome: 'passed' | 'canceled' | 'skipped' | 'waiting' | 'throttled' | 'exception';
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
  /** Present (true) for a transactional step: its writes through `this.manager` commit with its outcome. */
  transactional?: true;
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
  /** The workflow's class, once it was found. */
  workflowClass?: string;
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

/** The context object of each traced call. */
interface TracedCalls {
  start: StartCall;
  signal: SignalCall;
}

const tracing: { [Name in keyof TracedCalls]: TracingChannel<unknown, TracedCalls[Name]> } = {
  start: tracingChannel(GENEVA_DRIVE_TRACING_CHANNELS.start),
  signal: tracingChannel(GENEVA_DRIVE_TRACING_CHANNELS.signal),
};

/** Runs `call` on its tracing channel when anyone listens (no allocation otherwise). */
export function traced<T, Name extends keyof TracedCalls>(name: Name, build: () => TracedCalls[Name], call: () => Promise<T>): Promise<T> {
  // `hasSubscribers` is there from Node 20.13 on, though not in @types/node 20's declarations.
  const target = tracing[name] as TracingChannel<unknown, TracedCalls[Name]> & { hasSubscribers: boolean };
  return target.hasSubscribers ? target.tracePromise(call, build()) : call();
}
