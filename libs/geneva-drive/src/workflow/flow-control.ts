/**
 * Flow control from inside a step: `this.cancel()`, `pause()`, `skip()`, `reattempt()`, `finished()`.
 * The call records its intent on the running workflow instance and then throws a marker to unwind
 * the step body. Recording first is what makes the call effective even when user code wraps it in a
 * `try/catch` that swallows the marker: the executor reads the recorded intent, not the exception.
 */
export type FlowControlIntent =
  | { kind: 'cancel' }
  | { kind: 'pause' }
  | { kind: 'skip' }
  | { kind: 'finished' }
  | { kind: 'reattempt'; waitMs: number | undefined; rewind?: boolean }
  /** A resumable step stops at a checkpoint and continues in a successor (never thrown by user code). */
  | { kind: 'continue'; waitMs: number | undefined };

export type FlowControlKind = FlowControlIntent['kind'];

const FLOW_CONTROL = Symbol.for('geneva-drive:flow-control');

/**
 * Thrown by flow-control calls to unwind a step. Not an error: generic `catch` blocks in step code
 * should re-throw it (`if (isFlowControl(e)) throw e`), though the intent holds even if they do not.
 * @publicApi
 */
export class FlowControlSignal {
  readonly [FLOW_CONTROL] = true;
  constructor(readonly intent: FlowControlIntent) {}

  toString(): string {
    return `FlowControlSignal(${this.intent.kind})`;
  }
}

/** True for the marker thrown by flow-control calls. @publicApi */
export function isFlowControl(value: unknown): value is FlowControlSignal {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[FLOW_CONTROL] === true;
}
