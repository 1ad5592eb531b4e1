import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * The connection to the database was lost while one of the engine's transactions committed (a
 * `start()`, an operator action): it may have committed or not, and the client cannot tell which.
 * Raised only for work that is not safe to run again blindly; the engine's own idempotent phases
 * and `signal()` find out by themselves. `cause` is the connection error.
 * @publicApi
 */
export class CommitOutcomeUnknownError extends GenevaDriveError {
  constructor(cause: unknown) {
    super(`The connection to the database was lost during COMMIT (${String((cause as Error)?.message ?? cause)}): the transaction may or may not have committed`, { cause });
  }
}
