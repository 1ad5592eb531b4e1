import { parseDuration, type Duration } from '../util/duration.js';

/**
 * How long to wait before a reattempt caused by an exception. Attempt numbers start at 1 for the
 * first reattempt and count consecutive error-driven reattempts of the step.
 * @publicApi
 */
export type Backoff =
  | { strategy: 'constant'; delay: Duration; jitter?: number }
  | { strategy: 'linear'; delay: Duration; max?: Duration; jitter?: number }
  | { strategy: 'exponential'; delay: Duration; factor?: number; max?: Duration; jitter?: number };

export type ReattemptWait = Duration | Backoff | ((attempt: number) => Duration);

/** Validates a wait at definition time; returns a problem description or undefined. */
export function describeInvalidWait(wait: unknown): string | undefined {
  if (wait === undefined || typeof wait === 'function') return undefined;
  if (parseDuration(wait) !== undefined) return undefined;
  if (typeof wait === 'object' && wait !== null && 'strategy' in wait) {
    const backoff = wait as Backoff;
    if (!['constant', 'linear', 'exponential'].includes(backoff.strategy)) return `unknown backoff strategy "${String(backoff.strategy)}"`;
    if (parseDuration(backoff.delay) === undefined) return 'backoff delay must be a duration';
    if ('max' in backoff && backoff.max !== undefined && parseDuration(backoff.max) === undefined) return 'backoff max must be a duration';
    if (backoff.jitter !== undefined && !(backoff.jitter >= 0 && backoff.jitter <= 1)) return 'backoff jitter must be between 0 and 1';
    if (backoff.strategy === 'exponential' && backoff.factor !== undefined && !(backoff.factor >= 1)) return 'exponential factor must be >= 1';
    return undefined;
  }
  return `wait must be a duration, a backoff or a function of the attempt number, got ${JSON.stringify(wait)}`;
}

/**
 * The longest delay a growing backoff (linear or exponential without `max`, or a function) yields:
 * one year. Without a ceiling an exponential delay overflows the date range after a few dozen
 * attempts, and the reattempt could not be scheduled at all.
 */
export const MAX_BACKOFF_MS = 365 * 24 * 3_600_000;

/** Milliseconds to wait before reattempt number `attempt` (>= 1). Jitter only ever adds. */
export function backoffDelay(wait: ReattemptWait | undefined, attempt: number, random: () => number = Math.random): number | undefined {
  if (wait === undefined) return undefined;
  if (typeof wait === 'function') return Math.min(parseDuration(wait(attempt)) ?? 0, MAX_BACKOFF_MS);
  const fixed = parseDuration(wait);
  if (fixed !== undefined) return fixed;
  const backoff = wait as Backoff;
  const base = parseDuration(backoff.delay) ?? 0;
  let delay: number;
  switch (backoff.strategy) {
    case 'constant':
      delay = base;
      break;
    case 'linear':
      delay = base * attempt;
      break;
    case 'exponential':
      delay = base * Math.pow(backoff.factor ?? 2, attempt - 1);
      break;
  }
  const max = 'max' in backoff && backoff.max !== undefined ? parseDuration(backoff.max) : undefined;
  if (backoff.strategy !== 'constant') delay = Math.min(delay, max ?? MAX_BACKOFF_MS);
  const jitter = backoff.jitter ?? 0;
  return Math.round(delay + (jitter > 0 ? random() * delay * jitter : 0));
}
