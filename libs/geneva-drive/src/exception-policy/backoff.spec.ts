/**
 * Backoff for exception-policy reattempts (upstream retry-policy backoff_strategies_test.rb, adapted
 * to this port's strategies: constant, linear and exponential with max and jitter, or a function of
 * the attempt number). Jitter is tested with an injected random source.
 */
import { describe, expect, it } from '@jest/globals';
import { backoffDelay, describeInvalidWait, MAX_BACKOFF_MS, type Backoff } from './backoff.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const sequence = (wait: Parameters<typeof backoffDelay>[0], attempts: number, random?: () => number) =>
  Array.from({ length: attempts }, (_, i) => backoffDelay(wait, i + 1, random));

describe('backoffDelay: fixed waits', () => {
  it('no wait resolves to no delay', () => {
    expect(backoffDelay(undefined, 1)).toBeUndefined();
    expect(backoffDelay(undefined, 7)).toBeUndefined();
  });

  it('a number of milliseconds is returned unchanged for every attempt', () => {
    expect(sequence(1500, 3)).toEqual([1500, 1500, 1500]);
    expect(backoffDelay(0, 4)).toBe(0);
  });

  it('a duration string is converted and the same for every attempt', () => {
    expect(sequence('30s', 3)).toEqual([30 * SECOND, 30 * SECOND, 30 * SECOND]);
    expect(backoffDelay('2h', 9)).toBe(2 * 60 * MINUTE);
  });
});

describe('backoffDelay: a function of the attempt number', () => {
  it('receives the attempt number (2^n seconds: 2 s, 4 s, 8 s)', () => {
    const seen: number[] = [];
    const wait = (attempt: number) => (seen.push(attempt), 2 ** attempt * SECOND);
    expect(sequence(wait, 3)).toEqual([2 * SECOND, 4 * SECOND, 8 * SECOND]);
    expect(seen).toEqual([1, 2, 3]);
  });

  it('may return a duration string', () => {
    expect(sequence((attempt) => (attempt === 1 ? '1m' : '1h'), 2)).toEqual([MINUTE, 60 * MINUTE]);
  });

  it('a result that is not a duration falls back to an immediate reattempt instead of failing the finalization', () => {
    expect(backoffDelay(() => -5, 1)).toBe(0);
    expect(backoffDelay(() => 'soon' as never, 1)).toBe(0);
  });

  it('is never jittered: the random source is not consulted', () => {
    let calls = 0;
    expect(backoffDelay(() => 5 * SECOND, 2, () => (calls++, 0.9))).toBe(5 * SECOND);
    expect(calls).toBe(0);
  });
});

describe('backoffDelay: strategies without jitter', () => {
  it('constant: the delay for every attempt', () => {
    expect(sequence({ strategy: 'constant', delay: '45s' }, 4)).toEqual([45 * SECOND, 45 * SECOND, 45 * SECOND, 45 * SECOND]);
  });

  it('linear: delay × attempt', () => {
    expect(sequence({ strategy: 'linear', delay: '10s' }, 4)).toEqual([10, 20, 30, 40].map((s) => s * SECOND));
  });

  it('linear with max: capped', () => {
    expect(sequence({ strategy: 'linear', delay: '5m', max: '12m' }, 4)).toEqual([5 * MINUTE, 10 * MINUTE, 12 * MINUTE, 12 * MINUTE]);
  });

  it('exponential: delay × 2^(attempt − 1) by default', () => {
    expect(sequence({ strategy: 'exponential', delay: '30s' }, 5)).toEqual([30, 60, 120, 240, 480].map((s) => s * SECOND));
  });

  it('exponential with a factor', () => {
    expect(sequence({ strategy: 'exponential', delay: 1000, factor: 3 }, 4)).toEqual([1000, 3000, 9000, 27000]);
    expect(sequence({ strategy: 'exponential', delay: 1000, factor: 1 }, 3)).toEqual([1000, 1000, 1000]);
  });

  it('exponential with max: capped, also for attempts far beyond the cap (no overflow)', () => {
    const wait: Backoff = { strategy: 'exponential', delay: '30s', max: '1h' };
    expect(sequence(wait, 9)).toEqual([30, 60, 120, 240, 480, 960, 1920, 3600, 3600].map((s) => s * SECOND));
    expect(backoffDelay(wait, 5000)).toBe(3600 * SECOND);
  });

  it('without max, growth stops at the one-year ceiling, so a late reattempt can still be scheduled', () => {
    expect(MAX_BACKOFF_MS).toBe(365 * 24 * 3_600_000);
    const exponential = backoffDelay({ strategy: 'exponential', delay: '1s' }, 60)!;
    const linear = backoffDelay({ strategy: 'linear', delay: '30d' }, 100)!;
    const fn = backoffDelay((attempt) => 2 ** attempt * SECOND, 80)!;
    for (const delay of [exponential, linear, fn]) {
      expect(delay).toBe(MAX_BACKOFF_MS);
      expect(Number.isNaN(new Date(Date.now() + delay).getTime())).toBe(false);
    }
    // Below the ceiling nothing changes, and an explicit max above it is honoured.
    expect(backoffDelay({ strategy: 'exponential', delay: '1s' }, 20)).toBe(2 ** 19 * SECOND);
    expect(backoffDelay({ strategy: 'linear', delay: '200d', max: '400d' }, 3)).toBe(400 * 24 * 3_600_000);
    // A constant delay is the user's explicit choice and is not capped.
    expect(backoffDelay({ strategy: 'constant', delay: '400d' }, 3)).toBe(400 * 24 * 3_600_000);
  });

  it('jitter 0 (or absent) never consults the random source', () => {
    let calls = 0;
    const random = () => (calls++, 0.5);
    expect(backoffDelay({ strategy: 'linear', delay: '10s', jitter: 0 }, 3, random)).toBe(30 * SECOND);
    expect(backoffDelay({ strategy: 'linear', delay: '10s' }, 3, random)).toBe(30 * SECOND);
    expect(calls).toBe(0);
  });
});

