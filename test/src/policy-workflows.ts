/**
 * Fixture workflows for the exception-policy, instrumentation and logging specs. Bodies record what
 * ran in `policyJournal` and do what `policyPlan` scripts; call `resetPolicies()` in beforeEach.
 *
 * Most classes come from `policyWorkflow(name, ...)`: a step `work` that follows the script under
 * the given step options and class-level policies, then a step `next`.
 */
import type { StepExecution } from 'geneva-drive';
import { ExceptionPolicy, GenevaWorkflow, Step, Workflow, type ClassExceptionPolicy, type StepOptions } from 'geneva-drive';
import { TestHero, UuidHero } from '../utils/fixtures.js';

/** What the bodies, hooks and handlers did, in order. */
export const policyJournal: string[] = [];

export class TransientError extends Error {}
export class FatalError extends Error {}
/** A subclass: matchers for TransientError (class or name) apply to it too. */
export class RateLimitedError extends TransientError {}
export class PreconditionError extends Error {}

/** How an imperative handler (or a body's own catch block) decides. */
export type Decision = 'reattempt' | 'reattempt:30s' | 'cancel' | 'pause' | 'skip' | 'finished' | 'nothing';

/** One run of a scripted body: succeed, call `this.reattempt()`, make another flow-control call, or throw this error. */
export type ScriptItem = 'ok' | 'flow-reattempt' | `flow:${Exclude<Decision, 'nothing'>}` | Error;

interface PolicyPlan {
  /** Consumed one item per body run; when empty, `otherwise` decides. */
  script: ScriptItem[];
  /** Builds the error a body throws once the script is empty; undefined: the body succeeds. */
  otherwise: (() => Error) | undefined;
  /** How many more times the raising skipIf throws before it returns false. */
  preconditionErrors: number;
  /** What handlers and catch blocks decide. */
  decision: Decision;
  /** What each handler received. */
  handled: Array<{ error: unknown; heroName: string; isWorkflow: boolean }>;
}

export const policyPlan: PolicyPlan = { script: [], otherwise: undefined, preconditionErrors: 0, decision: 'nothing', handled: [] };

export function resetPolicies(): void {
  policyJournal.length = 0;
  policyPlan.script = [];
  policyPlan.otherwise = undefined;
  policyPlan.preconditionErrors = 0;
  policyPlan.decision = 'nothing';
  policyPlan.handled = [];
}

/** Makes the flow-control call a decision names (nothing for 'nothing'). */
export function decide(wf: GenevaWorkflow<any>, decision: Decision): void {
  switch (decision) {
    case 'reattempt':
      return wf.reattempt();
    case 'reattempt:30s':
      return wf.reattempt({ wait: '30s' });
    case 'cancel':
      return wf.cancel();
    case 'pause':
      return wf.pause();
    case 'skip':
      return wf.skip();
    case 'finished':
      return wf.finished();
    case 'nothing':
      return;
  }
}

/** An imperative handler: records what it received, then decides as planned. */
export function plannedHandler(error: unknown, wf: GenevaWorkflow<TestHero>): void {
  policyPlan.handled.push({ error, heroName: wf.hero.name, isWorkflow: wf instanceof GenevaWorkflow });
  decide(wf, policyPlan.decision);
}

async function runScript(wf: GenevaWorkflow<any>, label: string): Promise<void> {
  policyJournal.push(label);
  const next: ScriptItem = policyPlan.script.length > 0 ? policyPlan.script.shift()! : (policyPlan.otherwise?.() ?? 'ok');
  if (next === 'flow-reattempt') wf.reattempt();
  if (typeof next === 'string' && next.startsWith('flow:')) decide(wf, next.slice('flow:'.length) as Decision);
  if (next instanceof Error) throw next;
}

/** A skipIf that throws while `policyPlan.preconditionErrors` lasts. */
export const raisingSkipIf = (): boolean => {
  if (policyPlan.preconditionErrors > 0) {
    policyPlan.preconditionErrors--;
    throw new PreconditionError('skipIf exploded');
  }
  return false;
};

