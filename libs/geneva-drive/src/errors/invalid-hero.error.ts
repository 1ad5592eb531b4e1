import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * The hero handed to `start` (or to a lookup or delivery by hero) is not a saved entity of the type
 * the workflow declares. `action` says what could not be done (default: `start <workflow>`). @publicApi
 */
export class InvalidHeroError extends GenevaDriveError {
  constructor(readonly workflow: string, problem: string, action = `start ${workflow}`) {
    super(`Cannot ${action}: ${problem}`);
  }
}
