/**
 * A geneva-drive worker in its own OS process for the child-workflows kill spec
 * (test/e2e/child-workflows-kill.e2e-spec.ts compiles it with tsc and forks it with an IPC channel).
 *
 * It boots on the jest worker's database with the local queue, whose boot scan runs whatever is
 * scheduled. A fan-out body reports the children it declared ({ type: 'declared' }) and waits for
 * { type: 'proceed' } with its execution id; the spec answers one worker with SIGKILL instead.
 * Sends { type: 'ready' } once booted; closes on { type: 'shutdown' }.
 *
 * Environment: GD_CHILD_KILL_DB (sqlite | postgres | mysql) and, for SQLite, GD_CHILD_KILL_SQLITE_FILE
 * (this compiled copy of databases.ts would otherwise resolve another file).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GenevaDriveModule } from '../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { CRASH_CHILD_WORKFLOWS, fanOutHold, type DeclaredChildren } from './child-kill-workflows.js';

export type ChildKillWorkerMessage = { type: 'ready' } | ({ type: 'declared' } & DeclaredChildren);
export type ChildKillParentMessage = { type: 'proceed'; executionId: string } | { type: 'shutdown' };

const kind = process.env.GD_CHILD_KILL_DB as DatabaseKind;
const options = { ...dataSourceOptions(kind), migrations: [], migrationsRun: false };
if (kind === 'sqlite') Object.assign(options, { database: process.env.GD_CHILD_KILL_SQLITE_FILE });

fanOutHold.afterDeclaring = (declared) =>
  new Promise<void>((resolve) => {
    const onMessage = (message: ChildKillParentMessage) => {
      if (message.type !== 'proceed' || message.executionId !== declared.executionId) return;
      process.off('message', onMessage);
      resolve();
    };
    process.on('message', onMessage);
    process.send!({ type: 'declared', ...declared } satisfies ChildKillWorkerMessage);
  });

@Module({
  imports: [TypeOrmModule.forRoot(options), GenevaDriveModule.forRoot({ queue: { adapter: 'local', concurrency: 4 }, housekeeping: false })],
  providers: CRASH_CHILD_WORKFLOWS,
})
class ChildKillWorkerModule {}

const app = await NestFactory.createApplicationContext(ChildKillWorkerModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
const close = (code: number) => void app.close().finally(() => process.exit(code));
process.on('message', (message: ChildKillParentMessage) => {
  if (message.type === 'shutdown') close(0);
});
// The spec is gone: do not linger as an orphan running steps.
process.on('disconnect', () => close(1));
process.send!({ type: 'ready' } satisfies ChildKillWorkerMessage);
