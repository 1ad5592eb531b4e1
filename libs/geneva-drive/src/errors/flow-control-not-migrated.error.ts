import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * Flow control needs a migration that has not run: a step's concurrency key the flow-control one (the
 * table `geneva_drive_flow_keys` and `flow_key` on `geneva_drive_step_executions`), its rate limit
 * the rate-limits one too (`rate_window` on that table). Everything else works without them.
 * @publicApi
 */
export class FlowControlNotMigratedError extends GenevaDriveError {
  constructor(
    readonly what: string,
    readonly migration: string,
    needs = 'the geneva_drive_flow_keys table and the flow_key column of geneva_drive_step_executions',
  ) {
    super(`${what} needs ${needs}: run the ${migration} migration (in GENEVA_DRIVE_MIGRATIONS)`);
  }
}
