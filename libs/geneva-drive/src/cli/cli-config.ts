import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ModuleMetadata, Provider } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { QueueAdapterOptions } from '../interfaces/geneva-drive-options.interface.js';
import { CliUsageError } from './cli-usage.error.js';

/**
 * What the data-source file may export next to its DataSource, as `genevaDrive`: the workflow
 * classes (with the providers they need) and the queue the application's workers listen on.
 * @publicApi
 */
export interface GenevaDriveCliConfig {
  /**
   * The application's workflow classes and their dependencies. Needed to wake a parked step with
   * `signal`, and for `resume` and `skip`: their matchers and step lists live in the classes.
   */
  providers?: Provider[];
  /** Modules those providers need. */
  imports?: ModuleMetadata['imports'];
  /**
   * The application's queue, so that a step woken (or resumed, or skipped to) from the shell is
   * enqueued where the workers are: `{ adapter: 'bull' | 'bullmq', redis, name?, prefix? }` (the CLI itself
   * never processes jobs: concurrency is 0). Without it the CLI records its jobs nowhere and the
   * application's housekeeping enqueues the due execution after `stuckScheduledThreshold`.
   * @default { adapter: 'manual' }
   */
  queue?: QueueAdapterOptions;
}

export interface LoadedDataSourceFile {
  dataSource: DataSource;
  config: GenevaDriveCliConfig;
}

function isDataSource(value: unknown): value is DataSource {
  return typeof value === 'object' && value !== null && typeof (value as DataSource).initialize === 'function' && 'options' in value && 'driver' in value;
}

/** Imports the file and finds its one DataSource export (the typeorm CLI's rule) and `genevaDrive`. */
export async function loadDataSourceFile(file: string): Promise<LoadedDataSourceFile> {
  const absolute = path.resolve(file);
  let exported: Record<string, unknown>;
  try {
    exported = (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (error) {
    throw new CliUsageError(`Cannot load the data source file ${absolute}: ${(error as Error).message}`, { cause: error });
  }
  const dataSources = [...new Set(Object.values(exported).filter(isDataSource))];
  if (dataSources.length !== 1) {
    throw new CliUsageError(`${absolute} must export exactly one TypeORM DataSource (found ${dataSources.length})`);
  }
  const config = (exported.genevaDrive ?? {}) as GenevaDriveCliConfig;
  if (typeof config !== 'object' || config === null) throw new CliUsageError(`${absolute}: the genevaDrive export must be an object`);
  if (config.queue?.adapter === 'local') {
    throw new CliUsageError(`${absolute}: genevaDrive.queue cannot be 'local': the CLI would run steps itself, and the application's local queue cannot be reached from another process; leave queue out`);
  }
  return { dataSource: dataSources[0], config };
}
