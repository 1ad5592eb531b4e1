import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * Child workflows need the child-workflows migration (its columns on `geneva_drive_workflows`),
 * which has not run: `startChild` fails its step (the workflow pauses) and starts nothing. Everything
 * else works without it.
 * @publicApi
 */
export class ChildrenNotMigratedError extends GenevaDriveError {
  constructor(
    readonly what: string,
    readonly migration: string,
  ) {
    super(`${what} needs the child-workflow columns of geneva_drive_workflows: run the ${migration} migration (in GENEVA_DRIVE_MIGRATIONS)`);
  }
}
