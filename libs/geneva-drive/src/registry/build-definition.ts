// Builds and validates a workflow's definition from its decorators, at boot: every refusal a bad
// declaration gets (StepConfigurationError) is here.
import { ownStepDeclarations, type StepDeclaration } from '../workflow/step-declaration.js';
import { workflowOptionsOf } from '../workflow/workflow.decorator.js';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { EXCEPTION_ACTIONS, ExceptionPolicy, PAUSE_POLICY, type ExceptionAction } from '../exception-policy/exception-policy.js';
import type { StepJobOptions, TimeoutAction, WorkflowCondition } from '../workflow/step-options.interface.js';
import type { ClassExceptionPolicy, WorkflowOptions } from '../workflow/workflow-options.interface.js';
import { toSignalMatcher, type SignalMatcherLike } from '../workflow/signal-matcher.js';
import { isChildrenMatcher } from '../workflow/children-matcher.js';
import type { ConcurrencyOptions } from '../workflow/concurrency-options.js';
import type { RateLimitOptions, StepRateLimit } from '../workflow/rate-limit-options.js';
import { parseDuration, type Duration } from '../util/duration.js';
import { DEFAULT_TRANSACTION_TIMEOUT_MS, WorkflowDefinition, type RemovedStep, type StepDefinition } from './workflow-definition.js';

const MAX_TRANSACTION_TIMEOUT_MS = 2_147_483_647;
const STEP_OPTION_KEYS = ['name', 'wait', 'waitFor', 'timeout', 'onTimeout', 'skipIf', 'onException', 'maxReattempts', 'terminalAction', 'maxRecoveries', 'before', 'after', 'jobOptions', 'concurrency', 'rateLimit'];
const TRANSACTIONAL_OPTION_KEYS = ['transactional', 'transactionTimeout'];
const RESUMABLE_OPTION_KEYS = ['maxIterations', 'maxRuntime'];
const WORKFLOW_OPTION_KEYS = ['name', 'hero', 'cancelIf', 'onException', 'jobOptions', 'mayProceedWithoutHero', 'skipUndefinedSteps', 'removedSteps', 'transactional', 'concurrency', 'rateLimit'];
const REMOVED_STEP_KEYS = ['name', 'after', 'before'];

/**
 * Builds and validates the definition of a `@Workflow` class. Every problem throws a
 * `StepConfigurationError` naming the class and the step, so a bad declaration stops the boot.
 */
