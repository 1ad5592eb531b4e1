/**
 * A geneva-drive worker in its own OS process, for the resumable crash proof
 * (test/e2e/resumable-crash.e2e-spec.ts compiles this file with tsc and runs it with node).
 *
 * It boots a Nest application context on the jest worker's database (the environment it inherits
 * names the servers and JEST_WORKER_ID, hence the database) with the local queue adapter, which
 * rebuilds its timers from the scheduled executions at boot: whatever is due runs here. It prints
 * `ready` once booted and closes the application on SIGTERM.
 *
 * Environment: GD_CRASH_DB (sqlite | postgres | mysql) and, for SQLite, GD_CRASH_SQLITE_FILE (the
 * compiled copy of databases.ts would otherwise resolve the file relative to its own location).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GenevaDriveModule } from '../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { CRASH_ENTITIES, CrashWalkWorkflow } from './resumable-crash.js';

const kind = process.env.GD_CRASH_DB as DatabaseKind;
const options = { ...dataSourceOptions(kind, { entities: CRASH_ENTITIES }), migrations: [], migrationsRun: false };
if (kind === 'sqlite') Object.assign(options, { database: process.env.GD_CRASH_SQLITE_FILE });
// Commits that do not wait for the WAL flush: a third of the time per checkpoint on a busy machine.
// What the crash proof tests is unchanged: a committed row is visible to everyone at once and
// survives the death of this client process (only a crash of the database server could lose it).
if (kind === 'postgres') Object.assign(options, { extra: { options: '-c synchronous_commit=off' } });

@Module({
  imports: [TypeOrmModule.forRoot(options), GenevaDriveModule.forRoot({ queue: { adapter: 'local' }, housekeeping: false })],
  providers: [CrashWalkWorkflow],
})
class ResumableWorkerModule {}

const app = await NestFactory.createApplicationContext(ResumableWorkerModule, { logger: ['error', 'warn'] });
app.enableShutdownHooks(['SIGTERM']);
// The local queue's timers are unref'd and a worker context has no server: keep the process up
// until the parent sends SIGTERM (Nest then closes the application and re-raises the signal).
setInterval(() => undefined, 60_000);
console.log('ready');
