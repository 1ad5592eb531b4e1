import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An execution names a step its workflow class neither defines nor declares removed, or a class that
 * is not registered here. Two callers:
 * - a job of such an execution (`missing` says what this process lacks): another version of the code
 *   — a worker not yet deployed, or one already replaced — owns it. Nothing was decided: the execution
 *   and its workflow are as they were, and the queue hands the job to a process that has the class and
 *   the step (the local queue drops it: that process runs it from its own rows);
 * - `resume()` of a workflow standing at such a step, or `resumeAt()` to one (`definedSteps` lists the
 *   steps the class defines): nothing was changed; `resumeAt()` moves the workflow to a step that exists.
 * @publicApi
 */
export class StepNotDefinedError extends GenevaDriveError {
  /** What this process lacks: the whole class, or only the step. */
  readonly missing: 'class' | 'step';
  /** The steps the class defines, when the error answers an operator call. */
  readonly definedSteps: readonly string[] | undefined;

  constructor(
    readonly workflowType: string,
    readonly stepName: string,
    readonly workflowId: string,
    readonly executionId: string | null,
    details: { missing?: 'class' | 'step'; definedSteps?: readonly string[] } = {},
  ) {
    const missing = details.missing ?? 'step';
    const where = executionId === null ? `workflow ${workflowId}` : `workflow ${workflowId}, execution ${executionId}`;
    super(
      details.definedSteps !== undefined
        ? `Step "${stepName}" is not defined in workflow ${workflowType} (${where}): it defines ` +
            `${details.definedSteps.length === 0 ? 'no steps' : details.definedSteps.map((name) => `"${name}"`).join(', ')}. ` +
            `Move the workflow with WorkflowService.resumeAt(workflow, stepName), or declare the step in @Workflow({ removedSteps })`
        : missing === 'class'
          ? `Workflow ${workflowType} is not registered in this process (step "${stepName}", ${where}): its job is left to a process that has the class`
          : `Step "${stepName}" is not defined in workflow ${workflowType} in this process (${where}): its job is left to a process that has the step`,
    );
    this.missing = missing;
    this.definedSteps = details.definedSteps;
  }
}
