import { ownStepDeclarations, type StepDeclaration } from '../workflow/step-declaration.js';
import { workflowOptionsOf } from '../workflow/workflow.decorator.js';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { EXCEPTION_ACTIONS, ExceptionPolicy, PAUSE_POLICY, type ExceptionAction } from '../exception-policy/exception-policy.js';
import type { StepJobOptions, TimeoutAction, WorkflowCondition } from '../workflow/step-options.interface.js';
import type { ClassExceptionPolicy, WorkflowOptions } from '../workflow/workflow-options.interface.js';
import { toSignalMatcher, type SignalMatcherLike } from '../workflow/signal-matcher.js';
import { parseDuration } from '../util/duration.js';

/** One validated step. Immutable. */
export interface StepDefinition {
  readonly name: string;
  /** Runs the body on a workflow instance. */
  readonly invoke: (workflow: any, ...args: unknown[]) => unknown;
  readonly waitMs: number | undefined;
  readonly waitFor: SignalMatcherLike | undefined;
  /** With `waitFor`: how long the step may stay parked (`timeout`), and what happens then. */
  readonly timeoutMs: number | undefined;
  readonly onTimeout: TimeoutAction;
  readonly skipIf: WorkflowCondition | undefined;
  readonly exceptionPolicy: ExceptionPolicy;
  readonly hasExplicitPolicy: boolean;
  readonly jobOptions: StepJobOptions;
  readonly resumable: boolean;
  readonly maxIterations: number | undefined;
  readonly maxRuntimeMs: number | undefined;
  /** The step's own `maxRecoveries` (null: unlimited); undefined: the module's applies. */
  readonly maxRecoveries: number | null | undefined;
  readonly sourceLocation: string | undefined;
}

/** A workflow class, validated and with its steps in run order. Immutable. */
export class WorkflowDefinition {
  private readonly byName: ReadonlyMap<string, StepDefinition>;

  constructor(
    readonly name: string,
    readonly target: Function,
    readonly heroEntity: (() => Function) | undefined,
    readonly steps: readonly StepDefinition[],
    readonly cancelIf: readonly WorkflowCondition[],
    readonly exceptionPolicies: readonly ExceptionPolicy[],
    readonly jobOptions: StepJobOptions,
    readonly mayProceedWithoutHero: boolean,
    readonly skipUndefinedSteps: boolean,
  ) {
    this.byName = new Map(steps.map((step) => [step.name, step]));
  }

  step(name: string | null | undefined): StepDefinition | undefined {
    return name == null ? undefined : this.byName.get(name);
  }

  get firstStep(): StepDefinition | undefined {
    return this.steps[0];
  }

  /**
   * The step to run after `reference`, given the workflow's history: the first step for `null`,
   * undefined after the last. A name this definition no longer has (a deploy removed the step)
   * continues after the most recent step of the history that still exists, or from the first step
   * when none does, so no remaining step is lost and none that ran runs again. `latestDefined` reads
   * that step from the history (given the names that exist), and is called only in that case.
   * WorkflowStore.scheduleNextStep is the one caller: every "skip to the next step" goes through it.
   */
  async stepAfter(
    reference: string | null,
    latestDefined: (stepNames: readonly string[]) => Promise<string | null>,
  ): Promise<StepDefinition | undefined> {
    if (reference === null) return this.steps[0];
    let index = this.indexOf(reference);
    if (index < 0) {
      const anchor = this.steps.length === 0 ? null : await latestDefined(this.stepNames);
      index = anchor === null ? -1 : this.indexOf(anchor);
    }
    return this.steps[index + 1];
  }

  private indexOf(name: string): number {
    return this.steps.findIndex((step) => step.name === name);
  }

  stepBefore(name: string | null): StepDefinition | undefined {
    const index = name === null ? -1 : this.steps.findIndex((step) => step.name === name);
    return index <= 0 ? undefined : this.steps[index - 1];
  }

  get stepNames(): string[] {
    return this.steps.map((step) => step.name);
  }
}

const STEP_OPTION_KEYS = ['name', 'wait', 'waitFor', 'timeout', 'onTimeout', 'skipIf', 'onException', 'maxReattempts', 'terminalAction', 'maxRecoveries', 'before', 'after', 'jobOptions'];
const RESUMABLE_OPTION_KEYS = ['maxIterations', 'maxRuntime'];
const WORKFLOW_OPTION_KEYS = ['name', 'hero', 'cancelIf', 'onException', 'jobOptions', 'mayProceedWithoutHero', 'skipUndefinedSteps'];

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

  // Steps: parents' first, each class in declaration order, then positioned by before/after.
  const declared: Array<{ definition: StepDefinition; before?: string; after?: string }> = [];
  const taken = new Set<string>();
  // Names given explicitly (or method names) anywhere in the chain are reserved up front, so a
  // generated `step_<n>` never takes a name that a later declaration spells out.
  const reserved = new Set(chain.flatMap((cls) => ownStepDeclarations(cls).map((d) => d.options.name ?? d.methodName)));
  for (const cls of chain) {
    for (const declaration of ownStepDeclarations(cls)) {
      const name = stepNameOf(declaration, taken, reserved, declared.length);
      if (taken.has(name)) fail(name, `a step named "${name}" is already defined in ${className}`);
      const stepFail = (problem: string): never => fail(name, problem);
      const { before, after } = declaration.options;
      for (const [key, ref] of [['before', before], ['after', after]] as const) {
        if (ref !== undefined && !taken.has(ref)) {
          stepFail(`${key}: "${ref}" references a non-existent step; only steps declared earlier can be referenced`);
        }
      }
      if (before !== undefined && after !== undefined) stepFail('cannot specify both before and after');
      declared.push({ definition: buildStep(name, declaration, target, stepFail), before, after });
      taken.add(name);
    }
  }
  const ordered: StepDefinition[] = declared.filter((d) => d.before === undefined && d.after === undefined).map((d) => d.definition);
  for (const d of declared) {
    if (d.before !== undefined) ordered.splice(ordered.findIndex((s) => s.name === d.before), 0, d.definition);
    else if (d.after !== undefined) ordered.splice(ordered.findIndex((s) => s.name === d.after) + 1, 0, d.definition);
  }

  return new WorkflowDefinition(
    options.name ?? className,
    target,
    options.hero ?? inherited.findLast((o) => o.hero)?.hero,
    ordered,
    cancelIf,
    policies,
    jobOptions,
    inherited.some((o) => o.mayProceedWithoutHero === true),
    inherited.some((o) => o.skipUndefinedSteps === true),
  );
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

function buildStep(name: string, declaration: StepDeclaration, target: Function, fail: (problem: string) => never): StepDefinition {
  const options = declaration.options as Record<string, unknown> & StepDeclaration['options'];
  const allowed = declaration.resumable ? [...STEP_OPTION_KEYS, ...RESUMABLE_OPTION_KEYS] : STEP_OPTION_KEYS;
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
  });
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

/** Evaluates a condition on a workflow instance. */
export async function evaluateCondition(condition: WorkflowCondition, workflow: any): Promise<boolean> {
  if (typeof condition === 'boolean') return condition;
  if (typeof condition === 'string') return Boolean(await workflow[condition]());
  return Boolean(await condition(workflow));
}
