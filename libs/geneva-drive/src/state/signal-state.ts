import { InvalidTransitionError } from '../errors/invalid-transition.error.js';

/**
 * Signal states; a signal never moves backwards. `pending`: buffered, no execution attached yet;
 * `claimed`: at least one execution attached it (the `claimed` counter says how many); `consumed`:
 * every chain that attached it resolved cleanly. @publicApi
 */
export type SignalState = 'pending' | 'claimed' | 'consumed';

export const PENDING: SignalState = 'pending';
export const CLAIMED: SignalState = 'claimed';
export const CONSUMED: SignalState = 'consumed';

/**
 * The one table of transitions. A claim moves `pending → claimed` (a second claim stays `claimed`,
 * counting); the finalize that settles the last attached chain moves `claimed → consumed` in SQL
 * (persistence/sql/hot-path-sql.ts, `consumptionStatement`), with these same names.
 */
const ALLOWED: Record<SignalState, readonly SignalState[]> = {
  pending: ['claimed'],
  claimed: ['claimed', 'consumed'],
  consumed: [],
};

export function assertSignalTransition(from: SignalState, to: SignalState): void {
  if (!ALLOWED[from].includes(to)) throw new InvalidTransitionError('signal', from, to);
}
