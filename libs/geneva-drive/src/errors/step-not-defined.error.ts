import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An execution names a step its workflow class does not define (removed by a deploy, or the class
 * is gone). The execution was marked failed and the workflow paused before this was thrown.
 * @publicApi
 */
export class StepNotDefinedError extends GenevaDriveError {
  constructor(
    readonly workflowType: string,
    readonly stepName: string,
    readonly workflowId: string,
    readonly executionId: string,
  ) {
    super(`Step "${stepName}" is not defined in workflow ${workflowType} (workflow ${workflowId}, execution ${executionId})`);
  }
}
