import { GenevaDriveError } from '../errors/geneva-drive.error.js';

/**
 * The dashboard's `path` has characters a link cannot carry as is (a backslash, `%`, a quote, a
 * space, an empty, `.` or `..` segment): links are built from it, and `/\evil.com` or `//evil.com` would leave
 * the host. The application does not boot.
 * @publicApi
 */
export class DashboardPathError extends GenevaDriveError {
  constructor(readonly path: string) {
    super(`GenevaDriveDashboardModule path ${JSON.stringify(path)} is not usable: give segments of letters, digits, '-', '_', '.' and '~' separated by single '/' (no '.' or '..' segment), such as '/geneva' or '/ops/workflows' ('/' mounts it at the root)`);
  }
}
