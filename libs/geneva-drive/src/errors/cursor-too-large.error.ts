import { GenevaDriveError } from './geneva-drive.error.js';

/** A resumable step's encoded cursor exceeds `maxCursorSize`. Goes through the step's exception policy. @publicApi */
export class CursorTooLargeError extends GenevaDriveError {
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`Cursor is ${size} bytes, over maxCursorSize (${limit}): keep the cursor small (an id, an offset) and the data elsewhere`);
  }
}
