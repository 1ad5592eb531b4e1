import type { DataSource } from 'typeorm';
import { CliConnectionError } from './cli-connection.error.js';

/** How long a connection attempt may take, unless the data source file says otherwise. */
const CONNECT_TIMEOUT_MS = 5_000;

/**
 * Connects the data source once, before Nest boots: a database that is down is one error in about a
 * second (refused) or five (no answer), not the TypeORM module's nine retries with their stack traces
 * (~28 s), which a shell user or a script reading `--json` cannot use.
 */
export async function connect(dataSource: DataSource): Promise<void> {
  if (dataSource.isInitialized) return;
  const { type } = dataSource.options;
  const options = dataSource.options as unknown as Record<string, unknown>;
  if (type === 'postgres' && options.connectTimeoutMS === undefined) dataSource.setOptions({ connectTimeoutMS: CONNECT_TIMEOUT_MS } as Partial<DataSource['options']>);
  if ((type === 'mysql' || type === 'mariadb') && options.connectTimeout === undefined) dataSource.setOptions({ connectTimeout: CONNECT_TIMEOUT_MS } as Partial<DataSource['options']>);
  try {
    await dataSource.initialize();
  } catch (error) {
    throw new CliConnectionError(type, error);
  }
}
