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
}

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
    }));
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
