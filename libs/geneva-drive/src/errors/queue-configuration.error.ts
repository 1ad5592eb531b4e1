import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * The `queue` option cannot be used as given: an unknown adapter, an object that does not implement
 * `QueuePort`, or a Bull queue returned by a `forRootAsync` factory instead of declared beside it.
 * @publicApi
 */
export class QueueConfigurationError extends GenevaDriveError {}
