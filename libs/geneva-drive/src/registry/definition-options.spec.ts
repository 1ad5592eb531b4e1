/**
 * Options of a definition: gravestones (`removedSteps`) — where each stands among the live
 * steps, which live step its executions continue with — and `transactional` / `transactionTimeout`
 * — their defaults; and the declarations of both refused at boot — and the step a fan-in
 * (`childrenOf`) names.
 */
import { describe, expect, it } from '@jest/globals';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { ResumableStep } from '../workflow/resumable-step.decorator.js';
import type { StepIteration } from '../workflow/step-iteration.js';
import { Step } from '../workflow/step.decorator.js';
import { Workflow } from '../workflow/workflow.decorator.js';
import { childrenOf } from '../workflow/children-matcher.js';
import type { WorkflowOptions } from '../workflow/workflow-options.interface.js';
import { buildWorkflowDefinition } from './build-definition.js';
import { DEFAULT_TRANSACTION_TIMEOUT_MS } from './workflow-definition.js';

function threeSteps(options: WorkflowOptions, extra?: (cls: Function) => void): Function {
  @Workflow(options)
  class ThreeSteps extends GenevaWorkflow {
    @Step() async a() {}
    @Step() async b() {}
    @Step() async c() {}
  }
  extra?.(ThreeSteps);
  return ThreeSteps;
}

const refusal = (build: () => unknown): string => {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(StepConfigurationError);
    return (error as Error).message;
  }
  throw new Error('expected a StepConfigurationError');
};

describe('removedSteps', () => {
  it('each gravestone continues with the live step after its position; the live steps keep their order', () => {
    const definition = buildWorkflowDefinition(
      threeSteps({
        removedSteps: [
          { name: 'first', before: 'a' },
          { name: 'middle', after: 'a' },
          { name: 'last', after: 'c' },
          { name: 'chained', after: 'middle' },
        ],
      }),
    );
    expect(definition.stepNames).toEqual(['a', 'b', 'c']);
    expect(definition.removedSteps).toEqual([
      { name: 'first', next: 'a' },
      { name: 'middle', next: 'b' },
      { name: 'chained', next: 'b' },
      { name: 'last', next: null },
    ]);
    expect(definition.removedStep('middle')).toEqual({ name: 'middle', next: 'b' });
    expect(definition.removedStep('b')).toBeUndefined();
    expect([definition.knowsStep('middle'), definition.knowsStep('b'), definition.knowsStep('gone')]).toEqual([true, true, false]);
  });

  it('a step after a gravestone goes where the gravestone stands, and is what the gravestone continues with', async () => {
    @Workflow({ removedSteps: [{ name: 'sendFax', after: 'reserve' }] })
    class Positioned extends GenevaWorkflow {
      @Step() async reserve() {}
      @Step() async bill() {}
      @Step({ after: 'sendFax' }) async ship() {}
    }
    const definition = buildWorkflowDefinition(Positioned);
    expect(definition.stepNames).toEqual(['reserve', 'ship', 'bill']);
    expect(definition.removedStep('sendFax')).toEqual({ name: 'sendFax', next: 'ship' });
    expect((await definition.stepAfter('sendFax', async () => null))?.name).toBe('ship');
    expect((await definition.stepAfter('reserve', async () => null))?.name).toBe('ship');
  });

  it('are inherited, parents first', () => {
    @Workflow({ removedSteps: [{ name: 'old', after: 'a' }] })
    class Parent extends GenevaWorkflow {
      @Step() async a() {}
      @Step() async b() {}
    }
    @Workflow({ removedSteps: [{ name: 'older', before: 'old' }] })
    class Child extends Parent {}
    expect(buildWorkflowDefinition(Child).removedSteps).toEqual([
      { name: 'older', next: 'b' },
      { name: 'old', next: 'b' },
    ]);
  });

  it('refuses a gravestone named like a live step, at boot', () => {
    expect(refusal(() => buildWorkflowDefinition(threeSteps({ removedSteps: [{ name: 'b', after: 'a' }] })))).toMatch(/"b" is both a step and one of removedSteps/);
  });

  it('refuses bad declarations, each with a message that says what to write', () => {
    const bad = (removedSteps: unknown) => refusal(() => buildWorkflowDefinition(threeSteps({ removedSteps } as WorkflowOptions)));
    expect(bad([{ name: 'x' }])).toMatch(/exactly one of after or before/);
    expect(bad([{ name: 'x', after: 'a', before: 'b' }])).toMatch(/exactly one of after or before/);
    expect(bad([{ name: 'x', after: 'nowhere' }])).toMatch(/after: "nowhere" is neither a step nor a removed step/);
    expect(bad([{ name: 'x', after: 'x' }])).toMatch(/relative to itself/);
    expect(bad([{ name: '', after: 'a' }])).toMatch(/name must be a non-empty string/);
    expect(bad([{ name: 'x', after: 'a' }, { name: 'x', before: 'a' }])).toMatch(/"x" is listed twice/);
    expect(bad([{ name: 'x', after: 'a', reason: 'old' }])).toMatch(/unknown key "reason"/);
    expect(bad('x')).toMatch(/must be an array/);
    expect(bad([null])).toMatch(/each entry must be/);
    expect(bad([{ name: 'x', after: 'y' }, { name: 'y', after: 'x' }])).toMatch(/cycle between "x", "y"/);
  });

  it('a step may name a gravestone in before/after; any other unknown name is still refused', () => {
    const build = (after: string) => () => {
      @Workflow({ removedSteps: [{ name: 'gone', after: 'a' }] })
      class Refs extends GenevaWorkflow {
        @Step() async a() {}
        @Step({ after }) async b() {}
      }
      return buildWorkflowDefinition(Refs);
    };
    expect(build('gone')().stepNames).toEqual(['a', 'b']);
    expect(refusal(build('typo'))).toMatch(/after: "typo" references a non-existent step/);
  });
});

