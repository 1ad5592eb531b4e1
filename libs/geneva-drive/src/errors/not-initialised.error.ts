import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A geneva-drive service was called after the application was compiled but before it was
 * initialised: the workflow classes are found, the DataSource bound and the schema read during
 * initialisation.
 * @publicApi
 */
export class NotInitialisedError extends GenevaDriveError {
  constructor() {
    super('geneva-drive is not initialised yet: call app.init() (or moduleRef.init()) before using its services');
  }
}
