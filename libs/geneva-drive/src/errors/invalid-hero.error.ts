import { GenevaDriveError } from './geneva-drive.error.js';

/** The hero handed to `start` is not a saved entity of the type the workflow declares. @publicApi */
export class InvalidHeroError extends GenevaDriveError {
  constructor(readonly workflow: string, problem: string) {
    super(`Cannot start ${workflow}: ${problem}`);
  }
}
