/**
 * Bad workflow definitions stop the application at boot with a StepConfigurationError naming the
 * class and the step (SPEC §2.2). Validation does not touch the database, so this runs on SQLite
 * only: one boot per bad class.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  addStep,
  ExceptionPolicy,
  GenevaWorkflow,
  Step,
  StepConfigurationError,
  Workflow,
  type Duration,
  type ExceptionAction,
  type StepOptions,
  type WorkflowOptions,
} from 'geneva-drive';
import { WorkflowRegistry } from '../../libs/geneva-drive/src/registry/workflow.registry.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { TestHero } from '../utils/fixtures.js';

// ------------------------------------------------------------------ a valid definition (control)

@Workflow({ hero: () => TestHero, cancelIf: [false, 'isDone', (wf: GoodWorkflow) => wf.hero.canceled] })
class GoodWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ wait: 0, maxRecoveries: 0 }) async a() {}
  @Step({ wait: '15m', skipIf: 'isDone' }) async b() {}
  @Step({ wait: 90_000, onException: 'reattempt', maxReattempts: null, terminalAction: 'cancel', maxRecoveries: null }) async c() {}
  @Step({ waitFor: 'payment_confirmed', onException: new ExceptionPolicy('reattempt', { maxReattempts: 3 }) }) async d() {}
  @Step({ before: 'a', skipIf: true }) async e() {}
  @Step({ after: 'c', onException: (_error, wf: GoodWorkflow) => wf.skip() }) async f() {}
  isDone() {
    return false;
  }
}
addStep(GoodWorkflow, { wait: '1h', run: () => undefined });

// ------------------------------------------------------------------ bad definitions

@Workflow()
class DuplicateStepNames extends GenevaWorkflow<TestHero> {
  @Step({ name: 'charge' }) async chargeCard() {}
  @Step({ name: 'charge' }) async chargeAgain() {}
}

@Workflow()
class DuplicateProgrammaticName extends GenevaWorkflow<TestHero> {
  @Step() async charge() {}
}
addStep(DuplicateProgrammaticName, { name: 'charge', run: () => undefined });

@Workflow()
class UnknownStepOption extends GenevaWorkflow<TestHero> {
  @Step({ wiat: '1h' } as StepOptions) async remind() {}
}

@Workflow()
class WaitNotADuration extends GenevaWorkflow<TestHero> {
  @Step({ wait: 'tomorrow' as Duration }) async remind() {}
}

@Workflow()
class WaitGivenSignalName extends GenevaWorkflow<TestHero> {
  @Step({ wait: 'payment_confirmed' as Duration }) async capture() {}
}

@Workflow()
class WaitNegative extends GenevaWorkflow<TestHero> {
  @Step({ wait: -5 }) async remind() {}
}

@Workflow()
class WaitForDurationString extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: '2d' }) async remind() {}
}

@Workflow()
class WaitForDurationNumber extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 7200 as unknown as string }) async remind() {}
}

@Workflow()
class BeforeUnknownStep extends GenevaWorkflow<TestHero> {
  @Step() async first() {}
  @Step({ before: 'nowhere' }) async second() {}
}

@Workflow()
class BeforeLaterStep extends GenevaWorkflow<TestHero> {
  @Step({ before: 'second' }) async first() {}
  @Step() async second() {}
}

@Workflow()
class AfterUnknownStep extends GenevaWorkflow<TestHero> {
  @Step({ after: 'nowhere' }) async first() {}
}

@Workflow()
class BeforeAndAfter extends GenevaWorkflow<TestHero> {
  @Step() async first() {}
  @Step() async second() {}
  @Step({ before: 'first', after: 'second' }) async third() {}
}

@Workflow()
class SkipIfWrongType extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: 42 as unknown as boolean }) async maybe() {}
}

@Workflow()
class SkipIfUnknownMethod extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: 'noSuchMethod' }) async maybe() {}
}

@Workflow()
class UnknownExceptionAction extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'retry' as ExceptionAction }) async flaky() {}
}

@Workflow()
class MaxReattemptsWithPause extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'pause', maxReattempts: 3 }) async flaky() {}
}

@Workflow()
class MaxReattemptsWithoutPolicy extends GenevaWorkflow<TestHero> {
  @Step({ maxReattempts: 3 }) async flaky() {}
}

@Workflow()
class MaxReattemptsBesidePolicyObject extends GenevaWorkflow<TestHero> {
  @Step({ onException: new ExceptionPolicy('reattempt'), maxReattempts: 3 }) async flaky() {}
}

@Workflow()
class MaxReattemptsZero extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'reattempt', maxReattempts: 0 }) async flaky() {}
}

@Workflow()
class MaxReattemptsFraction extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'reattempt', maxReattempts: 1.5 }) async flaky() {}
}

@Workflow()
class MaxRecoveriesNegative extends GenevaWorkflow<TestHero> {
  @Step({ maxRecoveries: -1 }) async crashy() {}
}

@Workflow()
class MaxRecoveriesFraction extends GenevaWorkflow<TestHero> {
  @Step({ maxRecoveries: 2.5 }) async crashy() {}
}

@Workflow()
class MaxRecoveriesString extends GenevaWorkflow<TestHero> {
  @Step({ maxRecoveries: '3' as never }) async crashy() {}
}

@Workflow()
class TerminalActionWithSkip extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'skip', terminalAction: 'cancel' }) async flaky() {}
}

@Workflow()
class TerminalActionWithoutPolicy extends GenevaWorkflow<TestHero> {
  @Step({ terminalAction: 'cancel' }) async flaky() {}
}

@Workflow()
class TerminalActionUnknown extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'reattempt', terminalAction: 'explode' as 'cancel' }) async flaky() {}
}

@Workflow()
class BadProgrammaticStep extends GenevaWorkflow<TestHero> {}
addStep(BadProgrammaticStep, { wait: 'soon' as Duration, run: () => undefined });

@Workflow()
class NotAGenevaWorkflow {
  @Step() async run() {}
}

@Workflow({ hreo: () => TestHero } as WorkflowOptions)
class UnknownWorkflowOption extends GenevaWorkflow<TestHero> {
  @Step() async run() {}
}

@Workflow({ cancelIf: [42 as unknown as boolean] })
class CancelIfWrongType extends GenevaWorkflow<TestHero> {
  @Step() async run() {}
}

/** [class, step named in the error (undefined: class-level), a fragment of the problem] */
const BAD: Array<[Function, string | undefined, RegExp]> = [
  [DuplicateStepNames, 'charge', /already defined/],
  [DuplicateProgrammaticName, 'charge', /already defined/],
  [UnknownStepOption, 'remind', /unknown step option "wiat"/],
  [WaitNotADuration, 'remind', /wait takes a duration.*"tomorrow"/],
  [WaitGivenSignalName, 'capture', /wait takes a duration .*"payment_confirmed"; to wait for a signal use waitFor/],
  [WaitNegative, 'remind', /wait must be a non-negative duration/],
  [WaitForDurationString, 'remind', /waitFor .*duration "2d"/],
  [WaitForDurationNumber, 'remind', /waitFor .*duration 7200/],
  [BeforeUnknownStep, 'second', /before: "nowhere" references a non-existent step/],
  [BeforeLaterStep, 'first', /before: "second" references a non-existent step; only steps declared earlier/],
  [AfterUnknownStep, 'first', /after: "nowhere" references a non-existent step/],
  [BeforeAndAfter, 'third', /both before and after/],
  [SkipIfWrongType, 'maybe', /skipIf: .*function, a method name or a boolean, got number/],
  [SkipIfUnknownMethod, 'maybe', /skipIf: "noSuchMethod" is not a method/],
  [UnknownExceptionAction, 'flaky', /onException must be one of .*got "retry"/],
  [MaxReattemptsWithPause, 'flaky', /maxReattempts is only allowed with onException 'reattempt', not 'pause'/],
  [MaxReattemptsWithoutPolicy, 'flaky', /maxReattempts needs onException: 'reattempt'/],
  [MaxReattemptsBesidePolicyObject, 'flaky', /maxReattempts belongs on the ExceptionPolicy/],
  [MaxReattemptsZero, 'flaky', /maxReattempts must be a positive integer/],
  [MaxReattemptsFraction, 'flaky', /maxReattempts must be a positive integer/],
  [MaxRecoveriesNegative, 'crashy', /maxRecoveries must be a non-negative integer or null, got -1/],
  [MaxRecoveriesFraction, 'crashy', /maxRecoveries must be a non-negative integer or null, got 2\.5/],
  [MaxRecoveriesString, 'crashy', /maxRecoveries must be a non-negative integer or null, got "3"/],
  [TerminalActionWithSkip, 'flaky', /terminalAction is only allowed with onException 'reattempt', not 'skip'/],
  [TerminalActionWithoutPolicy, 'flaky', /terminalAction needs onException: 'reattempt'/],
  [TerminalActionUnknown, 'flaky', /terminalAction must be 'pause' or 'cancel'/],
  [BadProgrammaticStep, 'step_1', /wait takes a duration.*"soon"/],
  [NotAGenevaWorkflow, undefined, /must extend GenevaWorkflow/],
  [UnknownWorkflowOption, undefined, /unknown @Workflow option "hreo"/],
  [CancelIfWrongType, undefined, /cancelIf: .*got number/],
];

