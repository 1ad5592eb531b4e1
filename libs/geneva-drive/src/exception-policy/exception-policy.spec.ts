/**
 * ExceptionPolicy construction, validation and matching, and the precedence of
 * resolveExceptionPolicy (upstream exception_policy_test.rb and the resolver half of
 * class_level_on_exception_test.rb, adapted to the TypeScript names).
 */
import { describe, expect, it } from '@jest/globals';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { DEFAULT_MAX_REATTEMPTS, EXCEPTION_ACTIONS, ExceptionPolicy, PAUSE_POLICY, resolveExceptionPolicy, type ExceptionAction } from './exception-policy.js';

class TransientError extends Error {}
class RateLimitedError extends TransientError {}
class FatalError extends Error {}
class NotAnError {}

const construct = (...args: ConstructorParameters<typeof ExceptionPolicy>) => () => new ExceptionPolicy(...args);
const problemOf = (build: () => unknown): string => {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(StepConfigurationError);
    return (error as StepConfigurationError).problem;
  }
  throw new Error('expected the construction to throw');
};

describe('ExceptionPolicy: declarative construction', () => {
  it("new ExceptionPolicy('reattempt'): declarative, no wait, no handler, no matchers, maxReattempts 100", () => {
    const policy = new ExceptionPolicy('reattempt');
    expect(policy.action).toBe('reattempt');
    expect(policy.isImperative).toBe(false);
    expect(policy.handler).toBeUndefined();
    expect(policy.wait).toBeUndefined();
    expect(policy.maxReattempts).toBe(DEFAULT_MAX_REATTEMPTS);
    expect(DEFAULT_MAX_REATTEMPTS).toBe(100);
    expect(policy.terminalAction).toBe('pause');
    expect(policy.matchers).toEqual([]);
  });

  it('stores wait and maxReattempts', () => {
    const policy = new ExceptionPolicy('reattempt', { wait: '15s', maxReattempts: 5 });
    expect(policy.wait).toBe('15s');
    expect(policy.maxReattempts).toBe(5);
    expect(policy.reattemptDelay(1)).toBe(15_000);
  });

  it('maxReattempts: null means unlimited (and is not replaced by the default)', () => {
    expect(new ExceptionPolicy('reattempt', { maxReattempts: null }).maxReattempts).toBeNull();
  });

  it.each(['pause', 'cancel', 'skip'] as const)("'%s' has no reattempt limit", (action) => {
    expect(new ExceptionPolicy(action).maxReattempts).toBeNull();
  });

  it('every one of the four actions can be constructed', () => {
    expect(EXCEPTION_ACTIONS.map((action) => new ExceptionPolicy(action).action)).toEqual(['pause', 'cancel', 'reattempt', 'skip']);
  });

  it('an unknown action is refused, naming the four actions', () => {
    const problem = problemOf(construct('retry' as ExceptionAction));
    expect(problem).toMatch(/'pause', 'cancel', 'reattempt', 'skip'/);
    expect(problem).toContain('"retry"');
  });

  it('no action and no handler is refused', () => {
    expect(construct(undefined as unknown as ExceptionAction)).toThrow(StepConfigurationError);
  });

  it.each(['pause', 'cancel', 'skip'] as const)("wait with '%s' is refused", (action) => {
    expect(problemOf(construct(action, { wait: '15s' }))).toMatch(new RegExp(`wait is only allowed with 'reattempt', not '${action}'`));
  });

  it.each(['pause', 'cancel', 'skip'] as const)("maxReattempts with '%s' is refused", (action) => {
    expect(problemOf(construct(action, { maxReattempts: 3 }))).toMatch(/maxReattempts is only allowed with 'reattempt'/);
  });

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('maxReattempts %p is refused', (max) => {
    expect(problemOf(construct('reattempt', { maxReattempts: max }))).toMatch(/maxReattempts must be a positive integer or null/);
  });

  it('maxReattempts given as a string is refused', () => {
    expect(construct('reattempt', { maxReattempts: '3' as unknown as number })).toThrow(/positive integer/);
  });

  it("terminalAction defaults to 'pause' and stores 'cancel'", () => {
    expect(new ExceptionPolicy('reattempt').terminalAction).toBe('pause');
    expect(new ExceptionPolicy('reattempt', { terminalAction: 'cancel' }).terminalAction).toBe('cancel');
  });

  it("terminalAction 'skip' is refused", () => {
    expect(problemOf(construct('reattempt', { terminalAction: 'skip' as 'cancel' }))).toMatch(/terminalAction must be 'pause' or 'cancel'/);
  });

  it("terminalAction with a non-reattempt action is refused (even the default value 'pause')", () => {
    expect(problemOf(construct('pause', { terminalAction: 'cancel' }))).toMatch(/terminalAction is only allowed with 'reattempt'/);
    expect(construct('cancel', { terminalAction: 'pause' })).toThrow(/terminalAction is only allowed/);
  });

  it('an unknown option is refused', () => {
    expect(problemOf(construct('reattempt', { maxRetries: 3 } as never))).toBe('unknown option "maxRetries"');
  });

  it.each([
    ['an unknown strategy', { strategy: 'polynomially_longer', delay: '1s' }, /unknown backoff strategy "polynomially_longer"/],
    ['a delay that is not a duration', { strategy: 'constant', delay: 'soon' }, /delay must be a duration/],
    ['a max that is not a duration', { strategy: 'linear', delay: '1s', max: 'never' }, /max must be a duration/],
    ['jitter above 1', { strategy: 'constant', delay: '1s', jitter: 1.5 }, /jitter must be between 0 and 1/],
    ['negative jitter', { strategy: 'constant', delay: '1s', jitter: -0.1 }, /jitter must be between 0 and 1/],
    ['an exponential factor below 1', { strategy: 'exponential', delay: '1s', factor: 0.5 }, /factor must be >= 1/],
    ['an arbitrary object', { every: 'minute' }, /wait must be a duration, a backoff or a function/],
    ['a negative number', -5, /wait must be a duration/],
    ['a word', 'later', /wait must be a duration/],
  ])('a wait with %s is refused at construction', (_what, wait, problem) => {
    expect(problemOf(construct('reattempt', { wait: wait as never }))).toMatch(problem);
  });

  it('accepts every valid wait form', () => {
    for (const wait of [0, 1500, '30s', '2h', (attempt: number) => attempt * 1000, { strategy: 'constant', delay: '1s' }] as const) {
      expect(new ExceptionPolicy('reattempt', { wait }).wait).toBe(wait);
    }
  });
});

