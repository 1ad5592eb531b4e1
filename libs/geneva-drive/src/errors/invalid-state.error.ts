import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * An operator action (`pause`, `resume`, `skip`, `cancel`) was asked of a workflow in a state
 * that does not allow it. Nothing was changed.
 * @publicApi
 */
export class InvalidStateError extends GenevaDriveError {
  constructor(
    readonly action: string,
    readonly workflowId: string,
    readonly state: string,
  ) {
    super(`Cannot ${action} a ${state} workflow (workflow ${workflowId})`);
  }
}
