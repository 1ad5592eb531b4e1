import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * Flow control (a step's concurrency key) needs the flow-control migration (the table
 * `geneva_drive_flow_keys` and `flow_key` on `geneva_drive_step_executions`), which has not run.
 * Everything else works without it.
 * @publicApi
 */
export class FlowControlNotMigratedError extends GenevaDriveError {
  constructor(
    readonly what: string,
    readonly migration: string,
  ) {
    super(`${what} needs the geneva_drive_flow_keys table and the flow_key column of geneva_drive_step_executions: run the ${migration} migration (in GENEVA_DRIVE_MIGRATIONS)`);
  }
}
