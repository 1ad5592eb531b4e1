import type { ConcurrencyOptions } from '../workflow/concurrency-options.js';
import type { StepRateLimit } from '../workflow/rate-limit-options.js';
// A workflow class as the engine runs it: its steps in order and what each one needs. Built and
// validated from the decorators by build-definition.ts.
import type { ExceptionPolicy } from '../exception-policy/exception-policy.js';
import type { StepJobOptions, TimeoutAction, WorkflowCondition } from '../workflow/step-options.interface.js';
import type { SignalMatcherLike } from '../workflow/signal-matcher.js';

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
  /** The body runs in a transaction that commits with the outcome (`transactional`). */
  readonly transactional: boolean;
  /** With `transactional`: the longest the body's transaction may last. */
  readonly transactionTimeoutMs: number;
  /** The step's concurrency key and limit (its own, else the workflow's), if any. */
  readonly concurrency: ConcurrencyOptions | undefined;
  /** The step's rate limit (its own, else the workflow's), if any. */
  readonly rateLimit: StepRateLimit | undefined;
}

/** `transactionTimeout` when a transactional step gives none. */
export const DEFAULT_TRANSACTION_TIMEOUT_MS = 30_000;

/** A gravestone (`removedSteps`): a deleted step's name, and the live step its executions continue with (null: the workflow ends). */
export interface RemovedStep {
  readonly name: string;
  readonly next: string | null;
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
    readonly removedSteps: readonly RemovedStep[] = [],
  ) {
    this.byName = new Map(steps.map((step) => [step.name, step]));
    this.removedByName = new Map(removedSteps.map((removed) => [removed.name, removed]));
  }

  private readonly removedByName: ReadonlyMap<string, RemovedStep>;

  step(name: string | null | undefined): StepDefinition | undefined {
    return name == null ? undefined : this.byName.get(name);
  }

  /** The gravestone of this name, when the class declares the step removed. */
  removedStep(name: string | null | undefined): RemovedStep | undefined {
    return name == null ? undefined : this.removedByName.get(name);
  }

  /** Whether code of this class may decide for an execution of the step: it defines the step or declares it removed. */
  knowsStep(name: string): boolean {
    return this.byName.has(name) || this.removedByName.has(name);
  }

  get firstStep(): StepDefinition | undefined {
    return this.steps[0];
  }

  /**
   * The step to run after `reference`, given the workflow's history: the first step for `null`,
   * undefined after the last, the step after its position for a gravestone. A name this definition
   * does not know at all (a deploy deleted the step without a gravestone)
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
    const removed = this.removedByName.get(reference);
    if (removed) return this.step(removed.next);
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

/** Evaluates a condition on a workflow instance. */
/**
 * Whether the step runs none of the application's code before its body — no cancelIf, no skipIf, no
 * rate window to admit it (a `waitFor` step once woken with its signal) — so that its phase 1 may
 * start it without a transaction (PreparePhase.prepareUnlocked).
 */
export function startsWithoutDecisions(definition: WorkflowDefinition, step: StepDefinition): boolean {
  return definition.cancelIf.length === 0 && step.skipIf === undefined && !step.rateLimit;
}

export async function evaluateCondition(condition: WorkflowCondition, workflow: any): Promise<boolean> {
  if (typeof condition === 'boolean') return condition;
  if (typeof condition === 'string') return Boolean(await workflow[condition]());
  return Boolean(await condition(workflow));
}
