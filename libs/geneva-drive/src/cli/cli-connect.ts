import type { DataSource } from 'typeorm';
import { CliConnectionError } from './cli-connection.error.js';

/**
 * How long a connection attempt may take, unless the data source file says otherwise: a server that
 * accepts the connection and never answers is reported within 5 s of the CLI's start-up.
 */
const CONNECT_TIMEOUT_MS = 3_000;

/**
 * Connects the data source once, before Nest boots: a database that is down is one error in about a
 * second (refused) or three (no answer), not the TypeORM module's nine retries with their stack traces
 * (~28 s), which a shell user or a script reading `--json` cannot use.
 */
export async function connect(dataSource: DataSource): Promise<void> {
  if (dataSource.isInitialized) return;
  const { type } = dataSource.options;
  const options = dataSource.options as unknown as Record<string, unknown>;
  if (type === 'postgres' && options.connectTimeoutMS === undefined) withOptions(dataSource, { connectTimeoutMS: CONNECT_TIMEOUT_MS });
  if ((type === 'mysql' || type === 'mariadb') && options.connectTimeout === undefined) withOptions(dataSource, { connectTimeout: CONNECT_TIMEOUT_MS });
  try {
    await dataSource.initialize();
  } catch (error) {
    throw new CliConnectionError(type, error);
  }
}

/**
 * Sets options on the data source and on its driver: the MySQL driver keeps a copy of the options it
 * was built with (setOptions alone leaves mysql2 at its own 10 s connect timeout); the PostgreSQL
 * driver shares the data source's.
 */
function withOptions(dataSource: DataSource, changes: Record<string, number>): void {
  dataSource.setOptions(changes as Partial<DataSource['options']>);
  Object.assign((dataSource.driver as unknown as { options: Record<string, unknown> }).options, changes);
}