describe('transactional steps in a definition', () => {
  it('are off by default; a step opts in, with a timeout of its own or the default', () => {
    @Workflow()
    class Steps extends GenevaWorkflow {
      @Step() async plain() {}
      @Step({ transactional: true }) async booked() {}
      @Step({ transactional: true, transactionTimeout: '2s' }) async quick() {}
    }
    const steps = buildWorkflowDefinition(Steps).steps.map((s) => [s.name, s.transactional, s.transactionTimeoutMs]);
    expect(steps).toEqual([
      ['plain', false, DEFAULT_TRANSACTION_TIMEOUT_MS],
      ['booked', true, DEFAULT_TRANSACTION_TIMEOUT_MS],
      ['quick', true, 2000],
    ]);
  });

  it('the class default applies to its steps, resumable ones included, which may opt out', () => {
    @Workflow({ transactional: true })
    class Booked extends GenevaWorkflow {
      @Step() async one() {}
      @Step({ transactional: false }) async two() {}
      @ResumableStep() async three(_iteration: StepIteration) {}
      @ResumableStep({ transactional: false }) async four(_iteration: StepIteration) {}
    }
    expect(buildWorkflowDefinition(Booked).steps.map((s) => s.transactional)).toEqual([true, false, true, false]);
  });

  it('refuses what cannot work, at boot', () => {
    const bad = (options: object) => () => {
      @Workflow()
      class Bad extends GenevaWorkflow {
        @Step(options) async one() {}
      }
      return buildWorkflowDefinition(Bad);
    };
    expect(refusal(bad({ transactionTimeout: '5s' }))).toMatch(/transactionTimeout needs transactional: true/);
    expect(refusal(bad({ transactional: true, transactionTimeout: 0 }))).toMatch(/transactionTimeout must be a positive duration/);
    expect(refusal(bad({ transactional: 'yes' }))).toMatch(/transactional must be true or false/);
    expect(
      refusal(() => {
        @Workflow({ transactional: 1 } as object)
        class Flagged extends GenevaWorkflow {}
        return buildWorkflowDefinition(Flagged);
      }),
    ).toMatch(/transactional must be true or false/);
  });
});

