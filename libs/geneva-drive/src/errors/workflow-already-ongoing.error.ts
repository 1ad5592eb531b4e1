import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * `start` found an ongoing workflow of the same type for the hero (pass `allowMultiple` to run
 * several). Nothing was written; on PostgreSQL a caller's transaction must be rolled back.
 * @publicApi
 */
export class WorkflowAlreadyOngoingError extends GenevaDriveError {
  constructor(
    readonly workflowType: string,
    readonly heroType: string,
    readonly heroId: string,
    options?: { cause?: unknown },
  ) {
    super(`${heroType} ${heroId} already has an ongoing ${workflowType}: finish or cancel it first, or start with allowMultiple`, options);
  }
}
