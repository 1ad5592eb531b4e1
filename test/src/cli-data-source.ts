/**
 * The data source file the CLI spec hands to `geneva-drive --data-source`: the worker's test
 * database of GD_CLI_DB (the SQLite file GD_CLI_SQLITE_FILE), and as `genevaDrive` the InvoiceFlow and ShippingFlow classes (unless GD_CLI_NO_CLASSES) and,
 * with GD_CLI_BULL_QUEUE, the Redis queue of that name (where the spec's application has its worker) on
 * the adapter GD_CLI_QUEUE_ADAPTER (bull, the default, or bullmq).
 */
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { GenevaDriveCliConfig } from 'geneva-drive';
import { dataSourceOptions, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { InvoiceFlow, ShippingFlow } from './cli-workflows.js';

const kind = (process.env.GD_CLI_DB ?? 'sqlite') as DatabaseKind;
// Compiled under .tmp/, databases.ts would place the SQLite file elsewhere: the spec passes the application's.
const sqliteFile = kind === 'sqlite' && process.env.GD_CLI_SQLITE_FILE ? { database: process.env.GD_CLI_SQLITE_FILE } : {};

export const dataSource = new DataSource({ ...dataSourceOptions(kind), ...sqliteFile, migrations: [] } as DataSourceOptions);

const bullQueue = process.env.GD_CLI_BULL_QUEUE;

export const genevaDrive: GenevaDriveCliConfig = {
  providers: process.env.GD_CLI_NO_CLASSES ? [] : [InvoiceFlow, ShippingFlow],
  ...(bullQueue ? { queue: { adapter: process.env.GD_CLI_QUEUE_ADAPTER === 'bullmq' ? 'bullmq' : 'bull', redis: redisUrl(), name: bullQueue } } : {}),
};