describe('definition validation at boot [sqlite]', () => {
  let good: TestApp;

  beforeAll(async () => {
    good = await createTestApp('sqlite', [GoodWorkflow]);
  });
  afterAll(() => good?.close());

  it('boots a workflow that uses every option correctly (control)', () => {
    const definition = good.moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(GoodWorkflow);
    expect(definition.stepNames).toEqual(['e', 'a', 'b', 'c', 'f', 'd', 'step_7']);
    expect(definition.step('c')?.exceptionPolicy).toMatchObject({ action: 'reattempt', maxReattempts: null, terminalAction: 'cancel' });
    expect(definition.step('b')?.waitMs).toBe(15 * 60_000);
    expect([definition.step('a')?.maxRecoveries, definition.step('b')?.maxRecoveries, definition.step('c')?.maxRecoveries]).toEqual([0, undefined, null]);
  });

  it.each(BAD.map(([cls, ...rest]) => [cls.name, cls, ...rest] as const))('%s fails the boot with StepConfigurationError', async (_name, workflowClass, stepName, problem) => {
    let app: TestApp | undefined;
    let error: unknown;
    try {
      app = await createTestApp('sqlite', [workflowClass as new () => unknown], { prepare: false });
    } catch (thrown) {
      error = thrown;
    } finally {
      await app?.close();
    }
    expect(app).toBeUndefined();
    expect(error).toBeInstanceOf(StepConfigurationError);
    const configError = error as StepConfigurationError;
    expect(configError.workflowClass).toBe(workflowClass.name);
    expect(configError.stepName).toBe(stepName);
    const named = stepName === undefined ? `${workflowClass.name}: ` : `${workflowClass.name}.${stepName}: `;
    expect(configError.message.startsWith(named)).toBe(true);
    expect(configError.message).toMatch(problem);
  });
});
