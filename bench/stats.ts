/** Small helpers: percentiles, a seeded random generator, bounded waits, a text table. */

export interface Summary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles of `samples` (milliseconds). */
export function summarize(samples: number[]): Summary {
  if (samples.length === 0) throw new Error('bench: no samples to summarize');
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = (p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  return {
    count: sorted.length,
    min: sorted[0],
    p50: rank(50),
    p90: rank(90),
    p99: rank(99),
    max: sorted[sorted.length - 1],
    mean: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
  };
}

export function median(samples: number[]): number {
  return summarize(samples).p50;
}

/** mulberry32: reproducible picks for a given --seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Polls `check` every `intervalMs` until it returns true; throws after `timeoutMs` with `describe()`. */
export async function waitUntil(
  check: () => Promise<boolean>,
  options: { timeoutMs: number; intervalMs?: number; describe: () => Promise<string> | string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`bench: gave up after ${options.timeoutMs} ms: ${await options.describe()}`);
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 20));
  }
}

/** Runs `work` for every item with at most `limit` in flight. */
export async function forEachLimited<T>(items: T[], limit: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      await work(items[index], index);
    }
  });
  await Promise.all(lanes);
}

export function ms(value: number): string {
  return value >= 100 ? `${value.toFixed(0)} ms` : value >= 10 ? `${value.toFixed(1)} ms` : `${value.toFixed(2)} ms`;
}

/** A plain left-aligned table. */
export function table(rows: string[][]): string {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length)));
  const line = (row: string[]) => row.map((cell, column) => (cell ?? '').padEnd(widths[column])).join('  ').trimEnd();
  return [line(rows[0]), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.slice(1).map(line)].join('\n');
}
