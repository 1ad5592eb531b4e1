import { GenevaDriveError } from '../errors/geneva-drive.error.js';

/** The `geneva-drive` command line is wrong (unknown command, missing argument, bad data source file). @publicApi */
export class CliUsageError extends GenevaDriveError {}
