import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { DataSource } from 'typeorm';
import type { GenevaDriveCliConfig } from '../interfaces/cli-config.interface.js';
import { CliUsageError } from './cli-usage.error.js';

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
