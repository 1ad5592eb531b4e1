import { GenevaDriveError } from './geneva-drive.error.js';

/** A dashboard filter, CLI argument or form field has a value it cannot use; nothing was changed. @publicApi */
export class DashboardInputError extends GenevaDriveError {
  constructor(
    readonly field: string,
    readonly value: string,
    expected: string,
  ) {
    super(`Invalid ${field} ${JSON.stringify(value)}: expected ${expected}`);
  }
}
