import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * Housekeeping found a step stuck `in_progress` again after it had already recovered it
 * `maxRecoveries` times in a row: its worker keeps dying inside the body (a crash, an out-of-memory
 * kill, a `process.exit`). Recorded on that execution (failed, this class in `errorClassName`, the
 * counts in `metadata.recoveryLimit`) when housekeeping pauses the workflow instead of running the
 * step again; never thrown to a caller. `resume` runs the step again once the cause is fixed.
 * @publicApi
 */
export class StepRecoveryLimitError extends GenevaDriveError {
  constructor(
    readonly workflowId: string,
    readonly executionId: string,
    readonly stepName: string,
    readonly recoveries: number,
    readonly maxRecoveries: number,
  ) {
    super(
      `Step "${stepName}" of workflow ${workflowId} is stuck in_progress again (execution ${executionId}) after ${recoveries} ` +
        `recoveries in a row (maxRecoveries ${maxRecoveries}): its worker keeps dying mid-step; workflow paused, resume it once the cause is fixed`,
    );
  }
}