export function buildWorkflowDefinition(target: Function): WorkflowDefinition {
  const className = target.name;
  const chain = classChain(target);
  const options: WorkflowOptions = workflowOptionsOf(target) ?? {};
  const fail = (step: string | undefined, problem: string): never => {
    throw new StepConfigurationError(className, step, problem);
  };

  for (const key of Object.keys(options)) if (!WORKFLOW_OPTION_KEYS.includes(key)) fail(undefined, `unknown @Workflow option "${key}"`);
  if (options.name !== undefined && (typeof options.name !== 'string' || options.name.trim() === '')) fail(undefined, 'name must be a non-empty string');
  if (options.hero !== undefined && typeof options.hero !== 'function') fail(undefined, 'hero must be a thunk returning the entity class, e.g. hero: () => Order');
  if (options.transactional !== undefined && typeof options.transactional !== 'boolean') fail(undefined, 'transactional must be true or false');

  // Inherited class options: conditions and policies concatenate (parent first), job options merge, flags inherit.
  const inherited = chain.map((cls) => workflowOptionsOf(cls) ?? {});
  const cancelIf: WorkflowCondition[] = [];
  const policies: ExceptionPolicy[] = [];
  let jobOptions: StepJobOptions = {};
  for (const opts of inherited) {
    for (const condition of opts.cancelIf ?? []) cancelIf.push(validateCondition(condition, target, (p) => fail(undefined, `cancelIf: ${p}`)));
    for (const policy of opts.onException ?? []) policies.push(toClassPolicy(policy, (p) => fail(undefined, `onException: ${p}`)));
    jobOptions = { ...jobOptions, ...(opts.jobOptions ?? {}) };
  }

  const removed = removedStepsOf(inherited, (step, problem) => fail(step, `removedSteps: ${problem}`));
  const nearestConcurrency = inherited.findLast((o) => o.concurrency !== undefined)?.concurrency;
  const workflowConcurrency = nearestConcurrency === undefined ? undefined : validateConcurrency(nearestConcurrency, (p) => fail(undefined, `concurrency: ${p}`));
  const nearestRateLimit = inherited.findLast((o) => o.rateLimit !== undefined)?.rateLimit;
  const workflowRateLimit = nearestRateLimit === undefined ? undefined : validateRateLimit(nearestRateLimit, (p) => fail(undefined, `rateLimit: ${p}`));

  // Steps: parents' first, each class in declaration order, then positioned by before/after.
  const declared: Placed[] = [];
  const taken = new Set<string>();
  // Names given explicitly (or method names) anywhere in the chain are reserved up front, so a
  // generated `step_<n>` never takes a name that a later declaration spells out.
  const reserved = new Set(chain.flatMap((cls) => ownStepDeclarations(cls).map((d) => d.options.name ?? d.methodName)));
  for (const cls of chain) {
    for (const declaration of ownStepDeclarations(cls)) {
      const name = stepNameOf(declaration, taken, reserved, declared.length);
      if (taken.has(name)) fail(name, `a step named "${name}" is already defined in ${className}`);
      if (removed.some((r) => r.name === name)) fail(name, `"${name}" is both a step and one of removedSteps: a removed step's name stays reserved`);
      const stepFail = (problem: string): never => fail(name, problem);
      const { before, after } = declaration.options;
      for (const [key, ref] of [['before', before], ['after', after]] as const) {
        if (ref !== undefined && !taken.has(ref) && !removed.some((r) => r.name === ref)) {
          stepFail(`${key}: "${ref}" references a non-existent step; only steps declared earlier (or removedSteps) can be referenced`);
        }
      }
      if (before !== undefined && after !== undefined) stepFail('cannot specify both before and after');
      // The nearest class that says so decides the defaults.
      const defaults = {
        transactional: inherited.findLast((o) => o.transactional !== undefined)?.transactional === true,
        concurrency: workflowConcurrency,
        rateLimit: workflowRateLimit,
      };
      declared.push({ name, definition: buildStep(name, declaration, target, stepFail, defaults), before, after });
      taken.add(name);
    }
  }
  for (const r of removed) {
    const anchor = r.after ?? r.before!;
    if (!taken.has(anchor) && !removed.some((other) => other.name === anchor)) fail(r.name, `removedSteps: ${r.after ? 'after' : 'before'}: "${anchor}" is neither a step nor a removed step`);
  }
  const ordered = placeSteps([...declared, ...removed.map((r) => ({ name: r.name, before: r.before, after: r.after }))], (problem) => fail(undefined, problem));
  const steps = ordered.flatMap((placed) => (placed.definition ? [placed.definition] : []));
  for (const step of steps) {
    if (!isChildrenMatcher(step.waitFor)) continue;
    // A fan-in waits for the children another step starts: that step must be this workflow's (or a removed one, whose children may still run).
    const from = step.waitFor.stepName;
    if (from === step.name) fail(step.name, `waitFor: childrenOf("${from}") names the step itself: a step's children are started by its body, which runs after its gate`);
    if (!taken.has(from) && !removed.some((r) => r.name === from)) fail(step.name, `waitFor: childrenOf("${from}") names no step of ${className}`);
  }
  const removedSteps = ordered.flatMap((placed, index): RemovedStep[] =>
    placed.definition ? [] : [{ name: placed.name, next: ordered.slice(index + 1).find((later) => later.definition)?.name ?? null }],
  );

  return new WorkflowDefinition(
    options.name ?? className,
    target,
    options.hero ?? inherited.findLast((o) => o.hero)?.hero,
    steps,
    cancelIf,
    policies,
    jobOptions,
    inherited.some((o) => o.mayProceedWithoutHero === true),
    inherited.some((o) => o.skipUndefinedSteps === true),
    removedSteps,
  );
}

