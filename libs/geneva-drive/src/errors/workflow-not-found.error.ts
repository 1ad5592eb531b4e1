import { GenevaDriveError } from './geneva-drive.error.js';

/** No workflow row has the given id. @publicApi */
export class WorkflowNotFoundError extends GenevaDriveError {
  constructor(readonly workflowId: string) {
    super(`Workflow ${workflowId} does not exist`);
  }
}
