/**
 * The database side of the test harness: one database per jest worker on each server, migrated by
 * the real migrations (never `synchronize`), and helpers to reset it between tests.
 *
 * Typical use in a spec:
 *
 *   describeEachDatabase('signals', (kind) => {
 *     let dataSource: DataSource;
 *     beforeAll(async () => {
 *       await prepareDatabase(kind);
 *       dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
 *     });
 *     afterAll(() => dataSource.destroy());
 *     beforeEach(() => truncateAll(dataSource));
 *     ...
 *   });
 */
import 'reflect-metadata';
import { fileURLToPath } from 'node:url';
import { DataSource, type DataSourceOptions, type MigrationInterface } from 'typeorm';
import { GENEVA_DRIVE_ENTITIES } from '../../libs/geneva-drive/src/entities/index.js';
import {
  AddGenevaDriveChildWorkflows1730000000006,
  AddGenevaDriveFlowControl1730000000007,
  AddGenevaDriveFlowKeyIndex1730000000008,
  AddGenevaDriveRateLimits1730000000009,
  PartialGenevaDriveIndexes1730000000010,
  AddGenevaDriveProcesses1730000000005,
  AddGenevaDriveSignals1730000000001,
  AddGenevaDriveWaitDeadlines1730000000004,
  genevaDriveMigrations,
} from '../../libs/geneva-drive/src/migrations/index.js';
import type { PrimaryKeyType } from '../../libs/geneva-drive/src/migrations/primary-keys.js';
import { CreateTestFixtures1600000000000, FIXTURE_ENTITIES, FIXTURE_TABLES } from './fixtures.js';

export type DatabaseKind = 'sqlite' | 'postgres' | 'mysql';
const DATABASE_KINDS: readonly DatabaseKind[] = ['sqlite', 'postgres', 'mysql'];
const LABELS: Record<DatabaseKind, string> = { sqlite: 'SQLite', postgres: 'PostgreSQL', mysql: 'MySQL/MariaDB' };

/** Server URLs, filled in by the global setup (from the same variables, or its defaults). */
const URL_ENV = { postgres: 'GD_PG_URL', mysql: 'GD_MYSQL_URL', redis: 'GD_REDIS_URL' } as const;

/** The geneva-drive tables, children before parents. */
const GENEVA_TABLES = ['geneva_drive_signals', 'geneva_drive_step_executions', 'geneva_drive_workflows'];
/** Tables of optional migrations, emptied when they exist. */
const OPTIONAL_TABLES = ['geneva_drive_signals', 'geneva_drive_flow_keys'];

/** SQLite files live here, one per worker (git-ignored). */
const SQLITE_DIR = fileURLToPath(new URL('../../.tmp/', import.meta.url));

/** Databases the run selects: `GD_DB` (comma list, validated by the global setup) or all three. */
function selectedDatabases(): DatabaseKind[] {
  const listed = process.env.GD_DB?.split(',').map((name) => name.trim().toLowerCase());
  return DATABASE_KINDS.filter((kind) => !listed?.some(Boolean) || listed.includes(kind));
}

/** Databases that answered the global setup's probe (SQLite only when it did not run). */
function availableDatabases(): DatabaseKind[] {
  const listed = (process.env.GD_AVAILABLE_DATABASES ?? 'sqlite').split(',');
  return DATABASE_KINDS.filter((kind) => kind === 'sqlite' || listed.includes(kind));
}

/** The databases the tests run against: the reachable ones, restricted by `GD_DB` when set. */
export function enabledDatabases(): DatabaseKind[] {
  const available = availableDatabases();
  return selectedDatabases().filter((kind) => available.includes(kind));
}

/** Whether Redis answered the global setup's PING (Bull suites should skip themselves otherwise). */
export function redisAvailable(): boolean {
  return process.env.GD_REDIS_AVAILABLE === '1';
}

/** The Redis URL the global setup probed (`GD_REDIS_URL`, default `redis://127.0.0.1:6379`), for Bull. */
export function redisUrl(): string {
  return serverUrl('redis');
}

function serverUrl(server: keyof typeof URL_ENV): string {
  const url = process.env[URL_ENV[server]];
  if (!url) throw new Error(`${URL_ENV[server]} is not set: run the tests through jest (its global setup sets it)`);
  return url;
}

/** Options for a connection to `database` on the PostgreSQL or MySQL server (no entities or migrations). */
function serverConnectionOptions(kind: 'postgres' | 'mysql', database?: string): DataSourceOptions {
  const url = new URL(serverUrl(kind));
  // TypeORM lets the URL's database win over a `database` option, so the URL itself is rewritten.
  if (database) url.pathname = `/${encodeURIComponent(database)}`;
  if (kind === 'postgres') return { type: 'postgres', url: url.toString() };
  // mysql2 converts DATETIME values in this zone: UTC, whatever the machine's zone is.
  return { type: 'mysql', url: url.toString(), timezone: 'Z', charset: 'utf8mb4' };
}