describe('ExceptionPolicy: imperative construction', () => {
  const handler = () => undefined;

  it('a handler alone: imperative, no action, wait or limit', () => {
    const policy = new ExceptionPolicy(handler);
    expect(policy.isImperative).toBe(true);
    expect(policy.handler).toBe(handler);
    expect(policy.action).toBeUndefined();
    expect(policy.wait).toBeUndefined();
    expect(policy.maxReattempts).toBeNull();
    expect(policy.terminalAction).toBe('pause');
  });

  it.each([
    ['wait', { wait: '1s' }],
    ['maxReattempts', { maxReattempts: 3 }],
    ['terminalAction', { terminalAction: 'cancel' }],
  ] as const)('a handler with %s is refused', (_key, options) => {
    expect(problemOf(construct(handler, options))).toMatch(/imperative handler decides with flow control/);
  });

  it('a handler with matchers is allowed', () => {
    const policy = new ExceptionPolicy(handler, { on: [TransientError] });
    expect(policy.isImperative).toBe(true);
    expect(policy.isSpecific).toBe(true);
  });
});

describe('ExceptionPolicy: matching', () => {
  it('without matchers a policy is blanket and matches anything thrown, Errors or not', () => {
    const policy = new ExceptionPolicy('pause');
    expect(policy.isSpecific).toBe(false);
    for (const thrown of [new Error('x'), new TypeError('x'), 'a string', 42, null, undefined]) expect(policy.matches(thrown)).toBe(true);
  });

  it('with error classes it is specific and matches those classes only', () => {
    const policy = new ExceptionPolicy('cancel', { on: [TypeError, RangeError] });
    expect(policy.isSpecific).toBe(true);
    expect(policy.matchers).toEqual([TypeError, RangeError]);
    expect(policy.matches(new TypeError('t'))).toBe(true);
    expect(policy.matches(new RangeError('r'))).toBe(true);
    expect(policy.matches(new Error('plain'))).toBe(false);
    expect(policy.matches(new SyntaxError('s'))).toBe(false);
    expect(policy.matches('TypeError')).toBe(false);
  });

  it('a class matcher matches subclasses', () => {
    const byError = new ExceptionPolicy('pause', { on: [Error] });
    expect(byError.matches(new TypeError('t'))).toBe(true);
    expect(byError.matches(new FatalError('f'))).toBe(true);
    const byTransient = new ExceptionPolicy('pause', { on: [TransientError] });
    expect(byTransient.matches(new RateLimitedError('r'))).toBe(true);
    expect(byTransient.matches(new FatalError('f'))).toBe(false);
    expect(byTransient.matches(new Error('e'))).toBe(false);
  });

  it('a class name string matches that class and its subclasses, without an import', () => {
    const policy = new ExceptionPolicy('pause', { on: ['TypeError'] });
    expect(policy.isSpecific).toBe(true);
    expect(policy.matches(new TypeError('t'))).toBe(true);
    expect(policy.matches(new RangeError('r'))).toBe(false);
    expect(new ExceptionPolicy('pause', { on: ['Error'] }).matches(new RangeError('r'))).toBe(true);
    expect(new ExceptionPolicy('pause', { on: ['TransientError'] }).matches(new RateLimitedError('r'))).toBe(true);
    expect(new ExceptionPolicy('pause', { on: ['RateLimitedError'] }).matches(new TransientError('t'))).toBe(false);
  });

  it('an unresolvable class name never matches and never throws, whatever was thrown', () => {
    const policy = new ExceptionPolicy('pause', { on: ['NoSuchError'] });
    for (const thrown of [new Error('x'), 'text', 7, null, undefined, Object.create(null)]) {
      expect(() => policy.matches(thrown)).not.toThrow();
      expect(policy.matches(thrown)).toBe(false);
    }
  });

  it('a predicate receives the thrown value and decides (arrow functions and function expressions)', () => {
    const seen: unknown[] = [];
    const byMessage = new ExceptionPolicy('skip', {
      on: [(error) => (seen.push(error), error instanceof Error && error.message.includes('timeout'))],
    });
    const thrown = new Error('gateway timeout');
    expect(byMessage.matches(thrown)).toBe(true);
    expect(seen).toEqual([thrown]);
    expect(byMessage.matches(new Error('boom'))).toBe(false);

    const byCode = new ExceptionPolicy('skip', {
      on: [
        function isConflict(error: unknown) {
          return (error as { status?: number } | null)?.status === 409;
        },
      ],
    });
    expect(byCode.matches({ status: 409 })).toBe(true);
    expect(byCode.matches({ status: 500 })).toBe(false);
    expect(byCode.matches(null)).toBe(false);
  });

  it('any matcher of a list is enough', () => {
    const policy = new ExceptionPolicy('cancel', { on: ['FatalError', (error) => error === 'fatal', RangeError] });
    expect(policy.matches(new FatalError('f'))).toBe(true);
    expect(policy.matches('fatal')).toBe(true);
    expect(policy.matches(new RangeError('r'))).toBe(true);
    expect(policy.matches(new TransientError('t'))).toBe(false);
  });

  it.each([
    ['a class that is not an Error', NotAnError],
    ['a built-in constructor that is not an Error (String)', String],
    ['Date', Date],
  ])('%s as a matcher is refused at construction', (_what, matcher) => {
    expect(problemOf(construct('cancel', { on: [matcher as never] }))).toMatch(/Error class/);
  });

  it.each([
    ['a number', 42],
    ['an object', { name: 'TypeError' }],
    ['null', null],
  ])('%s as a matcher is refused', (_what, matcher) => {
    expect(problemOf(construct('cancel', { on: [matcher as never] }))).toMatch(/error classes, class names or predicates/);
  });

  it('the matcher list is a copy: changing the array given later changes nothing', () => {
    const on: Array<typeof TypeError> = [TypeError];
    const policy = new ExceptionPolicy('cancel', { on });
    on.push(RangeError);
    expect(policy.matches(new RangeError('r'))).toBe(false);
  });
});