export interface PolicyWorkflowOptions {
  classPolicies?: ClassExceptionPolicy[];
  step?: StepOptions;
  /** Give `work` the raising skipIf. */
  raisingSkipIf?: boolean;
}

export type PolicyWorkflowClass = new () => GenevaWorkflow<TestHero>;

/** `work` (scripted, with `options.step`) then `next`, under `options.classPolicies`. */
export function policyWorkflow(name: string, options: PolicyWorkflowOptions = {}): PolicyWorkflowClass {
  const stepOptions: StepOptions = { ...options.step, ...(options.raisingSkipIf ? { skipIf: raisingSkipIf } : {}) };
  @Workflow({ name, hero: () => TestHero, ...(options.classPolicies ? { onException: options.classPolicies } : {}) })
  class PolicyWorkflow extends GenevaWorkflow<TestHero> {
    @Step(stepOptions)
    async work() {
      await runScript(this, `${name}:work`);
    }

    @Step()
    async next() {
      policyJournal.push(`${name}:next`);
    }
  }
  Object.defineProperty(PolicyWorkflow, 'name', { value: name });
  return PolicyWorkflow;
}

// ------------------------------------------------------------------ §11.3 reattempts and limits

/** reattempt_on_exception_integration: a single step under the 'reattempt' string. */
@Workflow({ hero: () => TestHero })
export class SingleReattemptWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'reattempt' })
  async only() {
    await runScript(this, 'only');
  }
}

export const ClassReattemptCancel = policyWorkflow('ClassReattemptCancel', {
  classPolicies: [{ action: 'reattempt', maxReattempts: 2, terminalAction: 'cancel' }],
});
export const ClassReattemptPause = policyWorkflow('ClassReattemptPause', { classPolicies: [{ action: 'reattempt', maxReattempts: 2 }] });
export const StepMax3 = policyWorkflow('StepMax3', { step: { onException: 'reattempt', maxReattempts: 3 } });
export const StepMax1 = policyWorkflow('StepMax1', { step: { onException: 'reattempt', maxReattempts: 1 } });
export const StepMax2Cancel = policyWorkflow('StepMax2Cancel', { step: { onException: 'reattempt', maxReattempts: 2, terminalAction: 'cancel' } });
export const StepUnlimited = policyWorkflow('StepUnlimited', { step: { onException: 'reattempt', maxReattempts: null } });
export const StepMax10 = policyWorkflow('StepMax10', { step: { onException: 'reattempt', maxReattempts: 10 } });
export const SkipIfRaisesMax2 = policyWorkflow('SkipIfRaisesMax2', { step: { onException: 'reattempt', maxReattempts: 2 }, raisingSkipIf: true });
export const FlowReattemptMax2 = policyWorkflow('FlowReattemptMax2', { step: { onException: 'reattempt', maxReattempts: 2 } });
export const ClassMax1 = policyWorkflow('ClassMax1', { classPolicies: [{ action: 'reattempt', maxReattempts: 1 }] });

/** Every form of a reattempt policy without maxReattempts: each must stop after 100. */
export const DEFAULT_LIMIT_FORMS: Array<[string, PolicyWorkflowClass]> = [
  ["step-level 'reattempt'", policyWorkflow('DefaultLimitStepString', { step: { onException: 'reattempt' } })],
  ['step-level ExceptionPolicy', policyWorkflow('DefaultLimitStepPolicy', { step: { onException: new ExceptionPolicy('reattempt') } })],
  ['class-level { action }', policyWorkflow('DefaultLimitClassLiteral', { classPolicies: [{ action: 'reattempt' }] })],
  ['class-level ExceptionPolicy', policyWorkflow('DefaultLimitClassPolicy', { classPolicies: [new ExceptionPolicy('reattempt')] })],
];
export const ClassUnlimited = policyWorkflow('ClassUnlimited', { classPolicies: [new ExceptionPolicy('reattempt', { maxReattempts: null })] });

