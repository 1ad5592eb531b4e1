import type { StepOptions } from './step-options.interface.js';
import type { Duration } from '../util/duration.js';
import { captureCallSite, recordStepDeclaration } from './step-declaration.js';

/** Options of `@ResumableStep()`: every step option, plus the budgets of one execution. @publicApi */
export interface ResumableStepOptions<W = any> extends StepOptions<W> {
  /** Checkpoints per execution before it continues in a successor. */
  maxIterations?: number;
  /** Wall-clock time per execution after which the next checkpoint continues in a successor. */
  maxRuntime?: Duration;
}

/**
 * Declares a step whose method receives a `StepIteration` and may be cut into several executions
 * at its checkpoints, each continuing from the last persisted cursor.
 * @publicApi
 */
export function ResumableStep(options: ResumableStepOptions = {}): MethodDecorator {
  const sourceLocation = captureCallSite();
  return (target, propertyKey) => {
    recordStepDeclaration(target.constructor, { methodName: String(propertyKey), options, resumable: true, sourceLocation });
  };
}