describe('ExceptionPolicy: reattempt delays', () => {
  it('no wait: no delay (an immediate reattempt)', () => {
    expect(new ExceptionPolicy('reattempt').reattemptDelay(1)).toBeUndefined();
  });

  it('hands the attempt number to a wait function, clamped to at least 1', () => {
    const attempts: number[] = [];
    const policy = new ExceptionPolicy('reattempt', { wait: (attempt) => (attempts.push(attempt), 2 ** attempt * 1000) });
    expect([1, 2, 3].map((n) => policy.reattemptDelay(n))).toEqual([2000, 4000, 8000]);
    expect(policy.reattemptDelay(0)).toBe(2000);
    expect(attempts).toEqual([1, 2, 3, 1]);
  });
});

describe('resolveExceptionPolicy precedence', () => {
  const implicitStep = { exceptionPolicy: PAUSE_POLICY, hasExplicitPolicy: false };
  const explicitStep = (policy: ExceptionPolicy) => ({ exceptionPolicy: policy, hasExplicitPolicy: true });
  const blanketPause = new ExceptionPolicy('pause');
  const blanketReattempt = new ExceptionPolicy('reattempt', { maxReattempts: 3 });
  const cancelOnTransient = new ExceptionPolicy('cancel', { on: [TransientError] });
  const skipOnTransient = new ExceptionPolicy('skip', { on: ['TransientError'] });

  it("the step's explicit policy wins over every class-level policy, specific or not", () => {
    const stepPolicy = new ExceptionPolicy('skip');
    expect(resolveExceptionPolicy(explicitStep(stepPolicy), [cancelOnTransient, blanketReattempt], new TransientError('t'))).toBe(stepPolicy);
    // An explicit 'pause' is explicit too.
    const explicitPause = new ExceptionPolicy('pause');
    expect(resolveExceptionPolicy(explicitStep(explicitPause), [blanketReattempt], new Error('e'))).toBe(explicitPause);
  });

  it("a step policy's own matchers are not consulted", () => {
    const stepPolicy = new ExceptionPolicy('skip', { on: [FatalError] });
    expect(resolveExceptionPolicy(explicitStep(stepPolicy), [blanketReattempt], new TransientError('t'))).toBe(stepPolicy);
  });

  it('a matching specific policy beats a blanket one declared before it', () => {
    const policies = [blanketPause, cancelOnTransient];
    expect(resolveExceptionPolicy(implicitStep, policies, new TransientError('t'))).toBe(cancelOnTransient);
    expect(resolveExceptionPolicy(implicitStep, policies, new Error('other'))).toBe(blanketPause);
  });

  it('a matching specific policy beats a blanket one declared after it', () => {
    const policies = [cancelOnTransient, blanketReattempt];
    expect(resolveExceptionPolicy(implicitStep, policies, new RateLimitedError('r'))).toBe(cancelOnTransient);
    expect(resolveExceptionPolicy(implicitStep, policies, new FatalError('f'))).toBe(blanketReattempt);
  });

  it('of two matching specific policies the later one wins', () => {
    expect(resolveExceptionPolicy(implicitStep, [cancelOnTransient, skipOnTransient], new TransientError('t'))).toBe(skipOnTransient);
    expect(resolveExceptionPolicy(implicitStep, [skipOnTransient, cancelOnTransient], new TransientError('t'))).toBe(cancelOnTransient);
  });

  it('of two blanket policies the later one wins (a subclass appends after its parent)', () => {
    expect(resolveExceptionPolicy(implicitStep, [blanketPause, blanketReattempt], new Error('e'))).toBe(blanketReattempt);
    expect(resolveExceptionPolicy(implicitStep, [blanketReattempt, blanketPause], new Error('e'))).toBe(blanketPause);
  });

  it("only non-matching specific policies: the step's implicit default applies", () => {
    const resolved = resolveExceptionPolicy(implicitStep, [cancelOnTransient, skipOnTransient], new FatalError('f'));
    expect(resolved).toBe(PAUSE_POLICY);
    expect(resolved.action).toBe('pause');
  });

  it("no class policies: the step's implicit default applies; no step at all: pause", () => {
    expect(resolveExceptionPolicy(implicitStep, [], new Error('e'))).toBe(PAUSE_POLICY);
    expect(resolveExceptionPolicy(undefined, [], new Error('e'))).toBe(PAUSE_POLICY);
    expect(resolveExceptionPolicy(undefined, [blanketReattempt], new Error('e'))).toBe(blanketReattempt);
  });

  it('an imperative class-level policy takes part like any other', () => {
    const handler = new ExceptionPolicy(() => undefined, { on: [FatalError] });
    expect(resolveExceptionPolicy(implicitStep, [handler, blanketPause], new FatalError('f'))).toBe(handler);
    expect(resolveExceptionPolicy(implicitStep, [handler, blanketPause], new TransientError('t'))).toBe(blanketPause);
  });
});
