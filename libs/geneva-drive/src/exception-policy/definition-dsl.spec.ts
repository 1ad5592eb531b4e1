/**
 * The definition DSL as the registry builds it, without a database (upstream step_definition_test.rb,
 * step_level_exception_policy_test.rb, class_level_on_exception_test.rb and step_ordering_test.rb,
 * adapted). Boot-time refusals already covered end to end by test/e2e/definition-validation.e2e-spec.ts
 * are not repeated here; the remaining refusals are checked on the definition builder directly.
 * Kept whole (over 400 lines): it follows the upstream tests it adapts, one describe each, so that
 * each upstream rule is found beside its port.
 */
import 'reflect-metadata';
import { describe, expect, it } from '@jest/globals';
import { addStep } from '../workflow/step.decorator.js';
import { Workflow } from '../workflow/workflow.decorator.js';
import { Step } from '../workflow/step.decorator.js';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import type { StepOptions } from '../workflow/step-options.interface.js';
import type { ClassExceptionPolicy } from '../workflow/workflow-options.interface.js';
import { buildWorkflowDefinition } from '../registry/build-definition.js';
import { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { DEFAULT_MAX_REATTEMPTS, ExceptionPolicy, PAUSE_POLICY, resolveExceptionPolicy, type ExceptionAction } from './exception-policy.js';

class TransientError extends Error {}
class FatalError extends Error {}

/** A fresh workflow class with one method step `flaky` declared with `options`. */
function withStep(options: StepOptions, name = 'Subject') {
  @Workflow()
  class Subject extends GenevaWorkflow {
    @Step(options)
    async flaky() {}
  }
  Object.defineProperty(Subject, 'name', { value: name });
  return Subject;
}

/** A fresh workflow class with one step and the given class-level policies. */
function withClassPolicies(onException: ClassExceptionPolicy[], name = 'Subject') {
  @Workflow({ onException })
  class Subject extends GenevaWorkflow {
    @Step()
    async work() {}
  }
  Object.defineProperty(Subject, 'name', { value: name });
  return Subject;
}

const stepOf = (target: Function, name = 'flaky') => buildWorkflowDefinition(target).step(name)!;
const refusal = (target: Function): StepConfigurationError => {
  try {
    buildWorkflowDefinition(target);
  } catch (error) {
    expect(error).toBeInstanceOf(StepConfigurationError);
    return error as StepConfigurationError;
  }
  throw new Error(`expected ${target.name} to be refused`);
};

describe('step definitions', () => {
  it('a method step is named after its method and runs it on the instance', async () => {
    const calls: unknown[] = [];
    @Workflow()
    class MethodStep extends GenevaWorkflow {
      @Step()
      async charge() {
        calls.push(this);
      }
    }
    const definition = buildWorkflowDefinition(MethodStep);
    expect(definition.stepNames).toEqual(['charge']);
    const instance = new MethodStep();
    await definition.step('charge')!.invoke(instance);
    expect(calls).toEqual([instance]);
  });

  it('a programmatic step with a name registers exactly one definition carrying it', () => {
    @Workflow()
    class Programmatic extends GenevaWorkflow {}
    addStep(Programmatic, { name: 'notify', run: () => undefined });
    const definition = buildWorkflowDefinition(Programmatic);
    expect(definition.stepNames).toEqual(['notify']);
    expect(definition.steps).toHaveLength(1);
  });

  it('a programmatic step without a run function is refused ("needs a method or a run function")', () => {
    @Workflow()
    class NoBody extends GenevaWorkflow {}
    addStep(NoBody, { name: 'nothing' } as never);
    const error = refusal(NoBody);
    expect(error.stepName).toBe('nothing');
    expect(error.problem).toMatch(/run function/);
  });

  it('after one named step, two anonymous steps are named step_2 and step_3', () => {
    @Workflow()
    class Anonymous extends GenevaWorkflow {
      @Step()
      async first() {}
    }
    addStep(Anonymous, { run: () => undefined });
    addStep(Anonymous, { run: () => undefined });
    expect(buildWorkflowDefinition(Anonymous).stepNames).toEqual(['first', 'step_2', 'step_3']);
  });

  it('wait absent, 2 hours and 0 read back as undefined, 7 200 000 ms and 0', () => {
    @Workflow()
    class Waits extends GenevaWorkflow {
      @Step() async none() {}
      @Step({ wait: '2h' }) async twoHours() {}
      @Step({ wait: 0 }) async zero() {}
    }
    expect(buildWorkflowDefinition(Waits).steps.map((s) => s.waitMs)).toEqual([undefined, 7_200_000, 0]);
  });

  it('the four onException strings are accepted and read back in order', () => {
    @Workflow()
    class FourActions extends GenevaWorkflow {
      @Step({ onException: 'pause' }) async a() {}
      @Step({ onException: 'cancel' }) async b() {}
      @Step({ onException: 'reattempt' }) async c() {}
      @Step({ onException: 'skip' }) async d() {}
    }
    const steps = buildWorkflowDefinition(FourActions).steps;
    expect(steps.map((s) => s.exceptionPolicy.action)).toEqual(['pause', 'cancel', 'reattempt', 'skip']);
    expect(steps.every((s) => s.hasExplicitPolicy)).toBe(true);
  });

  it("without onException the action reads 'pause' and is not explicit (class-level policies may win)", () => {
    const step = stepOf(withStep({}));
    expect(step.exceptionPolicy.action).toBe('pause');
    expect(step.exceptionPolicy).toBe(PAUSE_POLICY);
    expect(step.hasExplicitPolicy).toBe(false);
  });

  it('skipIf accepts a method name, a function, true, false, or nothing', () => {
    const condition = () => true;
    @Workflow()
    class Conditions extends GenevaWorkflow {
      @Step({ skipIf: 'isDone' }) async a() {}
      @Step({ skipIf: condition }) async b() {}
      @Step({ skipIf: true }) async c() {}
      @Step({ skipIf: false }) async d() {}
      @Step() async e() {}
      isDone() {
        return false;
      }
    }
    expect(buildWorkflowDefinition(Conditions).steps.map((s) => s.skipIf)).toEqual(['isDone', condition, true, false, undefined]);
  });

  it('a subclass lists the parent’s steps first, and leaves the parent’s list unchanged', () => {
    @Workflow()
    class Parent extends GenevaWorkflow {
      @Step() async parentStep() {}
    }
    @Workflow()
    class Child extends Parent {
      @Step() async childStep() {}
    }
    expect(buildWorkflowDefinition(Child).stepNames).toEqual(['parentStep', 'childStep']);
    expect(buildWorkflowDefinition(Parent).stepNames).toEqual(['parentStep']);
  });

  it('wait, skipIf and onException given together are all readable', () => {
    const step = stepOf(withStep({ wait: '5m', skipIf: true, onException: 'skip' }));
    expect(step).toMatchObject({ waitMs: 300_000, skipIf: true, hasExplicitPolicy: true });
    expect(step.exceptionPolicy.action).toBe('skip');
  });

  it("onException 'reattempt' alone: maxReattempts 100", () => {
    expect(stepOf(withStep({ onException: 'reattempt' })).exceptionPolicy.maxReattempts).toBe(100);
  });

  it.each(['pause', 'cancel', 'skip'] as const)("onException '%s': maxReattempts null", (action) => {
    expect(stepOf(withStep({ onException: action })).exceptionPolicy.maxReattempts).toBeNull();
  });

  it("'reattempt' with maxReattempts 5 → 5; with null → unlimited", () => {
    expect(stepOf(withStep({ onException: 'reattempt', maxReattempts: 5 })).exceptionPolicy.maxReattempts).toBe(5);
    expect(stepOf(withStep({ onException: 'reattempt', maxReattempts: null })).exceptionPolicy.maxReattempts).toBeNull();
  });

  it('maxReattempts -5 is refused', () => {
    expect(refusal(withStep({ onException: 'reattempt', maxReattempts: -5 })).problem).toMatch(/maxReattempts must be a positive integer or null/);
  });
});

describe('step-level exception policies', () => {
  it('an ExceptionPolicy object is stored as is and is explicit', () => {
    const policy = new ExceptionPolicy('reattempt', { wait: '1m', maxReattempts: 4 });
    const step = stepOf(withStep({ onException: policy }));
    expect(step.exceptionPolicy).toBe(policy);
    expect(step.exceptionPolicy.action).toBe('reattempt');
    expect(step.hasExplicitPolicy).toBe(true);
  });

  it('a handler function becomes an imperative policy: no action, explicit, the same function', () => {
    const handler = (_error: unknown, wf: GenevaWorkflow) => wf.skip();
    const step = stepOf(withStep({ onException: handler }));
    expect(step.exceptionPolicy.action).toBeUndefined();
    expect(step.exceptionPolicy.isImperative).toBe(true);
    expect(step.exceptionPolicy.handler).toBe(handler);
    expect(step.hasExplicitPolicy).toBe(true);
  });

  it("'skip' is explicit; an explicit 'pause' is explicit too", () => {
    expect(stepOf(withStep({ onException: 'skip' }))).toMatchObject({ hasExplicitPolicy: true });
    const pause = stepOf(withStep({ onException: 'pause' }));
    expect(pause.hasExplicitPolicy).toBe(true);
    expect(pause.exceptionPolicy.action).toBe('pause');
  });

  it("'reattempt' with maxReattempts 7 builds a policy with that limit; with terminalAction 'cancel' too", () => {
    const seven = stepOf(withStep({ onException: 'reattempt', maxReattempts: 7 })).exceptionPolicy;
    expect(seven).toBeInstanceOf(ExceptionPolicy);
    expect(seven).toMatchObject({ action: 'reattempt', maxReattempts: 7, terminalAction: 'pause' });
    const cancel = stepOf(withStep({ onException: 'reattempt', maxReattempts: 3, terminalAction: 'cancel' })).exceptionPolicy;
    expect(cancel).toMatchObject({ action: 'reattempt', maxReattempts: 3, terminalAction: 'cancel' });
  });

  it.each([
    ['a handler and maxReattempts', { onException: () => undefined, maxReattempts: 3 }, /maxReattempts belongs on the ExceptionPolicy or handler/],
    ['a handler and terminalAction', { onException: () => undefined, terminalAction: 'cancel' }, /terminalAction belongs on the ExceptionPolicy or handler/],
    ['a policy object and terminalAction', { onException: new ExceptionPolicy('reattempt'), terminalAction: 'cancel' }, /terminalAction belongs on the ExceptionPolicy/],
    ["'pause' and terminalAction", { onException: 'pause', terminalAction: 'cancel' }, /terminalAction is only allowed with onException 'reattempt', not 'pause'/],
    ['a number', { onException: 42 as never }, /onException must be one of pause, cancel, reattempt, skip, an ExceptionPolicy or a handler function/],
    ['an options literal', { onException: { action: 'skip' } as never }, /an ExceptionPolicy or a handler function/],
  ] as Array<[string, StepOptions, RegExp]>)('%s is refused, naming the class and the step', (_what, options, problem) => {
    const error = refusal(withStep(options, 'Refused'));
    expect(error.workflowClass).toBe('Refused');
    expect(error.stepName).toBe('flaky');
    expect(error.problem).toMatch(problem);
  });
});

describe('class-level onException', () => {
  it('{ action: reattempt, maxReattempts: 3 } registers one blanket policy with those values', () => {
    const [policy, ...rest] = buildWorkflowDefinition(withClassPolicies([{ action: 'reattempt', maxReattempts: 3 }])).exceptionPolicies;
    expect(rest).toEqual([]);
    expect(policy).toMatchObject({ action: 'reattempt', maxReattempts: 3, terminalAction: 'pause', isSpecific: false });
  });

  it("{ action: 'reattempt' } without maxReattempts is bounded by the default 100 (SPEC §5), null unbounded", () => {
    const [bounded, unbounded] = buildWorkflowDefinition(withClassPolicies([{ action: 'reattempt' }, { action: 'reattempt', on: [TransientError], maxReattempts: null }])).exceptionPolicies;
    expect(bounded.maxReattempts).toBe(DEFAULT_MAX_REATTEMPTS);
    expect(unbounded.maxReattempts).toBeNull();
  });

  it('{ action, on: [A, B] } registers one specific policy with both matchers in order', () => {
    const [policy] = buildWorkflowDefinition(withClassPolicies([{ action: 'cancel', on: [TypeError, RangeError] }])).exceptionPolicies;
    expect(policy.isSpecific).toBe(true);
    expect(policy.matchers).toEqual([TypeError, RangeError]);
    expect(policy.action).toBe('cancel');
  });

  it('stores wait and terminalAction', () => {
    const [policy] = buildWorkflowDefinition(withClassPolicies([{ action: 'reattempt', wait: '15s', terminalAction: 'cancel' }])).exceptionPolicies;
    expect(policy).toMatchObject({ wait: '15s', terminalAction: 'cancel' });
  });

  it('{ on, handler } registers an imperative policy with those matchers', () => {
    const handler = () => undefined;
    const [policy] = buildWorkflowDefinition(withClassPolicies([{ on: [RangeError], handler }])).exceptionPolicies;
    expect(policy.isImperative).toBe(true);
    expect(policy.handler).toBe(handler);
    expect(policy.matchers).toEqual([RangeError]);
  });

  it('an ExceptionPolicy object is accepted as is (SPEC §5)', () => {
    const shared = new ExceptionPolicy('reattempt', { on: ['TransientError'], wait: '1m' });
    const [policy] = buildWorkflowDefinition(withClassPolicies([shared])).exceptionPolicies;
    expect(policy).toBe(shared);
  });

  it('a class name string becomes a specific matcher; a predicate works as a matcher', () => {
    const [byName, byPredicate] = buildWorkflowDefinition(
      withClassPolicies([
        { action: 'cancel', on: ['FatalError'] },
        { action: 'skip', on: [(error) => error instanceof Error && /timeout/.test(error.message)] },
      ]),
    ).exceptionPolicies;
    expect(byName.isSpecific).toBe(true);
    expect(byName.matches(new FatalError('f'))).toBe(true);
    expect(byName.matches(new TransientError('t'))).toBe(false);
    expect(byPredicate.matches(new Error('read timeout'))).toBe(true);
    expect(byPredicate.matches(new Error('boom'))).toBe(false);
  });

  it.each([
    ['a class that is not an Error as matcher', [{ action: 'cancel', on: [class Plain {}] }], /onException: .*Error class/],
    ['String as matcher', [{ action: 'cancel', on: [String] }], /onException: .*Error class/],
    ['both a handler and an action', [{ action: 'cancel', handler: (): void => undefined }], /onException: unknown option "action"/],
    ['neither an action nor a handler', [{ on: [TypeError] }], /onException: each entry needs an action or a handler/],
    ['an invalid policy (wait on skip)', [{ action: 'skip', wait: '1s' }], /onException: wait is only allowed with 'reattempt'/],
    ['a handler with maxReattempts', [{ handler: (): void => undefined, maxReattempts: 2 }], /onException: an imperative handler decides/],
    ['an unknown action', [{ action: 'retry' as ExceptionAction }], /onException: action must be one of/],
    ['a bare string', ['reattempt'], /onException: each entry must be an ExceptionPolicy/],
  ] as Array<[string, unknown[], RegExp]>)('%s is refused at boot, naming the class', (_what, policies, problem) => {
    const error = refusal(withClassPolicies(policies as ClassExceptionPolicy[], 'BadPolicies'));
    expect(error.workflowClass).toBe('BadPolicies');
    expect(error.stepName).toBeUndefined();
    expect(error.message).toMatch(problem);
  });

  it('a subclass appends its policies after its parent’s; the parent keeps its own', () => {
    @Workflow({ onException: [{ action: 'pause' }] })
    class Parent extends GenevaWorkflow {
      @Step() async work() {}
    }
    @Workflow({ onException: [{ action: 'reattempt', maxReattempts: 3 }] })
    class Child extends Parent {}
    const parent = buildWorkflowDefinition(Parent).exceptionPolicies;
    const child = buildWorkflowDefinition(Child).exceptionPolicies;
    expect(parent.map((p) => p.action)).toEqual(['pause']);
    expect(child.map((p) => p.action)).toEqual(['pause', 'reattempt']);
    // So the child's blanket wins for the child, the parent's for the parent.
    const step = buildWorkflowDefinition(Child).step('work');
    expect(resolveExceptionPolicy(step, child, new Error('e')).action).toBe('reattempt');
    expect(resolveExceptionPolicy(buildWorkflowDefinition(Parent).step('work'), parent, new Error('e')).action).toBe('pause');
  });

  it('a child’s specific policy beats the parent’s blanket for a matching error only', () => {
    @Workflow({ onException: [{ action: 'pause' }] })
    class Parent extends GenevaWorkflow {
      @Step() async work() {}
    }
    @Workflow({ onException: [{ action: 'cancel', on: [FatalError] }] })
    class Child extends Parent {}
    const definition = buildWorkflowDefinition(Child);
    const step = definition.step('work');
    expect(resolveExceptionPolicy(step, definition.exceptionPolicies, new FatalError('f')).action).toBe('cancel');
    expect(resolveExceptionPolicy(step, definition.exceptionPolicies, new TransientError('t')).action).toBe('pause');
  });

  it("a step's explicit policy wins over the class-level ones; the implicit default does not", () => {
    @Workflow({ onException: [{ action: 'cancel' }, { action: 'reattempt', on: [TransientError] }] })
    class Mixed extends GenevaWorkflow {
      @Step({ onException: 'skip' }) async explicit() {}
      @Step() async implicit() {}
    }
    const definition = buildWorkflowDefinition(Mixed);
    const resolve = (step: string, error: unknown) => resolveExceptionPolicy(definition.step(step), definition.exceptionPolicies, error).action;
    expect(resolve('explicit', new TransientError('t'))).toBe('skip');
    expect(resolve('explicit', new Error('e'))).toBe('skip');
    expect(resolve('implicit', new TransientError('t'))).toBe('reattempt');
    expect(resolve('implicit', new Error('e'))).toBe('cancel');
  });
});

describe('step ordering', () => {
  it('keeps declaration order for unpositioned steps; after: the last step appends', () => {
    @Workflow()
    class Plain extends GenevaWorkflow {
      @Step() async a() {}
      @Step() async b() {}
      @Step() async c() {}
      @Step({ after: 'c' }) async d() {}
    }
    expect(buildWorkflowDefinition(Plain).stepNames).toEqual(['a', 'b', 'c', 'd']);
  });

  it('before: and after: the same anchor surround it; waits and options survive positioning', () => {
    @Workflow()
    class Around extends GenevaWorkflow {
      @Step({ wait: '1m' }) async first() {}
      @Step() async middle() {}
      @Step() async last() {}
      @Step({ before: 'middle', wait: '5m', onException: 'skip' }) async beforeMiddle() {}
      @Step({ after: 'middle', wait: '10m' }) async afterMiddle() {}
    }
    const definition = buildWorkflowDefinition(Around);
    expect(definition.stepNames).toEqual(['first', 'beforeMiddle', 'middle', 'afterMiddle', 'last']);
    expect(definition.steps.map((s) => s.waitMs)).toEqual([60_000, 300_000, undefined, 600_000, undefined]);
    expect(definition.step('beforeMiddle')!.exceptionPolicy.action).toBe('skip');
  });

  it('an anonymous positioned programmatic step is named by position and sits where it was put', () => {
    @Workflow()
    class Programmatic extends GenevaWorkflow {
      @Step() async first() {}
      @Step() async third() {}
    }
    addStep(Programmatic, { before: 'third', run: () => undefined });
    expect(buildWorkflowDefinition(Programmatic).stepNames).toEqual(['first', 'step_3', 'third']);
  });

  it('a child positions its steps around the parent’s', () => {
    @Workflow()
    class Parent extends GenevaWorkflow {
      @Step() async parentFirst() {}
      @Step() async parentLast() {}
    }
    @Workflow()
    class Child extends Parent {
      @Step({ before: 'parentFirst' }) async childBefore() {}
      @Step({ after: 'parentFirst' }) async childMiddle() {}
      @Step({ after: 'parentLast' }) async childAfter() {}
    }
    expect(buildWorkflowDefinition(Child).stepNames).toEqual(['childBefore', 'parentFirst', 'childMiddle', 'parentLast', 'childAfter']);
    expect(buildWorkflowDefinition(Parent).stepNames).toEqual(['parentFirst', 'parentLast']);
  });

  it('stepAfter and stepBefore follow the ordered sequence', async () => {
    @Workflow()
    class Ordered extends GenevaWorkflow {
      @Step() async one() {}
      @Step() async three() {}
      @Step({ before: 'three' }) async two() {}
    }
    const definition = buildWorkflowDefinition(Ordered);
    const noHistory = async () => {
      throw new Error('the history is read only for a name the definition does not have');
    };
    const after = async (name: string | null) => (await definition.stepAfter(name, noHistory))?.name;
    const before = (name: string | null) => definition.stepBefore(name)?.name;
    expect([await after(null), await after('one'), await after('two'), await after('three')]).toEqual(['one', 'two', 'three', undefined]);
    // A removed step: after the most recent step of the history that still exists, else from the first.
    const asked: (readonly string[])[] = [];
    const historyAt = (latest: string | null) => async (names: readonly string[]) => (asked.push(names), latest);
    expect((await definition.stepAfter('removed', historyAt('one')))?.name).toBe('two');
    expect((await definition.stepAfter('removed', historyAt('three')))?.name).toBeUndefined();
    expect((await definition.stepAfter('removed', historyAt(null)))?.name).toBe('one');
    expect(asked[0]).toEqual(['one', 'two', 'three']);
    expect([before(null), before('one'), before('two'), before('three'), before('unknown')]).toEqual([undefined, undefined, 'one', 'two', undefined]);
    expect(definition.firstStep?.name).toBe('one');
    expect(definition.step('two')?.name).toBe('two');
    expect(definition.step('nope')).toBeUndefined();
    expect(definition.step(null)).toBeUndefined();
  });
});
