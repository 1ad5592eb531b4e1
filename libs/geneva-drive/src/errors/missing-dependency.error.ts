import { GenevaDriveError } from './geneva-drive.error.js';

/**
 * A feature the application configured needs optional peer dependencies it has not installed (the
 * `bull` queue adapter needs `bull` and `@nestjs/bull`, for one). It names every missing package at
 * once, so one install fixes the boot. @publicApi
 */
export class MissingDependencyError extends GenevaDriveError {
  /** Every missing package, in the order the feature loads them. */
  readonly packageNames: readonly string[];

  constructor(
    packageNames: string | readonly string[],
    readonly feature: string,
    options?: { cause?: unknown },
  ) {
    const names = typeof packageNames === 'string' ? [packageNames] : packageNames;
    const quoted = names.map((name) => `"${name}"`);
    const what = names.length === 1 ? `the package ${quoted[0]}, which is not installed` : `the packages ${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}, which are not installed`;
    super(`${feature} needs ${what}: npm install ${names.join(' ')}`, options);
    this.packageNames = names;
  }

  /** The first missing package. */
  get packageName(): string {
    return this.packageNames[0];
  }
}

/** Imports an optional peer dependency, or throws {@link MissingDependencyError} naming it. */
export async function importOptional<T>(packageName: string, feature: string, load: () => Promise<T>): Promise<T> {
  const [loaded] = await importOptionals(feature, [[packageName, load]] as const);
  return loaded;
}

/**
 * Runs every load, each bringing in one optional package (a load may import a module of ours that
 * imports the package), and throws one {@link MissingDependencyError} naming all that are missing.
 * A load that fails on a package of the list already found missing (`@nestjs/bull` importing
 * `bull`) adds nothing; a failure that names none of the packages is not "missing" and goes through.
 */
export async function importOptionals<T extends readonly unknown[]>(
  feature: string,
  loads: { readonly [K in keyof T]: readonly [packageName: string, load: () => Promise<T[K]>] },
): Promise<T> {
  const names = loads.map(([packageName]) => packageName);
  const missing = new Set<string>();
  let cause: unknown;
  const loaded: unknown[] = [];
  for (const [, load] of loads) {
    try {
      loaded.push(await load());
    } catch (error) {
      const name = missingPackage(error, names);
      if (name === undefined) throw error;
      missing.add(name);
      cause ??= error;
    }
  }
  if (missing.size > 0) throw new MissingDependencyError(names.filter((name) => missing.has(name)), feature, { cause });
  return loaded as unknown as T;
}

/**
 * Which of `names` a module-not-found error says is missing: ERR_MODULE_NOT_FOUND from Node's ESM
 * loader, MODULE_NOT_FOUND from require-style loaders (jest). A package that is installed but fails
 * to load one of its own files is not "missing".
 */
function missingPackage(error: unknown, names: readonly string[]): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return undefined;
  const message = String((error as Error).message);
  return names.find((name) => message.includes(`'${name}'`));
}
