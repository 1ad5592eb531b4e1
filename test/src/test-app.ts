import { Logger, type DynamicModule, type LoggerService, type Provider, type Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { Table, type DataSource } from 'typeorm';
import { GenevaDriveModule, type GenevaDriveModuleOptions } from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { dataSourceOptions, prepareDatabase, truncateAll, type DatabaseKind, type SchemaOptions } from '../utils/databases.js';

/** A booted test application: the module, its DataSource and the testing helpers. */
export interface TestApp {
  moduleRef: TestingModule;
  dataSource: DataSource;
  gd: GenevaDriveTesting;
  reset(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Boots a Nest testing module with TypeORM on `kind`, GenevaDriveModule (manual queue unless
 * `options.queue` says otherwise) and the given workflow classes and providers. `withoutSignals`,
 * `withoutDeadlines` and `primaryKey` choose the schema {@link prepareDatabase} builds (unless `prepare: false`); `entities`
 * registers a spec's own entities (their tables are the spec's to create); `imports` adds modules.
 */
export async function createTestApp(
  kind: DatabaseKind,
  providers: Provider[],
  options: GenevaDriveModuleOptions & SchemaOptions & { prepare?: boolean; entities?: Function[]; imports?: Array<Type | DynamicModule> } = {},
): Promise<TestApp> {
  const { withoutSignals, withoutDeadlines, withoutProcesses, withoutChildren, withoutFlowControl, withoutFlowKeyIndex, withoutRateLimits, primaryKey, prepare = true, entities = [], imports = [], ...moduleOptions } = options;
  if (prepare) await prepareDatabase(kind, { withoutSignals, withoutDeadlines, withoutProcesses, withoutChildren, withoutFlowControl, withoutFlowKeyIndex, withoutRateLimits, primaryKey });
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ ...dataSourceOptions(kind, { primaryKey, entities }), migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger(), ...moduleOptions }),
      ...imports,
    ],
    providers,
  })
    .setLogger(engineLogger())
    .compile();
  try {
    await moduleRef.init();
  } catch (error) {
    await moduleRef.close(); // a boot that fails must not leave the DataSource TypeORM opened
    throw error;
  }
  const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
  const gd = GenevaDriveTesting.create(moduleRef);
  return {
    moduleRef,
    dataSource,
    gd,
    reset: async () => {
      await truncateAll(dataSource);
      (gd.enqueuedJobs as unknown[]).length = 0;
    },
    close: () => moduleRef.close(),
  };
}

/** What a spec measured for information (timings, counts): printed, like the log lines, only with GD_TEST_LOGS=1. */
export function informationLine(message: string): void {
  if (process.env.GD_TEST_LOGS) new Logger('test').log(message);
}

/** Log lines (Nest's and the engine's) are silent in tests unless GD_TEST_LOGS=1. */
export function engineLogger(): LoggerService {
  if (process.env.GD_TEST_LOGS) return new Logger('GenevaDrive');
  const silent = () => undefined;
  return { log: silent, error: silent, warn: silent, debug: silent, verbose: silent };
}

/** A silent logger that keeps what the engine warns of. */
export function warningsLogger(): { logger: LoggerService; warnings: string[] } {
  const warnings: string[] = [];
  const silent = () => undefined;
  return { warnings, logger: { log: silent, error: silent, debug: silent, verbose: silent, warn: (message: unknown) => void warnings.push(String(message)) } };
}

/** Drops and creates the tables of a spec's own entities (in this order: dependents first). */
export async function recreateTables(dataSource: DataSource, entities: Function[]): Promise<void> {
  const queryRunner = dataSource.createQueryRunner();
  try {
    for (const entity of entities) {
      const metadata = dataSource.getMetadata(entity);
      await queryRunner.dropTable(metadata.tableName, true);
      await queryRunner.createTable(Table.create(metadata, dataSource.driver));
    }
  } finally {
    await queryRunner.release();
  }
}
