/**
 * Like `createTestApp`, but with entities of the resumable specs' own tables registered in the
 * DataSource (`overRecords` needs entity metadata). The tables themselves are created by the spec
 * after `prepareDatabase` (which drops every table) and emptied by the spec.
 */
import type { Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule, type GenevaDriveModuleOptions } from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { dataSourceOptions, prepareDatabase, truncateAll, type DatabaseKind } from '../utils/databases.js';
import { engineLogger, type TestApp } from './test-app.js';

export async function createResumableApp(
  kind: DatabaseKind,
  providers: Provider[],
  options: GenevaDriveModuleOptions & { entities?: Function[]; prepare?: boolean } = {},
): Promise<TestApp> {
  const { entities = [], prepare = true, ...moduleOptions } = options;
  if (prepare) await prepareDatabase(kind);
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({ ...dataSourceOptions(kind, { entities }), migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger(), ...moduleOptions }),
    ],
    providers,
  })
    .setLogger(engineLogger())
    .compile();
  await moduleRef.init();
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

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls `probe` every `everyMs` until it returns a truthy value; throws `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T>, { timeoutMs = 20_000, everyMs = 25 } = {}): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
