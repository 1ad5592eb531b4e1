import type { Duration } from '../util/duration.js';

/**
 * Flow control by rate: at most `limit` executions holding the key start within any `per` window,
 * across every process and host. An execution over the rate is scheduled for the moment its window
 * allows (one delayed job, nothing polls), in arrival order.
 * @publicApi
 */
export interface RateLimitOptions<W = any> {
  /**
   * The key, from the workflow instance (`this.hero`, ids): a non-empty string of at most 255 UTF-8
   * bytes, one namespace with the concurrency keys (a key given to both is limited by both). A key
   * function that throws fails the step under its exception policy.
   */
  key: (workflow: W) => string;
  /** How many starts the window allows: a positive integer. */
  limit: number;
  /** The window: a positive duration (ms or '1m'). */
  per: Duration;
}

/** A step's rate limit, validated: its window in milliseconds. */
export interface StepRateLimit {
  readonly key: (workflow: any) => string;
  readonly limit: number;
  readonly perMs: number;
}
