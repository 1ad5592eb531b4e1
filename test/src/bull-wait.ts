/**
 * Bounded waiting for the queue specs (Bull, local, multi-process), where nothing is driven by hand
 * and the test can only watch the database or Redis until the engine gets there by itself.
 */

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface WaitOptions {
  /** Give up after this long. @default 15000 */
  timeoutMs?: number;
  /** Pause between probes. @default 50 */
  intervalMs?: number;
}

/**
 * Calls `probe` until it returns something other than `undefined`, `null` or `false`, and returns
 * that. Throws after `timeoutMs`, naming `what` and the last value seen (or the last error thrown).
 */
export async function waitUntil<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: WaitOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const intervalMs = options.intervalMs ?? 50;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      const shown = last instanceof Error ? `${last.name}: ${last.message}` : safeJson(last);
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what} (last probe: ${shown})`);
    }
    await sleep(intervalMs);
  }
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Removes the waiting and delayed jobs of a Bull queue, job hashes included (`queue.empty()` drops
 * the delayed set but leaves the delayed jobs' hashes behind in Redis).
 */
export async function removePendingJobs(queue: { clean(grace: number, status: 'wait' | 'delayed'): Promise<unknown> }): Promise<void> {
  await queue.clean(0, 'delayed');
  await queue.clean(0, 'wait');
}