describe('childrenOf', () => {
  const fanIn = (from: string, removedSteps?: WorkflowOptions['removedSteps']) => {
    @Workflow(removedSteps ? { removedSteps } : {})
    class FanIn extends GenevaWorkflow {
      @Step() async fanOut() {}
      @Step({ waitFor: childrenOf(from) }) async fanIn() {}
    }
    return FanIn;
  };

  it('a fan-in names a step of the workflow, or a removed one', () => {
    expect(buildWorkflowDefinition(fanIn('fanOut')).step('fanIn')?.waitFor).toMatchObject({ stepName: 'fanOut' });
    expect(buildWorkflowDefinition(fanIn('oldFanOut', [{ name: 'oldFanOut', before: 'fanOut' }])).step('fanIn')?.waitFor).toMatchObject({ stepName: 'oldFanOut' });
  });

  it('refuses at boot a fan-in naming no step of the workflow, or itself', () => {
    expect(refusal(() => buildWorkflowDefinition(fanIn('fanout')))).toMatch(/fanIn.*childrenOf\("fanout"\) names no step of FanIn/);
    expect(refusal(() => buildWorkflowDefinition(fanIn('fanIn')))).toMatch(/childrenOf\("fanIn"\) names the step itself/);
  });
});

describe('concurrency', () => {
  const key = () => 'k';

  it("a step's own replaces the workflow's, which every other step takes", () => {
    @Workflow({ concurrency: { key, limit: 2 } })
    class Keyed extends GenevaWorkflow {
      @Step() async a() {}
      @Step({ concurrency: { key, limit: 1 } }) async b() {}
    }
    const definition = buildWorkflowDefinition(Keyed);
    expect(definition.step('a')?.concurrency).toEqual({ key, limit: 2 });
    expect(definition.step('b')?.concurrency).toEqual({ key, limit: 1 });
    expect(buildWorkflowDefinition(threeSteps({})).step('a')?.concurrency).toBeUndefined();
  });

  it('refuses at boot a limit that is not a positive integer, a key that is not a function, an unknown option', () => {
    const stepWith = (concurrency: unknown) => {
      @Workflow()
      class Bad extends GenevaWorkflow {
        @Step({ concurrency } as never) async a() {}
      }
      return Bad;
    };
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 0 })))).toMatch(/concurrency: limit must be a positive integer, got 0/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1.5 })))).toMatch(/limit must be a positive integer, got 1.5/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key: 'k', limit: 1 })))).toMatch(/key must be a function/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1, per: '1m' })))).toMatch(/unknown key "per"/);
    expect(refusal(() => buildWorkflowDefinition(threeSteps({ concurrency: { key, limit: -1 } })))).toMatch(/concurrency: limit must be a positive integer/);
  });
});

describe('rateLimit', () => {
  const key = () => 'k';

  it("a step's own replaces the workflow's, which every other step takes; the window in milliseconds", () => {
    @Workflow({ rateLimit: { key, limit: 100, per: '1m' } })
    class Paced extends GenevaWorkflow {
      @Step() async a() {}
      @Step({ rateLimit: { key, limit: 1, per: 500 } }) async b() {}
    }
    const definition = buildWorkflowDefinition(Paced);
    expect(definition.step('a')?.rateLimit).toEqual({ key, limit: 100, perMs: 60_000 });
    expect(definition.step('b')?.rateLimit).toEqual({ key, limit: 1, perMs: 500 });
    expect(buildWorkflowDefinition(threeSteps({})).step('a')?.rateLimit).toBeUndefined();
  });

  it('refuses at boot a limit that is not a positive integer, a window that is not a positive duration, a key that is not a function, an unknown option', () => {
    const stepWith = (rateLimit: unknown) => {
      @Workflow()
      class Bad extends GenevaWorkflow {
        @Step({ rateLimit } as never) async a() {}
      }
      return Bad;
    };
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 0, per: '1m' })))).toMatch(/rateLimit: limit must be a positive integer, got 0/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1 })))).toMatch(/rateLimit: per must be a positive duration \(ms or '1m'\), got undefined/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1, per: 0 })))).toMatch(/per must be a positive duration/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1, per: 'soon' })))).toMatch(/per must be a positive duration \(ms or '1m'\), got "soon"/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key: 'k', limit: 1, per: '1m' })))).toMatch(/rateLimit: key must be a function/);
    expect(refusal(() => buildWorkflowDefinition(stepWith({ key, limit: 1, per: '1m', burst: 2 })))).toMatch(/unknown key "burst"/);
    expect(refusal(() => buildWorkflowDefinition(threeSteps({ rateLimit: { key, limit: 1, per: -5 } })))).toMatch(/rateLimit: per must be a positive duration/);
  });
});
