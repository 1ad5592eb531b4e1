import type { ProgrammaticStepOptions, StepOptions } from './step-options.interface.js';
import { captureCallSite, recordStepDeclaration } from './step-declaration.js';

/**
 * Declares a workflow step. Steps run in declaration order (parents' first) unless `before`/`after`
 * place them relative to an earlier step. Options are validated when the application boots.
 * @publicApi
 */
export function Step(options: StepOptions = {}): MethodDecorator {
  const sourceLocation = captureCallSite();
  return (target, propertyKey) => {
    recordStepDeclaration(target.constructor, { methodName: String(propertyKey), options, resumable: false, sourceLocation });
  };
}

/**
 * Declares a step without a method, for step lists built in code (a polling ladder, say):
 * `for (const wait of ['1m', '5m', '1h']) addStep(PollWorkflow, { wait, run: (wf) => wf.poll() })`.
 * Without a `name`, steps are named `step_<n>`, never colliding with a declared name.
 * @publicApi
 */
export function addStep<W>(workflowClass: abstract new (...args: any[]) => W, options: ProgrammaticStepOptions<W>): void {
  const { run, ...stepOptions } = options;
  recordStepDeclaration(workflowClass, { run, options: stepOptions, resumable: false, sourceLocation: captureCallSite() });
}