/**
 * The name of this jest worker's database (also used for the SQLite file). Child processes spawned by
 * a test inherit `JEST_WORKER_ID` and so land on the same database. Two jest runs at once on one
 * machine would wipe each other's databases: give one of them another `GD_TEST_DB_PREFIX`.
 */
export function workerDatabaseName(): string {
  return `${process.env.GD_TEST_DB_PREFIX || 'gd_test'}_${process.env.JEST_WORKER_ID ?? '0'}`;
}

/** The schema a test database gets. */
export interface SchemaOptions {
  /** Leave out the signals migration (a database that was never upgraded). */
  withoutSignals?: boolean;
  /** Leave out the wait-deadlines migration (a database not upgraded for `timeout` steps). */
  withoutDeadlines?: boolean;
  /** Leave out the process-table migration (a database not upgraded for housekeeping's report of unrunnable executions). */
  withoutProcesses?: boolean;
  /** Leave out the child-workflows migration (a database not upgraded for `startChild`). */
  withoutChildren?: boolean;
  /** Leave out the flow-control migration (a database not upgraded for concurrency keys), and the flow-key index that needs it. */
  withoutFlowControl?: boolean;
  /** Leave out the flow-key index (a database upgraded for concurrency keys, not for the reads that show them). */
  withoutFlowKeyIndex?: boolean;
  /** Leave out the rate-limits migration (a database not upgraded for rate limits; implied by withoutFlowControl). */
  withoutRateLimits?: boolean;
  /** Leave out PartialGenevaDriveIndexes1730000000010 (the indexes as they were before it). */
  withoutPartialIndexes?: boolean;
  /** The key type of the geneva-drive tables (`genevaDriveMigrations({ primaryKey })`). @default 'bigint' */
  primaryKey?: PrimaryKeyType;
}

/** Migrations in run order: the fixture tables first, then geneva-drive's. */
function migrationsFor(opts: SchemaOptions = {}): (new () => MigrationInterface)[] {
  const geneva = genevaDriveMigrations({ primaryKey: opts.primaryKey });
  // The uuid set's classes are subclasses of the exported ones.
  const isSignals = (migration: Function) => migration === AddGenevaDriveSignals1730000000001 || migration.prototype instanceof AddGenevaDriveSignals1730000000001;
  const isDeadlines = (migration: Function) => migration === AddGenevaDriveWaitDeadlines1730000000004;
  const isProcesses = (migration: Function) => migration === AddGenevaDriveProcesses1730000000005;
  const isChildren = (migration: Function) => migration === AddGenevaDriveChildWorkflows1730000000006;
  const isFlowControl = (migration: Function) => migration === AddGenevaDriveFlowControl1730000000007;
  const isFlowKeyIndex = (migration: Function) => migration === AddGenevaDriveFlowKeyIndex1730000000008;
  const isRateLimits = (migration: Function) => migration === AddGenevaDriveRateLimits1730000000009;
  const isPartialIndexes = (migration: Function) => migration === PartialGenevaDriveIndexes1730000000010;
  const kept = geneva.filter(
    (migration) =>
      !(opts.withoutSignals && isSignals(migration)) &&
      !(opts.withoutDeadlines && isDeadlines(migration)) &&
      !(opts.withoutProcesses && isProcesses(migration)) &&
      !(opts.withoutChildren && isChildren(migration)) &&
      !(opts.withoutFlowControl && isFlowControl(migration)) &&
      !((opts.withoutFlowControl || opts.withoutFlowKeyIndex) && isFlowKeyIndex(migration)) &&
      !((opts.withoutFlowControl || opts.withoutRateLimits) && isRateLimits(migration)) &&
      !(opts.withoutPartialIndexes && isPartialIndexes(migration)),
  );
  return [CreateTestFixtures1600000000000, ...kept];
}

/**
 * Options for a DataSource on this worker's database of `kind`, with the geneva-drive and fixture
 * entities (plus `extra.entities`) and all migrations (of `extra.primaryKey`, bigint by default)
 * listed but not run. Call {@link prepareDatabase} first: the database must exist and be migrated.
 */
export function dataSourceOptions(kind: DatabaseKind, extra: { entities?: Function[]; primaryKey?: PrimaryKeyType } = {}): DataSourceOptions {
  const common = {
    entities: [...GENEVA_DRIVE_ENTITIES, ...FIXTURE_ENTITIES, ...(extra.entities ?? [])],
    migrations: migrationsFor({ primaryKey: extra.primaryKey }),
    synchronize: false,
    migrationsRun: false,
    logging: false,
  } satisfies Partial<DataSourceOptions>;
  if (kind === 'sqlite') {
    return {
      ...common,
      type: 'better-sqlite3',
      // A file, not :memory:, so a second DataSource or a child process sees the same data.
      database: `${SQLITE_DIR}${workerDatabaseName()}.sqlite`,
      // busy_timeout in ms: a second connection waits for the writer instead of failing SQLITE_BUSY.
      timeout: 10_000,
      // WAL lets readers proceed while another connection writes.
      enableWAL: true,
    };
  }
  return { ...serverConnectionOptions(kind, workerDatabaseName()), ...common };
}

