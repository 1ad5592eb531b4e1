import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A feature the application configured needs an optional peer dependency it has not installed
 * (the `bull` queue adapter needs `bull`, for one). @publicApi
 */
export class MissingDependencyError extends GenevaDriveError {
  constructor(
    readonly packageName: string,
    readonly feature: string,
    options?: { cause?: unknown },
  ) {
    super(`${feature} needs the package "${packageName}", which is not installed: npm install ${packageName}`, options);
  }
}

/** Imports an optional peer dependency, or throws {@link MissingDependencyError} naming it. */
export async function importOptional<T>(packageName: string, feature: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    // ERR_MODULE_NOT_FOUND from Node's ESM loader, MODULE_NOT_FOUND from require-style loaders (jest);
    // a package that is installed but fails to load one of its own files is not "missing".
    const code = (error as { code?: unknown }).code;
    const notFound = code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND';
    if (notFound && String((error as Error).message).includes(`'${packageName}'`)) {
      throw new MissingDependencyError(packageName, feature, { cause: error });
    }
    throw error;
  }
}
