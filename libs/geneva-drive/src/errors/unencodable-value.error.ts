import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A signal payload, resumable-step cursor or execution metadata cannot be stored: it nests deeper
 * than 100 objects and arrays, or contains itself. Thrown before anything is written (for a cursor,
 * it goes through the step's exception policy).
 * @publicApi
 */
export class UnencodableValueError extends GenevaDriveError {
  constructor(
    readonly what: string,
    readonly reason: string,
  ) {
    super(`${what} cannot be stored: it ${reason}`);
  }
}
