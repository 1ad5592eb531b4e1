/**
 * Fixture workflows for the core engine specs (executor, flow control, precondition exceptions,
 * after-commit scheduling). Bodies record what ran in `coreJournal`; tests steer what a body does
 * through `corePlan`. Call `resetCore()` in beforeEach.
 */
import type { StepExecution } from 'geneva-drive';
import { addStep, GenevaWorkflow, Step, Workflow, type ExceptionAction } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

/** What the bodies did, in order. */
export const coreJournal: string[] = [];

/** The error bodies throw. */
export class BoomError extends Error {}
/** The error raising preconditions throw. */
export class PreconditionBoom extends Error {}

/** A flow-control call a body makes; `swallow:` wraps it in a try/catch that swallows the marker. */
export type FlowAction = 'pause' | 'skip' | 'cancel' | 'finished' | 'reattempt' | 'reattempt:2h';
export type PlannedFlow = FlowAction | `swallow:${FlowAction}`;

interface CorePlan {
  /** Step name → flow-control call its body makes (FlowWorkflow). */
  flow: Record<string, PlannedFlow | undefined>;
  /** Step name → how many more times its body throws before it succeeds (FlakyWorkflow). */
  failures: Record<string, number>;
  /** Awaited by FlowWorkflow bodies while the workflow is `performing`. */
  duringBody: ((workflow: GenevaWorkflow<TestHero>) => Promise<void>) | undefined;
  /** Whether the raising precondition of the precondition workflows throws. */
  preconditionRaises: boolean;
  /** Body runs of CountingWorkflow.count. */
  bodyRuns: number;
}

export const corePlan: CorePlan = { flow: {}, failures: {}, duringBody: undefined, preconditionRaises: false, bodyRuns: 0 };

export function resetCore(): void {
  coreJournal.length = 0;
  corePlan.flow = {};
  corePlan.failures = {};
  corePlan.duringBody = undefined;
  corePlan.preconditionRaises = false;
  corePlan.bodyRuns = 0;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ------------------------------------------------------------------ executor

/** Three steps, the second after a day. */
@Workflow({ hero: () => TestHero })
export class LinearWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {
    coreJournal.push(`first:${this.hero.name}`);
  }

  @Step({ wait: '1d' })
  async second() {
    coreJournal.push('second');
  }

  @Step()
  async third() {
    coreJournal.push('third');
  }
}

/** skipIf in each of its forms. The hero's name and `active` flag decide. */
@Workflow({ hero: () => TestHero })
export class SkipIfWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: (wf: SkipIfWorkflow) => wf.hero.name === 'skip-by-function' })
  async byFunction() {
    coreJournal.push('byFunction');
  }

  @Step({ skipIf: 'heroIsInactive' })
  async byMethod() {
    coreJournal.push('byMethod');
  }

  @Step({ skipIf: true })
  async always() {
    coreJournal.push('always');
  }

  @Step({ skipIf: false, wait: '3h' })
  async never() {
    coreJournal.push('never');
  }

  @Step({ skipIf: async (wf: SkipIfWorkflow) => wf.hero.name === 'skip-last' })
  async last() {
    coreJournal.push('last');
  }

  async heroIsInactive(): Promise<boolean> {
    return !this.hero.active;
  }
}

/** cancelIf as a function and as a method name. */
@Workflow({ hero: () => TestHero, cancelIf: [(wf: CancelIfWorkflow) => wf.hero.canceled, 'heroIsInactive'] })
export class CancelIfWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async one() {
    coreJournal.push('one');
  }

  @Step()
  async two() {
    coreJournal.push('two');
  }

  heroIsInactive(): boolean {
    return !this.hero.active;
  }
}

/** Keeps running after its hero row is deleted. */
@Workflow({ hero: () => TestHero, mayProceedWithoutHero: true })
export class HeroOptionalWorkflow extends GenevaWorkflow<TestHero | null> {
  @Step()
  async check() {
    coreJournal.push(`hero:${this.hero === null ? 'null' : this.hero.name}`);
  }
}

/** A body that throws BoomError, under the given step policy (none: the default), then a second step. */
function policyWorkflow(name: string, action: ExceptionAction | undefined) {
  @Workflow({ name, hero: () => TestHero })
  class PolicyWorkflow extends GenevaWorkflow<TestHero> {
    @Step(action === undefined ? {} : { onException: action })
    async explode() {
      coreJournal.push(`${name}:explode`);
      throw new BoomError(`boom from ${name}`);
    }

    @Step()
    async after() {
      coreJournal.push(`${name}:after`);
    }
  }
  Object.defineProperty(PolicyWorkflow, 'name', { value: name });
  return PolicyWorkflow;
}

