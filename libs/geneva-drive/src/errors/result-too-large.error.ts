import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * `this.setResult(value)` got a value whose encoded form exceeds `maxSignalPayloadSize` (a child's
 * result travels in its parent's `child_finished` signal). Nothing was stored.
 * @publicApi
 */
export class ResultTooLargeError extends GenevaDriveError {
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`The workflow result is ${size} bytes encoded, over maxSignalPayloadSize (${limit} bytes): store less, or a reference to it`);
  }
}
