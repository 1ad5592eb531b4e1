import type { FactoryProvider, ModuleMetadata } from '@nestjs/common';
import { InvalidOptionError } from '../errors/invalid-option.error.js';
import { rejectUnknownKeys } from './unknown-keys.js';

/**
 * `forRootAsync` of geneva-drive's metrics and tracing modules: a factory of what `forRoot` takes,
 * with the providers it injects (from `imports`, or global ones).
 * @publicApi
 */
export interface GenevaDriveAsyncModuleOptions<Options> {
  imports?: ModuleMetadata['imports'];
  inject?: FactoryProvider['inject'];
  useFactory: (...args: any[]) => Options | Promise<Options>;
}

/**
 * The provider of `token`, made from the options `asyncOptions.useFactory` returns: an object with known
 * keys only (else InvalidOptionError, at boot), handed to `pick`.
 */
export function asyncOptionsProvider<Options extends object, T>(
  where: string,
  token: symbol,
  asyncOptions: GenevaDriveAsyncModuleOptions<Options>,
  knownKeys: ReadonlyArray<keyof Options & string>,
  pick: (options: Options) => T,
): FactoryProvider<T> {
  if (typeof asyncOptions?.useFactory !== 'function') throw new InvalidOptionError(where, 'useFactory', `${where}.forRootAsync needs useFactory, a function returning the forRoot options`);
  return {
    provide: token,
    inject: asyncOptions.inject ?? [],
    useFactory: async (...args: unknown[]) => {
      const options = await asyncOptions.useFactory(...args);
      if (typeof options !== 'object' || options === null) throw new InvalidOptionError(where, 'useFactory', `the forRootAsync factory must return an object, got ${options === null ? 'null' : typeof options}`);
      rejectUnknownKeys(where, options, knownKeys);
      return pick(options);
    },
  };
}