// ------------------------------------------------------------------ class-level policies and precedence

/** Specific policies by class, by class name and by predicate; no blanket one (the rest pauses). */
export const ClassSpecific = policyWorkflow('ClassSpecific', {
  classPolicies: [
    { action: 'reattempt', on: [TransientError] },
    { action: 'cancel', on: ['FatalError'] },
    new ExceptionPolicy('skip', { on: [(error) => error instanceof Error && error.message === 'skip me'] }),
  ],
});

/**
 * A specific policy declared BEFORE a blanket one, two specific policies for the same class (the
 * later wins), and a later blanket replacing an earlier blanket.
 */
export const ClassPrecedence = policyWorkflow('ClassPrecedence', {
  classPolicies: [
    { action: 'pause' }, // blanket, superseded by the later blanket below
    { action: 'cancel', on: [TransientError] }, // specific, declared before the winning blanket
    { action: 'skip', on: [FatalError] },
    { action: 'cancel', on: ['FatalError'] }, // later specific for FatalError: wins over the skip above
    { action: 'reattempt', maxReattempts: 5 }, // the most recent blanket
  ],
});

const CANCEL_EVERYTHING: ClassExceptionPolicy[] = [{ action: 'cancel' }, { action: 'cancel', on: [Error] }];
export const StepSkipBeatsClass = policyWorkflow('StepSkipBeatsClass', { step: { onException: 'skip' }, classPolicies: [{ action: 'reattempt' }] });
export const StepExplicitPauseBeatsClass = policyWorkflow('StepExplicitPauseBeatsClass', { step: { onException: 'pause' }, classPolicies: CANCEL_EVERYTHING });
export const StepPolicyObjectBeatsClass = policyWorkflow('StepPolicyObjectBeatsClass', {
  step: { onException: new ExceptionPolicy('reattempt') },
  classPolicies: CANCEL_EVERYTHING,
});
export const StepLambdaBeatsClass = policyWorkflow('StepLambdaBeatsClass', {
  step: { onException: (_error, wf) => wf.skip() },
  classPolicies: CANCEL_EVERYTHING,
});

/** A parent with a blanket pause and a child adding a blanket reattempt and a specific cancel. */
@Workflow({ hero: () => TestHero, onException: [{ action: 'pause' }] })
export class PolicyParent extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    await runScript(this, 'PolicyParent:work');
  }
}
@Workflow({ onException: [{ action: 'reattempt', maxReattempts: 3 }, { action: 'cancel', on: [FatalError] }] })
export class PolicyChild extends PolicyParent {}

// ------------------------------------------------------------------ imperative handlers

export const ClassHandler = policyWorkflow('ClassHandler', { classPolicies: [{ handler: plannedHandler }] });
export const StepHandler = policyWorkflow('StepHandler', { step: { onException: plannedHandler } });
/** A class handler scoped to TransientError; everything else falls to the blanket cancel. */
export const ScopedClassHandler = policyWorkflow('ScopedClassHandler', {
  classPolicies: [{ action: 'cancel' }, { on: [TransientError], handler: plannedHandler }],
});
/** The handler runs for a raising skipIf too. */
export const PreconditionHandler = policyWorkflow('PreconditionHandler', { step: { onException: plannedHandler }, raisingSkipIf: true });
/** An imperative handler for a reattempt limit of a later declarative policy: its reattempts count. */
export const HandlerThenLimit = policyWorkflow('HandlerThenLimit', {
  classPolicies: [{ action: 'reattempt', maxReattempts: 2 }, { on: [TransientError], handler: plannedHandler }],
});

/**
 * The same decision made by the body itself: it catches its own error and calls flow control in
 * the catch block (and that call's marker is swallowed by a second try/catch, as careless code would).
 */
