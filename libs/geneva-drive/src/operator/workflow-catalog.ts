import { Injectable } from '@nestjs/common';
import { EngineView, type EngineThresholds } from './engine-view.js';
import { describeMatcher } from '../workflow/signal-matcher.js';

/** One step of a workflow class, as an operator sees it. */
export interface StepSummary {
  name: string;
  /** The matcher's description, for a `waitFor` step. */
  waitFor: string | null;
  /** The signal name it listens to, when the matcher has one. */
  signalName: string | null;
  waitMs: number | null;
  resumable: boolean;
  /** Its body's writes through `this.manager` commit with its outcome (`transactional`). */
  transactional: boolean;
  /** A gravestone (`removedSteps`): the name of a deleted step, kept at its position; never run. */
  removed: boolean;
}

/** Whether a class has a step of a name: defined, declared removed, neither; null without the class. */
export type StepStatus = 'defined' | 'removed' | 'not-defined' | null;

/** The engine's workflow definitions and thresholds, as the dashboard and the CLI show them. */
@Injectable()
export class WorkflowCatalog {
  constructor(private readonly engine: EngineView) {}

  /** Registered workflow type names, sorted. */
  types(): string[] {
    return this.definitions().map((definition) => definition.name).sort();
  }

  /** The steps of a type in run order; null when the type has no class in this application. */
  steps(type: string): StepSummary[] | null {
    const definition = this.engine.definition(type);
    if (!definition) return null;
    return definition.steps.map((step) => ({
      name: step.name,
      waitFor: step.waitFor ? describeMatcher(step.waitFor) : null,
      signalName: step.waitFor?.signalName ?? null,
      waitMs: step.waitMs ?? null,
      resumable: step.resumable,
      transactional: step.transactional,
      removed: false,
    }));
  }

  /**
   * The steps of a type and its gravestones, in run order: each gravestone just before the step its
   * executions continue with (at the end when none follows). Null when the type has no class here.
   */
  runOrder(type: string): StepSummary[] | null {
    const steps = this.steps(type);
    const definition = this.engine.definition(type);
    if (!steps || !definition) return null;
    const gravestone = (name: string): StepSummary => ({ name, waitFor: null, signalName: null, waitMs: null, resumable: false, transactional: false, removed: true });
    const before = (next: string | null) => definition.removedSteps.filter((removed) => removed.next === next).map((removed) => gravestone(removed.name));
    return [...steps.flatMap((step) => [...before(step.name), step]), ...before(null)];
  }

  /** Whether the type's class defines the step, declares it removed, or neither; null when the type has no class here. */
  stepStatus(type: string, stepName: string): StepStatus {
    const definition = this.engine.definition(type);
    if (!definition) return null;
    return definition.step(stepName) ? 'defined' : definition.removedStep(stepName) ? 'removed' : 'not-defined';
  }

  /** The signal names the type's `waitFor` steps listen to, in step order, without repeats. */
  signalNames(type: string): string[] {
    return [...new Set((this.steps(type) ?? []).flatMap((step) => (step.signalName ? [step.signalName] : [])))];
  }

  /** Whether some `waitFor` step of the type has a custom matcher without a fixed name. */
  acceptsAnySignalName(type: string): boolean {
    return (this.steps(type) ?? []).some((step) => step.waitFor !== null && step.signalName === null);
  }

  /** Every (type, step) whose `waitFor` listens to `signalName`. */
  stepsWaitingFor(signalName: string): Array<{ type: string; step: string }> {
    return this.definitions().flatMap((definition) =>
      definition.steps.filter((step) => step.waitFor?.signalName === signalName).map((step) => ({ type: definition.name, step: step.name })),
    );
  }

  /** Every signal name some registered step waits for, sorted. */
  allSignalNames(): string[] {
    return [...new Set(this.types().flatMap((type) => this.signalNames(type)))].sort();
  }

  get thresholds(): EngineThresholds {
    return this.engine.thresholds;
  }

  private definitions() {
    return this.engine.definitions();
  }
}