export const DefaultPolicyWorkflow = policyWorkflow('DefaultPolicyWorkflow', undefined);
export const SkipPolicyWorkflow = policyWorkflow('SkipPolicyWorkflow', 'skip');
export const CancelPolicyWorkflow = policyWorkflow('CancelPolicyWorkflow', 'cancel');

/** Counts body runs; the body is slow enough for a second delivery to arrive while it runs. */
@Workflow({ hero: () => TestHero })
export class CountingWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async count() {
    corePlan.bodyRuns++;
    await sleep(50);
  }

  @Step()
  async done() {
    coreJournal.push('done');
  }
}

/** Proves each execution gets a fresh instance: the second step must not see the first one's field. */
@Workflow({ hero: () => TestHero })
export class InstanceWorkflow extends GenevaWorkflow<TestHero> {
  static created = 0;
  readonly serial = ++InstanceWorkflow.created;
  memo: string | undefined;

  @Step()
  async remember() {
    coreJournal.push(`remember:${this.serial}:${this.memo}`);
    this.memo = 'leaked';
  }

  @Step()
  async recall() {
    coreJournal.push(`recall:${this.serial}:${this.memo}`);
  }
}

/**
 * Positioned steps. Declared alpha, beta, gamma(before alpha), delta(after alpha),
 * epsilon(after alpha), zeta(before beta); run order gamma, alpha, epsilon, delta, zeta, beta.
 */
@Workflow({ hero: () => TestHero })
export class OrderedWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async alpha() { coreJournal.push('alpha'); }
  @Step() async beta() { coreJournal.push('beta'); }
  @Step({ before: 'alpha' }) async gamma() { coreJournal.push('gamma'); }
  @Step({ after: 'alpha' }) async delta() { coreJournal.push('delta'); }
  @Step({ after: 'alpha' }) async epsilon() { coreJournal.push('epsilon'); }
  @Step({ before: 'beta' }) async zeta() { coreJournal.push('zeta'); }
}

/** No steps at all: finishes at start. */
@Workflow({ hero: () => TestHero })
export class EmptyWorkflow extends GenevaWorkflow<TestHero> {}

/**
 * A polling ladder built in code. An explicit `step_2` comes first and an explicit `step_4` last, so
 * the generated names of the anonymous steps in between (which would be step_2..step_4 by position)
 * must steer around both.
 */
@Workflow({ hero: () => TestHero })
export class LadderWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ name: 'step_2' }) // source-location: ladder method step
  async kickOff() {
    coreJournal.push('kickOff');
  }

  poll(label: string) {
    coreJournal.push(`poll:${label}`);
  }
}
for (const wait of ['1m', '5m', '1h'] as const) {
  addStep(LadderWorkflow, { wait, run: (wf) => wf.poll(wait) }); // source-location: ladder addStep
}
addStep(LadderWorkflow, { name: 'step_4', run: (wf) => wf.poll('explicit') });

/** Hooks around the body, each journaling the execution it received. */
@Workflow({ hero: () => TestHero })
export class HookedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {
    coreJournal.push('body');
  }

  beforeStepExecution(execution: StepExecution) {
    coreJournal.push(`before:${execution.id}`);
  }

  async aroundStepExecution(execution: StepExecution, run: () => Promise<void>) {
    coreJournal.push(`around-enter:${execution.id}`);
    await run();
    coreJournal.push('around-exit');
    return 'a value the engine must ignore';
  }

  afterStepExecution(execution: StepExecution) {
    coreJournal.push(`after:${execution.id}`);
  }
}

/** Logs from step code. */
@Workflow({ hero: () => TestHero })
export class LoggingWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async speak() {
    this.logger.log('hello from step code');
  }
}

/** A parent workflow: one step, a cancelIf and job options that its child inherits. */
@Workflow({ hero: () => TestHero, cancelIf: [(wf: ParentWorkflow) => wf.hero.canceled], jobOptions: { priority: 5 } })
export class ParentWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async parentStep() {
    coreJournal.push('parentStep');
  }
}

/** Adds its own steps (one placed before the parent's), a cancelIf and job options. */
@Workflow({ cancelIf: ['heroIsInactive'], jobOptions: { lifo: true } })
export class ChildWorkflow extends ParentWorkflow {
  @Step()
  async childStep() {
    coreJournal.push('childStep');
  }

  @Step({ before: 'parentStep' })
  async childFirst() {
    coreJournal.push('childFirst');
  }

  heroIsInactive(): boolean {
    return !this.hero.active;
  }
}