@Workflow({ name: 'CatchInBody', hero: () => TestHero })
export class CatchInBodyWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    policyJournal.push('CatchInBody:work');
    try {
      throw new TransientError('handled in the body');
    } catch {
      try {
        decide(this, policyPlan.decision);
      } catch {
        policyJournal.push('CatchInBody:swallowed');
      }
    }
  }

  @Step()
  async next() {
    policyJournal.push('CatchInBody:next');
  }
}
/** The imperative-handler twin of CatchInBodyWorkflow. */
export const HandlerTwin = policyWorkflow('HandlerTwin', { step: { onException: (_error, wf) => decide(wf, policyPlan.decision) } });

// ------------------------------------------------------------------ backoff

/** 10 s × attempt, as a function of the attempt number (class level, for body and precondition errors). */
export const LinearFunctionBackoff = policyWorkflow('LinearFunctionBackoff', {
  classPolicies: [new ExceptionPolicy('reattempt', { wait: (attempt) => attempt * 10_000, maxReattempts: null })],
  raisingSkipIf: true,
});
export const ExponentialBackoff = policyWorkflow('ExponentialBackoff', {
  step: { onException: new ExceptionPolicy('reattempt', { wait: { strategy: 'exponential', delay: '1m', max: '3m' } }) },
});
export const ConstantBackoff = policyWorkflow('ConstantBackoff', { classPolicies: [{ action: 'reattempt', wait: '30s' }] });
export const JitteredBackoff = policyWorkflow('JitteredBackoff', {
  classPolicies: [{ action: 'reattempt', wait: { strategy: 'linear', delay: '1m', jitter: 0.5 } }],
});

// ------------------------------------------------------------------ instrumentation, hooks and logging

/** `work` (scripted, raising skipIf) then `next`, with a cancelIf steered by `instrumentPlan`. */
export const instrumentPlan = { cancel: false, skip: false };

@Workflow({ name: 'Instrumented', hero: () => TestHero, cancelIf: [() => instrumentPlan.cancel] })
export class InstrumentedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: () => raisingSkipIf() || instrumentPlan.skip })
  async work() {
    await runScript(this, 'Instrumented:work');
  }

  @Step()
  async next() {
    policyJournal.push('Instrumented:next');
  }
}

/** Hooks journal around a scripted body (success, flow control or an error). */
@Workflow({ hero: () => TestHero })
export class HookOutcomeWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ onException: plannedHandler })
  async work() {
    await runScript(this, 'body');
  }

  @Step()
  async next() {
    policyJournal.push('next');
  }

  override beforeStepExecution(execution: StepExecution) {
    policyJournal.push(`before:${execution.stepName}`);
  }

  override async aroundStepExecution(execution: StepExecution, run: () => Promise<void>) {
    policyJournal.push(`around-enter:${execution.stepName}`);
    try {
      await run();
    } finally {
      policyJournal.push(`around-exit:${execution.stepName}`);
    }
    return { ignored: true };
  }

  override afterStepExecution(execution: StepExecution) {
    policyJournal.push(`after:${execution.stepName}`);
  }
}

/** Step code logging at every level, then following the script. */
@Workflow({ name: 'Chatty', hero: () => TestHero, onException: [{ action: 'reattempt', maxReattempts: 1 }] })
export class ChattyWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: raisingSkipIf })
  async talk() {
    this.logger.log('step says log');
    this.logger.warn('step says warn');
    this.logger.error('step says error');
    this.logger.debug?.('step says debug');
    await runScript(this, 'Chatty:talk');
  }

  @Step()
  async last() {
    this.logger.log('last step says log');
  }
}

/** A hero with a uuid key: its id appears in every tag. */
@Workflow({ hero: () => UuidHero })
export class UuidChattyWorkflow extends GenevaWorkflow<UuidHero> {
  @Step()
  async talk() {
    this.logger.log(`uuid hero ${this.hero.name}`);
  }
}

/** Parks on `go`, then ends the workflow. */
@Workflow({ name: 'InstrumentedSignal', hero: () => TestHero })
export class InstrumentedSignalWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go' })
  async awaitGo() {
    policyJournal.push(`awaitGo:${String(this.receivedSignal?.name)}`);
  }
}
