/**
 * A duration: milliseconds as a number, or a string like `'30s' '15m' '2h' '3d' '1w'` (also `'500ms'`).
 * @publicApi
 */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd' | 'w'}`;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)$/;

/** Milliseconds of a duration, or `undefined` when the value is not a valid non-negative duration. */
export function parseDuration(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (typeof value !== 'string') return undefined;
  const match = PATTERN.exec(value.trim());
  if (!match) return undefined;
  return Math.round(Number(match[1]) * UNIT_MS[match[2]]);
}
