import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { backoffDelay, describeInvalidWait, type ReattemptWait } from './backoff.js';

/** What to do with a step whose body (or precondition) threw. @publicApi */
export type ExceptionAction = 'pause' | 'cancel' | 'reattempt' | 'skip';
export const EXCEPTION_ACTIONS: readonly ExceptionAction[] = ['pause', 'cancel', 'reattempt', 'skip'];

/**
 * Which errors a policy applies to: an error class (subclasses match too), an error class name
 * (compared along the prototype chain, so it needs no import), or a predicate.
 * @publicApi
 */
export type ErrorMatcher = (abstract new (...args: never[]) => unknown) | string | ((error: unknown) => boolean);

/**
 * An imperative handler: runs with the error and the workflow instance and decides with flow
 * control (`wf.reattempt()`, `wf.skip()`, ...). A handler that decides nothing pauses the workflow.
 * @publicApi
 */
export type ExceptionHandler<W = never> = (error: unknown, workflow: W) => void | Promise<void>;

/** @publicApi */
export interface ExceptionPolicyOptions {
  /** Errors this policy applies to; none = every error (a blanket policy). */
  on?: ErrorMatcher[];
  /** Delay before a reattempt: a duration, a backoff strategy or a function of the attempt number. Only with `'reattempt'`. */
  wait?: ReattemptWait;
  /** Consecutive error-driven reattempts allowed before `terminalAction`; `null` = unlimited. @default 100 */
  maxReattempts?: number | null;
  /** What happens when `maxReattempts` is exhausted. @default 'pause' */
  terminalAction?: 'pause' | 'cancel';
}

export const DEFAULT_MAX_REATTEMPTS = 100;

/**
 * A validated exception policy: declarative (`new ExceptionPolicy('reattempt', { maxReattempts: 5 })`)
 * or imperative (`new ExceptionPolicy((error, wf) => wf.skip())`). Invalid combinations throw at
 * construction, never when the error happens.
 * @publicApi
 */
export class ExceptionPolicy {
  readonly action: ExceptionAction | undefined;
  readonly handler: ExceptionHandler<any> | undefined;
  readonly wait: ReattemptWait | undefined;
  readonly maxReattempts: number | null;
  readonly terminalAction: 'pause' | 'cancel';
  readonly matchers: readonly ErrorMatcher[];

  constructor(actionOrHandler: ExceptionAction | ExceptionHandler<any>, options: ExceptionPolicyOptions = {}) {
    const fail = (problem: string): never => {
      throw new StepConfigurationError('ExceptionPolicy', undefined, problem);
    };
    for (const key of Object.keys(options)) {
      if (!['on', 'wait', 'maxReattempts', 'terminalAction'].includes(key)) fail(`unknown option "${key}"`);
    }
    if (typeof actionOrHandler === 'function') {
      if (options.wait !== undefined || options.maxReattempts !== undefined || options.terminalAction !== undefined) {
        fail('an imperative handler decides with flow control; wait, maxReattempts and terminalAction belong to a declarative policy');
      }
      this.handler = actionOrHandler;
      this.action = undefined;
      this.maxReattempts = null;
    } else {
      if (!EXCEPTION_ACTIONS.includes(actionOrHandler)) {
        fail(`action must be one of ${EXCEPTION_ACTIONS.map((a) => `'${a}'`).join(', ')} or a handler function, got ${JSON.stringify(actionOrHandler)}`);
      }
      this.action = actionOrHandler;
      const reattempt = actionOrHandler === 'reattempt';
      if (!reattempt && options.wait !== undefined) fail(`wait is only allowed with 'reattempt', not '${actionOrHandler}'`);
      if (!reattempt && options.maxReattempts !== undefined) fail(`maxReattempts is only allowed with 'reattempt', not '${actionOrHandler}'`);
      if (!reattempt && options.terminalAction !== undefined) fail(`terminalAction is only allowed with 'reattempt', not '${actionOrHandler}'`);
      const invalidWait = describeInvalidWait(options.wait);
      if (invalidWait) fail(invalidWait);
      const max = options.maxReattempts === undefined ? (reattempt ? DEFAULT_MAX_REATTEMPTS : null) : options.maxReattempts;
      if (max !== null && !(Number.isInteger(max) && max > 0)) fail(`maxReattempts must be a positive integer or null, got ${String(max)}`);
      this.maxReattempts = max;
      this.handler = undefined;
    }
    const terminal = options.terminalAction ?? 'pause';
    if (terminal !== 'pause' && terminal !== 'cancel') fail(`terminalAction must be 'pause' or 'cancel', got ${JSON.stringify(terminal)}`);
    this.terminalAction = terminal;
    this.wait = options.wait;
    for (const matcher of options.on ?? []) {
      if (typeof matcher !== 'function' && typeof matcher !== 'string') fail(`"on" takes error classes, class names or predicates, got ${JSON.stringify(matcher)}`);
      // A class that is not an Error class would otherwise be called as a predicate (String(error) is truthy: it would match everything).
      if (typeof matcher === 'function' && isClass(matcher) && !isErrorClass(matcher)) {
        fail(`"on" takes an Error class (subclasses match too), got ${(matcher as Function).name || 'an anonymous class'}; use a predicate such as (error) => error instanceof X for other thrown values`);
      }
    }
    this.matchers = [...(options.on ?? [])];
  }

