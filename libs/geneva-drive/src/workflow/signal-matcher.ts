import type { Signal } from '../entities/signal.entity.js';

/** Anything that decides whether a signal is the one a step waits for. @publicApi */
export interface SignalMatcherLike<W = any> {
  /** The signal name this matcher listens to, when it has one (used to narrow the lookup). */
  readonly signalName?: string;
  /** A human description, used in errors and test-helper messages. */
  describe?(): string;
  matches(signal: Signal<any>, workflow: W): boolean;
  /** False when `matches` ignores the workflow (lets delivery skip loading the hero). @default true */
  readonly needsWorkflow?: boolean;
}

/**
 * Matches signals by name and, optionally, by a predicate over the payload, evaluated on the
 * workflow the signal was sent to (so `wf.hero` is in scope). Plain and reusable: keep one in a
 * constant and share it across steps.
 * @publicApi
 */
export class SignalMatcher<Payload = any, W = any> implements SignalMatcherLike<W> {
  constructor(
    readonly signalName: string,
    private readonly predicate?: (payload: Payload, workflow: W) => boolean,
  ) {
    if (typeof signalName !== 'string' || signalName.length === 0) throw new TypeError('SignalMatcher needs a signal name');
  }

  /** A name-only matcher never looks at the workflow, so delivery need not load the hero for it. */
  get needsWorkflow(): boolean {
    return this.predicate !== undefined;
  }

  describe(): string {
    return this.predicate ? `${this.signalName} (with a payload condition)` : this.signalName;
  }

  matches(signal: Signal<any>, workflow: W): boolean {
    return signal.name === this.signalName && (this.predicate === undefined || Boolean(this.predicate(signal.payload as Payload, workflow)));
  }
}

/** Normalises a `waitFor` option into a matcher. */
export function toSignalMatcher(waitFor: string | SignalMatcherLike): SignalMatcherLike {
  return typeof waitFor === 'string' ? new SignalMatcher(waitFor) : waitFor;
}

export function describeMatcher(matcher: SignalMatcherLike): string {
  return matcher.describe?.() ?? matcher.signalName ?? matcher.constructor?.name ?? 'a custom signal matcher';
}
