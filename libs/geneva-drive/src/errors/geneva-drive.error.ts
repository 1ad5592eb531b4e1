const GENEVA_DRIVE_ERROR = Symbol.for('geneva-drive:error');

/**
 * Base class of every error geneva-drive throws on purpose.
 * `name` is the concrete class name, so logs and recorded executions say what failed.
 * @publicApi
 */
export class GenevaDriveError extends Error {
  readonly [GENEVA_DRIVE_ERROR] = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** True for any geneva-drive error, even when two copies of the library are loaded. @publicApi */
export function isGenevaDriveError(error: unknown): error is GenevaDriveError {
  return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[GENEVA_DRIVE_ERROR] === true;
}