/**
 * Makes this worker's database of `kind` empty and freshly migrated: creates the database if it does
 * not exist (PostgreSQL/MySQL, through a connection to the URL's database, `test` by default), drops
 * every table in it (the migrations table included) and runs the fixture and geneva-drive migrations,
 * without the signals migration when `withoutSignals` (a database that was never upgraded), with
 * uuid keys when `primaryKey: 'uuid'`. Call it in `beforeAll`; it opens and closes its own connection.
 */
export async function prepareDatabase(kind: DatabaseKind, opts: SchemaOptions = {}): Promise<void> {
  const options: DataSourceOptions = { ...dataSourceOptions(kind), migrations: migrationsFor(opts) };
  const dataSource = await initializeCreatingDatabase(kind, options);
  try {
    await dataSource.dropDatabase(); // despite the name: drops every table, view and sequence in it
    await dataSource.runMigrations();
  } finally {
    await dataSource.destroy();
  }
}

async function initializeCreatingDatabase(kind: DatabaseKind, options: DataSourceOptions): Promise<DataSource> {
  try {
    return await new DataSource(options).initialize();
  } catch (error) {
    if (kind === 'sqlite' || !isUnknownDatabase(error)) throw error;
  }
  await createWorkerDatabase(kind);
  return new DataSource(options).initialize();
}

/** PostgreSQL 3D000 invalid_catalog_name; MySQL 1049 ER_BAD_DB_ERROR. */
function isUnknownDatabase(error: unknown): boolean {
  const { code, errno } = error as { code?: unknown; errno?: unknown };
  return code === '3D000' || code === 'ER_BAD_DB_ERROR' || errno === 1049;
}

async function createWorkerDatabase(kind: 'postgres' | 'mysql'): Promise<void> {
  const admin = await new DataSource(serverConnectionOptions(kind)).initialize(); // the URL's own database
  try {
    const name = admin.driver.escape(workerDatabaseName());
    if (kind === 'mysql') {
      await admin.query(`CREATE DATABASE IF NOT EXISTS ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
      return;
    }
    // PostgreSQL has no CREATE DATABASE IF NOT EXISTS; another run may have created it meanwhile.
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } catch (error) {
      if ((error as { driverError?: { code?: string } }).driverError?.code !== '42P04') throw error; // duplicate_database
    }
  } finally {
    await admin.destroy();
  }
}

/**
 * A new, empty PostgreSQL database named after this worker's (`<worker database>_<suffix>`), dropped
 * first if a run left it behind; returns its URL. For an application under test that migrates its
 * own schema (the packaged consumer app, the quick start).
 */
export async function emptyPostgresDatabase(suffix: string): Promise<string> {
  const name = `${workerDatabaseName()}_${suffix}`;
  const admin = await new DataSource(serverConnectionOptions('postgres')).initialize();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${admin.driver.escape(name)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${admin.driver.escape(name)}`);
  } finally {
    await admin.destroy();
  }
  return (serverConnectionOptions('postgres', name) as { url: string }).url;
}

/**
 * Deletes every row of the geneva-drive and fixture tables (children first), keeping the schema and
 * the id sequences. Works on databases prepared `withoutSignals` or `withoutFlowControl` too.
 */
export async function truncateAll(dataSource: DataSource): Promise<void> {
  const queryRunner = dataSource.createQueryRunner();
  try {
    for (const table of ['geneva_drive_flow_keys', ...GENEVA_TABLES, ...FIXTURE_TABLES]) {
      if (OPTIONAL_TABLES.includes(table) && !(await queryRunner.hasTable(table))) continue;
      await queryRunner.query(`DELETE FROM ${dataSource.driver.escape(table)}`);
    }
  } finally {
    await queryRunner.release();
  }
}

/**
 * One jest `describe` per database: `${title} [postgres]` and so on. A database that was selected but
 * is not reachable gets a skipped describe, so the missing coverage shows in the skipped count.
 */
export function describeEachDatabase(title: string, fn: (kind: DatabaseKind) => void): void {
  const available = availableDatabases();
  for (const kind of selectedDatabases()) {
    if (available.includes(kind)) {
      describe(`${title} [${kind}]`, () => fn(kind));
    } else {
      describe.skip(`${title} [${kind}] (${LABELS[kind]} not reachable)`, () => fn(kind));
    }
  }
}
