/**
 * A geneva-drive worker in its own OS process for the poison-step proof
 * (test/e2e/poison-step.e2e-spec.ts compiles it with tsc and forks it with an IPC channel).
 *
 * It boots on the jest worker's database (the inherited environment names the servers and
 * JEST_WORKER_ID) with the local queue, which rebuilds its timers from the scheduled executions at
 * boot: whatever is due runs here, and PoisonWorkflow's step then kills the process. It sends
 * { type: 'ready' } once booted and closes the application on { type: 'shutdown' }.
 *
 * Environment: GD_POISON_DB (sqlite | postgres | mysql) and, for SQLite, GD_POISON_SQLITE_FILE (this
 * compiled copy of databases.ts would otherwise resolve another file).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GenevaDriveModule } from '../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { PoisonWorkflow } from './poison-workflows.js';

export type PoisonWorkerMessage = { type: 'ready' };
export type PoisonParentMessage = { type: 'shutdown' };

const kind = process.env.GD_POISON_DB as DatabaseKind;
const options = { ...dataSourceOptions(kind), migrations: [], migrationsRun: false };
if (kind === 'sqlite') Object.assign(options, { database: process.env.GD_POISON_SQLITE_FILE });

@Module({
  imports: [TypeOrmModule.forRoot(options), GenevaDriveModule.forRoot({ queue: { adapter: 'local' }, housekeeping: false })],
  providers: [PoisonWorkflow],
})
class PoisonWorkerModule {}

const app = await NestFactory.createApplicationContext(PoisonWorkerModule, { logger: ['error', 'warn'] });
process.on('message', (message: PoisonParentMessage) => {
  if (message.type === 'shutdown') void app.close().then(() => process.exit(0));
});
process.send!({ type: 'ready' } satisfies PoisonWorkerMessage);