/** A step or a gravestone (no definition) and where it asks to go. */
interface Placed {
  name: string;
  definition?: StepDefinition;
  before?: string;
  after?: string;
}

/**
 * Run order: entries without a position in declaration order, then each positioned one next to its
 * anchor, in declaration order. An entry whose anchor is not placed yet (a step positioned at a
 * gravestone that is itself positioned) waits for a later pass; a pass placing nothing is a cycle.
 */
function placeSteps(entries: Placed[], fail: (problem: string) => never): Placed[] {
  const ordered = entries.filter((e) => e.before === undefined && e.after === undefined);
  let pending = entries.filter((e) => e.before !== undefined || e.after !== undefined);
  while (pending.length > 0) {
    const waiting: Placed[] = [];
    for (const entry of pending) {
      const anchor = ordered.findIndex((placed) => placed.name === (entry.before ?? entry.after));
      if (anchor < 0) waiting.push(entry);
      else ordered.splice(entry.before !== undefined ? anchor : anchor + 1, 0, entry);
    }
    if (waiting.length === pending.length) fail(`before/after form a cycle between ${waiting.map((e) => `"${e.name}"`).join(', ')}`);
    pending = waiting;
  }
  return ordered;
}

/** The gravestones of the class chain (parents first), validated. */
function removedStepsOf(inherited: WorkflowOptions[], fail: (step: string | undefined, problem: string) => never): Array<{ name: string; before?: string; after?: string }> {
  const removed: Array<{ name: string; before?: string; after?: string }> = [];
  for (const opts of inherited) {
    if (opts.removedSteps === undefined) continue;
    if (!Array.isArray(opts.removedSteps)) fail(undefined, "must be an array of { name, after } or { name, before }");
    for (const entry of opts.removedSteps) {
      if (typeof entry !== 'object' || entry === null) fail(undefined, "each entry must be { name, after } or { name, before }");
      for (const key of Object.keys(entry)) if (!REMOVED_STEP_KEYS.includes(key)) fail(entry.name, `unknown key "${key}"`);
      const { name, after, before } = entry;
      if (typeof name !== 'string' || name.trim() === '') fail(undefined, 'name must be a non-empty string');
      if ((after === undefined) === (before === undefined)) fail(name, `"${name}" needs exactly one of after or before (the first position is before: <first step>)`);
      const anchor = after ?? before;
      if (typeof anchor !== 'string' || anchor.trim() === '') fail(name, `"${name}": ${after !== undefined ? 'after' : 'before'} must be a step name`);
      if (anchor === name) fail(name, `"${name}" cannot be placed relative to itself`);
      if (removed.some((r) => r.name === name)) fail(name, `"${name}" is listed twice`);
      removed.push({ name, after, before });
    }
  }
  return removed;
}

/** The class and its ancestors that carry geneva-drive metadata, root first. */
function classChain(target: Function): Function[] {
  const chain: Function[] = [];
  for (let cls: Function | null = target; cls && cls !== Function.prototype; cls = Object.getPrototypeOf(cls)) chain.unshift(cls);
  return chain;
}

function stepNameOf(declaration: StepDeclaration, taken: Set<string>, reserved: Set<string | undefined>, position: number): string {
  if (declaration.options.name !== undefined) return declaration.options.name;
  if (declaration.methodName !== undefined) return declaration.methodName;
  // Anonymous programmatic step: number by position, skipping names in use or reserved.
  let n = position + 1;
  while (taken.has(`step_${n}`) || reserved.has(`step_${n}`)) n++;
  return `step_${n}`;
}