describe('backoffDelay: jitter', () => {
  const linear: Backoff = { strategy: 'linear', delay: '10s', jitter: 0.2 };

  it('adds random × delay × jitter, rounded to a millisecond', () => {
    expect(sequence(linear, 3, () => 0.5)).toEqual([11_000, 22_000, 33_000]);
    expect(backoffDelay(linear, 1, () => 0.123456)).toBe(Math.round(10_000 + 0.123456 * 10_000 * 0.2));
  });

  it('random 0 gives the base delay; random just below 1 stays below delay × (1 + jitter)', () => {
    expect(sequence(linear, 3, () => 0)).toEqual([10_000, 20_000, 30_000]);
    const highest = sequence(linear, 3, () => 0.999999);
    highest.forEach((delay, i) => {
      const base = (i + 1) * 10_000;
      expect(delay).toBeGreaterThan(base);
      expect(delay).toBeLessThanOrEqual(base * 1.2);
    });
  });

  it('only ever adds: over many random draws the delay stays within [base, base × (1 + jitter)]', () => {
    let seed = 42;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646; // Park–Miller, deterministic
    const wait: Backoff = { strategy: 'exponential', delay: '1s', jitter: 0.5 };
    for (let attempt = 1; attempt <= 6; attempt++) {
      const base = 2 ** (attempt - 1) * SECOND;
      for (let draw = 0; draw < 200; draw++) {
        const delay = backoffDelay(wait, attempt, random)!;
        expect(delay).toBeGreaterThanOrEqual(base);
        expect(delay).toBeLessThanOrEqual(base * 1.5);
      }
    }
  });

  it('the jitter applies to the capped delay: at most max × (1 + jitter)', () => {
    const wait: Backoff = { strategy: 'exponential', delay: '1m', max: '4m', jitter: 0.25 };
    expect(sequence(wait, 5, () => 0)).toEqual([1, 2, 4, 4, 4].map((m) => m * MINUTE));
    expect(sequence(wait, 5, () => 0.5)).toEqual([1.125, 2.25, 4.5, 4.5, 4.5].map((m) => m * MINUTE));
  });

  it('constant with jitter', () => {
    expect(sequence({ strategy: 'constant', delay: '1m', jitter: 1 }, 2, () => 0.25)).toEqual([75 * SECOND, 75 * SECOND]);
  });

  it('uses Math.random when no source is injected, within the same bounds', () => {
    for (let i = 0; i < 50; i++) {
      const delay = backoffDelay({ strategy: 'constant', delay: 1000, jitter: 0.15 }, 3)!;
      expect(delay).toBeGreaterThanOrEqual(1000);
      expect(delay).toBeLessThanOrEqual(1150);
    }
  });
});

describe('describeInvalidWait', () => {
  it.each([
    ['undefined', undefined],
    ['zero', 0],
    ['a number', 2500],
    ['a duration string', '15m'],
    ['a function', () => 1],
    ['a constant backoff', { strategy: 'constant', delay: '1s' }],
    ['a linear backoff with max and jitter', { strategy: 'linear', delay: 500, max: '1h', jitter: 1 }],
    ['an exponential backoff with factor 1', { strategy: 'exponential', delay: '1s', factor: 1, jitter: 0 }],
  ])('accepts %s', (_what, wait) => {
    expect(describeInvalidWait(wait)).toBeUndefined();
  });

  it.each([
    ['an unknown strategy', { strategy: 'fibonacci', delay: '1s' }, 'unknown backoff strategy "fibonacci"'],
    ['a missing delay', { strategy: 'constant' }, 'backoff delay must be a duration'],
    ['a negative delay', { strategy: 'linear', delay: -1 }, 'backoff delay must be a duration'],
    ['a bad max', { strategy: 'exponential', delay: '1s', max: 'forever' }, 'backoff max must be a duration'],
    ['jitter above 1', { strategy: 'constant', delay: '1s', jitter: 2 }, 'backoff jitter must be between 0 and 1'],
    ['jitter that is not a number', { strategy: 'constant', delay: '1s', jitter: 'lots' }, 'backoff jitter must be between 0 and 1'],
    ['a factor below 1', { strategy: 'exponential', delay: '1s', factor: 0 }, 'exponential factor must be >= 1'],
    ['null', null, 'wait must be a duration, a backoff or a function of the attempt number, got null'],
    ['a boolean', true, 'wait must be a duration, a backoff or a function of the attempt number, got true'],
    ['an arbitrary object', { seconds: 5 }, 'wait must be a duration, a backoff or a function of the attempt number, got {"seconds":5}'],
  ])('refuses %s', (_what, wait, problem) => {
    expect(describeInvalidWait(wait)).toBe(problem);
  });
});