// ------------------------------------------------------------------ flow control and operator actions

/**
 * Three steps (the second after 2 hours) whose bodies make the flow-control call `corePlan.flow`
 * names for them. Each journals `<step>:before`, `<step>:after-call` right after a swallowed call,
 * `<step>:swallowed` in the swallowing catch, and `<step>:after` at its end.
 */
@Workflow({ hero: () => TestHero })
export class FlowWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {
    await this.act('first');
  }

  @Step({ wait: '2h' })
  async second() {
    await this.act('second');
  }

  @Step()
  async lastStep() {
    await this.act('lastStep');
  }

  private async act(step: string): Promise<void> {
    coreJournal.push(`${step}:before`);
    await corePlan.duringBody?.(this);
    const planned = corePlan.flow[step];
    if (planned?.startsWith('swallow:')) {
      try {
        this.callFlow(planned.slice('swallow:'.length) as FlowAction);
        coreJournal.push(`${step}:after-call`);
      } catch {
        coreJournal.push(`${step}:swallowed`);
      }
    } else if (planned) {
      this.callFlow(planned as FlowAction);
    }
    coreJournal.push(`${step}:after`);
  }

  private callFlow(action: FlowAction): never {
    switch (action) {
      case 'pause':
        return this.pause();
      case 'skip':
        return this.skip();
      case 'cancel':
        return this.cancel();
      case 'finished':
        return this.finished();
      case 'reattempt':
        return this.reattempt();
      case 'reattempt:2h':
        return this.reattempt({ wait: '2h' });
    }
  }
}

/** The middle step throws `corePlan.failures.stepTwo` times (default pause policy), then succeeds. */
@Workflow({ hero: () => TestHero })
export class FlakyWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async stepOne() {
    coreJournal.push('stepOne');
  }

  @Step()
  async stepTwo() {
    coreJournal.push('stepTwo');
    if ((corePlan.failures.stepTwo ?? 0) > 0) {
      corePlan.failures.stepTwo--;
      throw new BoomError('stepTwo failed');
    }
  }

  @Step()
  async stepThree() {
    coreJournal.push('stepThree');
  }
}

// ------------------------------------------------------------------ precondition exceptions

const raisingCondition = (): boolean => {
  if (corePlan.preconditionRaises) throw new PreconditionBoom('precondition exploded');
  return false;
};

/** `guarded` has a raising cancelIf (class-level) or skipIf under the given step policy; `following` comes next. */
function preconditionWorkflow(name: string, where: 'cancelIf' | 'skipIf', action: ExceptionAction) {
  @Workflow({ name, hero: () => TestHero, cancelIf: where === 'cancelIf' ? [raisingCondition] : [] })
  class PreconditionWorkflow extends GenevaWorkflow<TestHero> {
    @Step(where === 'skipIf' ? { onException: action, skipIf: raisingCondition } : { onException: action })
    async guarded() {
      coreJournal.push(`${name}:guarded`);
    }

    @Step()
    async following() {
      coreJournal.push(`${name}:following`);
    }
  }
  Object.defineProperty(PreconditionWorkflow, 'name', { value: name });
  return PreconditionWorkflow;
}

export const CancelIfRaisesPause = preconditionWorkflow('CancelIfRaisesPause', 'cancelIf', 'pause');
export const CancelIfRaisesCancel = preconditionWorkflow('CancelIfRaisesCancel', 'cancelIf', 'cancel');
export const CancelIfRaisesReattempt = preconditionWorkflow('CancelIfRaisesReattempt', 'cancelIf', 'reattempt');
export const CancelIfRaisesSkip = preconditionWorkflow('CancelIfRaisesSkip', 'cancelIf', 'skip');
export const SkipIfRaisesPause = preconditionWorkflow('SkipIfRaisesPause', 'skipIf', 'pause');
export const SkipIfRaisesCancel = preconditionWorkflow('SkipIfRaisesCancel', 'skipIf', 'cancel');
export const SkipIfRaisesReattempt = preconditionWorkflow('SkipIfRaisesReattempt', 'skipIf', 'reattempt');
export const SkipIfRaisesSkip = preconditionWorkflow('SkipIfRaisesSkip', 'skipIf', 'skip');

// ------------------------------------------------------------------ after-commit scheduling

/** One immediate step. */
@Workflow({ hero: () => TestHero })
export class SingleStepWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {
    coreJournal.push('only');
  }
}

/** Its first step waits two hours. */
@Workflow({ hero: () => TestHero })
export class DelayedStartWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ wait: '2h' })
  async later() {
    coreJournal.push('later');
  }
}