function buildStep(
  name: string,
  declaration: StepDeclaration,
  target: Function,
  fail: (problem: string) => never,
  defaults: { transactional: boolean; concurrency: ConcurrencyOptions | undefined; rateLimit: StepRateLimit | undefined },
): StepDefinition {
  const options = declaration.options as Record<string, unknown> & StepDeclaration['options'];
  const allowed = [...STEP_OPTION_KEYS, ...TRANSACTIONAL_OPTION_KEYS, ...(declaration.resumable ? RESUMABLE_OPTION_KEYS : [])];
  for (const key of Object.keys(options)) if (!allowed.includes(key)) fail(`unknown step option "${key}"`);
  if (options.name !== undefined && (typeof options.name !== 'string' || options.name.trim() === '')) fail('name must be a non-empty string');

  let invoke: StepDefinition['invoke'];
  if (declaration.run === undefined && declaration.methodName === undefined) fail('a step needs a method or a run function');
  if (declaration.run !== undefined) {
    if (typeof declaration.run !== 'function') fail('run must be a function');
    const run = declaration.run;
    invoke = (workflow, ...args) => run(workflow, ...args);
  } else {
    const method = declaration.methodName!;
    invoke = (workflow, ...args) => workflow[method](...args);
  }

  // wait and waitFor are disjoint: a duration is never a signal name, a signal name never a duration.
  let waitMs: number | undefined;
  if (options.wait !== undefined) {
    waitMs = parseDuration(options.wait);
    if (waitMs === undefined) {
      const signalShaped = typeof (options.wait as { matches?: unknown } | null)?.matches === 'function';
      fail(
        typeof options.wait === 'string'
          ? `wait takes a duration (ms or '15m'), got "${options.wait}"; to wait for a signal use waitFor`
          : signalShaped
            ? `wait takes a duration, got a signal matcher; to wait for a signal use waitFor`
            : `wait must be a non-negative duration, got ${JSON.stringify(options.wait)}`,
      );
    }
  }
  let waitFor: SignalMatcherLike | undefined;
  if (options.waitFor !== undefined) {
    const value = options.waitFor as unknown;
    if (typeof value === 'number' || value instanceof Date || (typeof value === 'string' && parseDuration(value) !== undefined)) {
      fail(`waitFor takes a signal name or a matcher, got the duration ${JSON.stringify(value)}; to delay the step use wait`);
    }
    const isMatcher = typeof value === 'object' && value !== null && typeof (value as SignalMatcherLike).matches === 'function';
    if (!(typeof value === 'string' && value.trim() !== '') && !isMatcher) {
      fail('waitFor must be a signal name, a SignalMatcher or an object with matches(signal, workflow)');
    }
    waitFor = toSignalMatcher(value as string | SignalMatcherLike);
  }

  const { timeoutMs, onTimeout } = buildTimeout(options, waitFor !== undefined, fail);

  const skipIf = options.skipIf === undefined ? undefined : validateCondition(options.skipIf, target, (p) => fail(`skipIf: ${p}`));
  const { policy, explicit } = buildStepPolicy(options, fail);

  if (options.jobOptions !== undefined && (typeof options.jobOptions !== 'object' || options.jobOptions === null)) fail('jobOptions must be an object');
  const { maxRecoveries } = options;
  if (maxRecoveries !== undefined && maxRecoveries !== null && !(Number.isInteger(maxRecoveries) && maxRecoveries >= 0)) {
    fail(`maxRecoveries must be a non-negative integer or null, got ${JSON.stringify(maxRecoveries) ?? String(maxRecoveries)}`);
  }
  let maxIterations: number | undefined;
  let maxRuntimeMs: number | undefined;
  if (declaration.resumable) {
    if (options.maxIterations !== undefined) {
      if (!(Number.isInteger(options.maxIterations) && options.maxIterations > 0)) fail('maxIterations must be a positive integer');
      maxIterations = options.maxIterations;
    }
    if (options.maxRuntime !== undefined) {
      maxRuntimeMs = parseDuration(options.maxRuntime);
      if (maxRuntimeMs === undefined || maxRuntimeMs <= 0) fail('maxRuntime must be a positive duration');
    }
  }

  const { transactional, transactionTimeoutMs } = buildTransactional(options, defaults.transactional, fail);
  const concurrency = options.concurrency === undefined ? defaults.concurrency : validateConcurrency(options.concurrency, (p) => fail(`concurrency: ${p}`));
  const rateLimit = options.rateLimit === undefined ? defaults.rateLimit : validateRateLimit(options.rateLimit, (p) => fail(`rateLimit: ${p}`));

  return Object.freeze({
    name,
    invoke,
    waitMs,
    waitFor,
    timeoutMs,
    onTimeout,
    skipIf,
    exceptionPolicy: policy,
    hasExplicitPolicy: explicit,
    jobOptions: options.jobOptions ?? {},
    resumable: declaration.resumable,
    maxIterations,
    maxRuntimeMs,
    maxRecoveries,
    sourceLocation: declaration.sourceLocation,
    transactional,
    transactionTimeoutMs,
    concurrency,
    rateLimit,
  });
}

