import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An execution names a step its workflow class neither defines nor declares removed (deleted by a
 * deploy without a gravestone, or the class is gone). Thrown by `resume()` of such a workflow, which
 * then changes nothing: `resumeAt()` moves it to a step that exists. `definedSteps` lists those.
 * @publicApi
 */
export class StepNotDefinedError extends GenevaDriveError {
  constructor(
    readonly workflowType: string,
    readonly stepName: string,
    readonly workflowId: string,
    readonly executionId: string | null,
    readonly definedSteps?: readonly string[],
  ) {
    const where = executionId === null ? `workflow ${workflowId}` : `workflow ${workflowId}, execution ${executionId}`;
    const wayOut =
      definedSteps === undefined
        ? ''
        : `: it defines ${definedSteps.length === 0 ? 'no steps' : definedSteps.map((name) => `"${name}"`).join(', ')}. ` +
          `Move the workflow with WorkflowService.resumeAt(workflow, stepName), or declare the step in @Workflow({ removedSteps })`;
    super(`Step "${stepName}" is not defined in workflow ${workflowType} (${where})${wayOut}`);
  }
}