  get isImperative(): boolean {
    return this.handler !== undefined;
  }

  /** Has matchers: applies to some errors only. */
  get isSpecific(): boolean {
    return this.matchers.length > 0;
  }

  matches(error: unknown): boolean {
    return this.matchers.length === 0 || this.matchers.some((matcher) => matchError(matcher, error));
  }

  /** Delay before reattempt number `attempt` (1 for the first). */
  reattemptDelay(attempt: number): number | undefined {
    return backoffDelay(this.wait, Math.max(1, attempt));
  }
}

function matchError(matcher: ErrorMatcher, error: unknown): boolean {
  if (typeof matcher === 'string') {
    for (let proto = error === null || error === undefined ? null : Object.getPrototypeOf(error); proto; proto = Object.getPrototypeOf(proto)) {
      if (proto.constructor?.name === matcher) return true;
    }
    return false;
  }
  // An Error class (used with `instanceof`) or a predicate.
  if (isErrorClass(matcher)) return error instanceof (matcher as new () => unknown);
  return Boolean((matcher as (error: unknown) => boolean)(error));
}

/** `class` syntax or a built-in constructor (String, Date, ...): never a predicate. */
function isClass(fn: Function): boolean {
  if (fn.prototype === undefined) return false; // arrow functions, methods, bound functions
  const source = Function.prototype.toString.call(fn);
  return /^class[\s{]/.test(source) || /\{\s*\[native code\]\s*\}\s*$/.test(source);
}

function isErrorClass(fn: unknown): boolean {
  return typeof fn === 'function' && (fn === Error || fn.prototype instanceof Error);
}

/**
 * Picks the policy for an error. Precedence: the step's explicit policy; then the most recently
 * declared class-level policy whose matchers match; then the most recent blanket class policy; then
 * the step's default (pause).
 */
export function resolveExceptionPolicy(
  step: { exceptionPolicy: ExceptionPolicy; hasExplicitPolicy: boolean } | undefined,
  classPolicies: readonly ExceptionPolicy[],
  error: unknown,
): ExceptionPolicy {
  if (step?.hasExplicitPolicy) return step.exceptionPolicy;
  for (let i = classPolicies.length - 1; i >= 0; i--) {
    if (classPolicies[i].isSpecific && classPolicies[i].matches(error)) return classPolicies[i];
  }
  for (let i = classPolicies.length - 1; i >= 0; i--) {
    if (!classPolicies[i].isSpecific) return classPolicies[i];
  }
  return step?.exceptionPolicy ?? PAUSE_POLICY;
}

export const PAUSE_POLICY = new ExceptionPolicy('pause');
