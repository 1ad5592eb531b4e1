import { GenevaDriveError } from '../errors/geneva-drive.error.js';

/** The CLI could not connect to the database of the data source file; nothing was read or changed. @publicApi */
export class CliConnectionError extends GenevaDriveError {
  constructor(
    readonly databaseType: string,
    cause: unknown,
  ) {
    super(`Cannot connect to the ${databaseType} database of the data source file: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}
