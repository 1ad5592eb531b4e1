import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A step's `concurrency.key` (or `rateLimit.key`) returned something that is not a key: a non-empty
 * string of at most 255 UTF-8 bytes. The step fails under its exception policy, holding no slot.
 * @publicApi
 */
export class ConcurrencyKeyError extends GenevaDriveError {
  constructor(
    readonly stepName: string,
    readonly got: string,
    readonly option: 'concurrency' | 'rateLimit' = 'concurrency',
  ) {
    super(`${option}.key of step "${stepName}" must return a non-empty string of at most 255 UTF-8 bytes, got ${got}`);
  }
}