/** `transactional` (the class's default when the step says nothing) and `transactionTimeout` (only beside it). */
function buildTransactional(
  options: StepDeclaration['options'] & { transactional?: unknown; transactionTimeout?: unknown },
  byDefault: boolean,
  fail: (problem: string) => never,
): { transactional: boolean; transactionTimeoutMs: number } {
  if (options.transactional !== undefined && typeof options.transactional !== 'boolean') fail('transactional must be true or false');
  const transactional = (options.transactional as boolean | undefined) ?? byDefault;
  if (options.transactionTimeout === undefined) return { transactional, transactionTimeoutMs: DEFAULT_TRANSACTION_TIMEOUT_MS };
  if (!transactional) fail('transactionTimeout needs transactional: true');
  const transactionTimeoutMs = parseDuration(options.transactionTimeout as Duration);
  // At most what PostgreSQL's statement_timeout takes (2^31 - 1 ms, about 24.8 days).
  if (transactionTimeoutMs === undefined || transactionTimeoutMs <= 0 || transactionTimeoutMs > MAX_TRANSACTION_TIMEOUT_MS) {
    fail(`transactionTimeout must be a positive duration (ms or '30s') of at most ${MAX_TRANSACTION_TIMEOUT_MS} ms, got ${JSON.stringify(options.transactionTimeout) ?? String(options.transactionTimeout)}`);
  }
  return { transactional, transactionTimeoutMs };
}

/** `concurrency`: `{ key: (workflow) => string, limit: <positive integer> }`. */
function validateConcurrency(value: unknown, fail: (problem: string) => never): ConcurrencyOptions {
  if (typeof value !== 'object' || value === null) fail('must be { key: (workflow) => string, limit: <positive integer> }');
  const { key, limit, ...rest } = value as Partial<ConcurrencyOptions> & Record<string, unknown>;
  for (const unknown of Object.keys(rest)) fail(`unknown key "${unknown}"`);
  if (typeof key !== 'function') fail('key must be a function of the workflow returning a string');
  if (!(typeof limit === 'number' && Number.isInteger(limit) && limit > 0)) fail(`limit must be a positive integer, got ${JSON.stringify(limit) ?? String(limit)}`);
  return Object.freeze({ key: key!, limit: limit! });
}

/** `rateLimit`: `{ key: (workflow) => string, limit: <positive integer>, per: <positive duration> }`. */
function validateRateLimit(value: unknown, fail: (problem: string) => never): StepRateLimit {
  if (typeof value !== 'object' || value === null) fail('must be { key: (workflow) => string, limit: <positive integer>, per: <positive duration> }');
  const { key, limit, per, ...rest } = value as Partial<RateLimitOptions> & Record<string, unknown>;
  for (const unknown of Object.keys(rest)) fail(`unknown key "${unknown}"`);
  if (typeof key !== 'function') fail('key must be a function of the workflow returning a string');
  if (!(typeof limit === 'number' && Number.isInteger(limit) && limit > 0)) fail(`limit must be a positive integer, got ${JSON.stringify(limit) ?? String(limit)}`);
  const perMs = per === undefined ? undefined : parseDuration(per);
  if (perMs === undefined || perMs <= 0) fail(`per must be a positive duration (ms or '1m'), got ${JSON.stringify(per) ?? String(per)}`);
  return Object.freeze({ key: key!, limit: limit!, perMs: perMs! });
}

const TIMEOUT_ACTIONS: readonly TimeoutAction[] = ['run', 'skip', 'cancel', 'pause'];

