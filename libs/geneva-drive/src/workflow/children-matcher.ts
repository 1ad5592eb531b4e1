import type { Signal } from '../entities/signal.entity.js';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import type { SignalMatcherLike } from './signal-matcher.js';

/**
 * The name of the signal the engine delivers to a parent when one of its children ends (finished or
 * canceled), in the transaction of the child's end, with the child's id as its idempotency key.
 * @publicApi
 */
export const CHILD_FINISHED = 'child_finished';

/** How a child ended. @publicApi */
export type ChildEndState = 'finished' | 'canceled';

/** The payload of a {@link CHILD_FINISHED} signal. @publicApi */
export interface ChildFinishedPayload<Result = unknown> {
  childId: string;
  /** The child's workflow type name (`@Workflow({ name })`, default its class name). */
  workflowClass: string;
  /** The child's key among the children of the step that started it. */
  key: string;
  state: ChildEndState;
  /** What the child stored with `this.setResult(value)`, or null. */
  result: Result | null;
}

/** A child that ended, as a fan-in step's body sees it in `this.children`. @publicApi */
export interface ChildWorkflow<Result = unknown> {
  id: string;
  workflowClass: string;
  key: string;
  state: ChildEndState;
  result: Result | null;
}

/** How many of the children must have ended: all of them, any one, or at least `n`. @publicApi */
export type ChildrenCount = 'all' | 'any' | number;

/** Options of {@link childrenOf}. @publicApi */
export interface ChildrenOfOptions {
  /** @default 'all' */
  count?: ChildrenCount;
}

/**
 * The fan-in gate of `@Step({ waitFor: childrenOf('fanOut') })`: the step waits until `count` of the
 * children started by the step `fanOut` of the same workflow have ended. Unlike a name matcher it
 * does not decide on one signal: the gate (execution/fan-in.ts) counts the step's ended children
 * under the workflow lock, and a {@link CHILD_FINISHED} signal only makes it count again.
 * @publicApi
 */
export class ChildrenMatcher implements SignalMatcherLike {
  readonly signalName = CHILD_FINISHED;
  readonly needsWorkflow = false;

  constructor(
    readonly stepName: string,
    readonly count: ChildrenCount,
  ) {}

  describe(): string {
    return `${CHILD_FINISHED} of the children of ${this.stepName} (${this.count})`;
  }

  matches(signal: Signal<any>): boolean {
    return signal.name === CHILD_FINISHED;
  }

  /** How many ended children open the gate when the step started `started`: fewer started than `n` means all of them. */
  needed(started: number): number {
    if (this.count === 'all') return started;
    return Math.min(this.count === 'any' ? 1 : this.count, started);
  }
}

/**
 * `waitFor: childrenOf('fanOut', { count })`: wait for the children started by step `fanOut` —
 * all of them (default), `'any'` one, or at least `n` (all, when fewer were started). The body sees
 * the children that have ended in `this.children`. `InvalidOptionError` for a bad argument.
 * @publicApi
 */
export function childrenOf(stepName: string, options: ChildrenOfOptions = {}): ChildrenMatcher {
  if (typeof stepName !== 'string' || stepName.trim() === '') {
    throw new InvalidOptionError('childrenOf', 'stepName', `the step that starts the children must be named, got ${JSON.stringify(stepName) ?? String(stepName)}`);
  }
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('childrenOf', 'options', 'the options must be an object');
  const unknown = Object.keys(options).filter((key) => key !== 'count');
  if (unknown.length > 0) throw new InvalidOptionError('childrenOf', unknown[0], `unknown option "${unknown[0]}" (the options are count)`);
  const count = options.count ?? 'all';
  if (count !== 'all' && count !== 'any' && !(Number.isSafeInteger(count) && count > 0)) {
    throw new InvalidOptionError('childrenOf', 'count', `count must be 'all', 'any' or a positive integer, got ${JSON.stringify(count) ?? String(count)}`);
  }
  return new ChildrenMatcher(stepName, count);
}

/** Whether a step's `waitFor` is a fan-in gate. */
export function isChildrenMatcher(matcher: SignalMatcherLike | undefined): matcher is ChildrenMatcher {
  return matcher instanceof ChildrenMatcher;
}