/** `timeout` (a positive duration, only beside `waitFor`) and `onTimeout` (only beside `timeout`). */
function buildTimeout(options: StepDeclaration['options'], waits: boolean, fail: (problem: string) => never): { timeoutMs: number | undefined; onTimeout: TimeoutAction } {
  const { timeout, onTimeout } = options;
  if (onTimeout !== undefined && !TIMEOUT_ACTIONS.includes(onTimeout)) {
    fail(`onTimeout must be one of ${TIMEOUT_ACTIONS.map((a) => `'${a}'`).join(', ')}, got ${JSON.stringify(onTimeout) ?? String(onTimeout)}`);
  }
  if (timeout === undefined) {
    if (onTimeout !== undefined) fail('onTimeout needs a timeout');
    return { timeoutMs: undefined, onTimeout: 'run' };
  }
  if (!waits) fail('timeout needs waitFor: only a step parked waiting for a signal can time out (to delay a step use wait)');
  const timeoutMs = parseDuration(timeout);
  if (timeoutMs === undefined || timeoutMs <= 0) fail(`timeout must be a positive duration (ms or '14d'), got ${JSON.stringify(timeout) ?? String(timeout)}`);
  return { timeoutMs, onTimeout: onTimeout ?? 'run' };
}

function buildStepPolicy(options: StepDeclaration['options'], fail: (problem: string) => never): { policy: ExceptionPolicy; explicit: boolean } {
  const { onException, maxReattempts, terminalAction } = options;
  const symbolic = typeof onException === 'string';
  if (maxReattempts !== undefined && !symbolic) {
    fail(onException === undefined ? "maxReattempts needs onException: 'reattempt'" : 'maxReattempts belongs on the ExceptionPolicy or handler, not beside it');
  }
  if (terminalAction !== undefined && !symbolic) {
    fail(onException === undefined ? "terminalAction needs onException: 'reattempt'" : 'terminalAction belongs on the ExceptionPolicy or handler, not beside it');
  }
  if (onException === undefined) return { policy: PAUSE_POLICY, explicit: false };
  if (onException instanceof ExceptionPolicy) return { policy: onException, explicit: true };
  if (typeof onException === 'function') return { policy: new ExceptionPolicy(onException), explicit: true };
  if (!symbolic) fail(`onException must be one of ${EXCEPTION_ACTIONS.join(', ')}, an ExceptionPolicy or a handler function`);
  const action = onException as ExceptionAction;
  if (!EXCEPTION_ACTIONS.includes(action)) fail(`onException must be one of ${EXCEPTION_ACTIONS.map((a) => `'${a}'`).join(', ')}, got "${action}"`);
  if (action !== 'reattempt' && maxReattempts !== undefined) fail(`maxReattempts is only allowed with onException 'reattempt', not '${action}'`);
  if (action !== 'reattempt' && terminalAction !== undefined) fail(`terminalAction is only allowed with onException 'reattempt', not '${action}'`);
  try {
    return { policy: new ExceptionPolicy(action, { maxReattempts, terminalAction }), explicit: true };
  } catch (error) {
    return fail((error as StepConfigurationError).problem ?? String(error));
  }
}

function toClassPolicy(entry: ClassExceptionPolicy, fail: (problem: string) => never): ExceptionPolicy {
  if (entry instanceof ExceptionPolicy) return entry;
  if (typeof entry !== 'object' || entry === null) return fail('each entry must be an ExceptionPolicy or { action | handler, on?, ... }');
  try {
    if ('handler' in entry) {
      const { handler, ...rest } = entry;
      return new ExceptionPolicy(handler, rest);
    }
    if ('action' in entry) {
      const { action, ...rest } = entry;
      return new ExceptionPolicy(action, rest);
    }
  } catch (error) {
    return fail((error as StepConfigurationError).problem ?? String(error));
  }
  return fail('each entry needs an action or a handler');
}

function validateCondition(condition: unknown, target: Function, fail: (problem: string) => never): WorkflowCondition {
  if (typeof condition === 'boolean' || typeof condition === 'function') return condition as WorkflowCondition;
  if (typeof condition === 'string') {
    if (typeof (target.prototype as Record<string, unknown>)[condition] !== 'function') fail(`"${condition}" is not a method of ${target.name}`);
    return condition;
  }
  return fail(`a condition must be a function, a method name or a boolean, got ${condition === null ? 'null' : typeof condition}`);
}
