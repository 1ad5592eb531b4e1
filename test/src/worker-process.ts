/**
 * A geneva-drive worker as a separate OS process, for the multi-process spec. The spec compiles this
 * file (and what it imports) with `test/tsconfig.worker.json` and forks the output with an IPC channel.
 *
 * Configuration comes from the environment (the jest worker's environment is inherited, so the
 * database URLs and JEST_WORKER_ID match the spec's):
 *   GD_WORKER_DB           sqlite | postgres | mysql
 *   GD_WORKER_ADAPTER      bull | bullmq (default bull)
 *   GD_WORKER_REDIS        Redis URL
 *   GD_WORKER_PREFIX       Redis key prefix (the spec's)
 *   GD_WORKER_QUEUE        queue name (the spec's)
 *   GD_WORKER_CONCURRENCY  step jobs at once (default 2)
 *   GD_WORKER_SQLITE_FILE  the spec's SQLite file (this compiled copy would otherwise resolve another)
 *
 * Messages to the parent: { type: 'ready', pid }, { type: 'active', jobId, executionId },
 * { type: 'completed' | 'failed', jobId, executionId, error? }, { type: 'executed', requestId, ok,
 * error?, startedAt, finishedAt }, { type: 'paused', pid }. From the parent: { type: 'execute',
 * requestId, executionId } (calls ExecutorService.execute directly), { type: 'pause' } (its worker
 * takes no more jobs; the process stays up) and { type: 'shutdown' }.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type { DataSourceOptions } from 'typeorm';
import { ExecutorService, GenevaDriveModule, QUEUE_PORT } from '../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { REDIS_QUEUE_DRIVERS, type JobEvent, type RedisAdapter } from './redis-queues.js';
import { WORKER_WORKFLOWS } from './worker-workflows.js';

export type WorkerMessage =
  | { type: 'ready' | 'paused'; pid: number }
  | { type: 'active' | 'completed' | 'failed'; pid: number; jobId: string; executionId: string; error?: string }
  | { type: 'executed'; pid: number; requestId: number; ok: boolean; error?: string; startedAt: number; finishedAt: number };

export type ParentMessage = { type: 'execute'; requestId: number; executionId: string } | { type: 'pause' } | { type: 'shutdown' };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`worker-process: ${name} is not set`);
  return value;
}

function send(message: WorkerMessage): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const kind = required('GD_WORKER_DB') as DatabaseKind;
  const sqliteFile = process.env.GD_WORKER_SQLITE_FILE;
  const database = { ...dataSourceOptions(kind), ...(kind === 'sqlite' && sqliteFile ? { database: sqliteFile } : {}) } as DataSourceOptions;
  const driver = REDIS_QUEUE_DRIVERS[(process.env.GD_WORKER_ADAPTER ?? 'bull') as RedisAdapter];

  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...database, migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({
        queue: driver.options({
          redis: required('GD_WORKER_REDIS'),
          prefix: required('GD_WORKER_PREFIX'),
          name: required('GD_WORKER_QUEUE'),
          concurrency: Number(process.env.GD_WORKER_CONCURRENCY ?? '2'),
        }),
        housekeeping: false,
      }),
    ],
    providers: [...WORKER_WORKFLOWS],
  })
  class WorkerModule {}

  const app = await NestFactory.createApplicationContext(WorkerModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
  const port = app.get(QUEUE_PORT);
  const jobEvent = (type: 'active' | 'completed' | 'failed') => (job: JobEvent & { message?: string }) =>
    send({ type, pid: process.pid, jobId: job.jobId, executionId: job.executionId, ...(job.message ? { error: job.message } : {}) });
  driver.onActive(port, jobEvent('active'));
  driver.onCompleted(port, jobEvent('completed'));
  driver.onFailed(port, jobEvent('failed'));

  const executor = app.get(ExecutorService);
  let closing: Promise<void> | undefined;
  const shutdown = (code: number) => {
    closing ??= app
      .close()
      .catch((error) => console.error('worker-process: close failed', error))
      .finally(() => process.exit(code));
  };

  process.on('message', (message: ParentMessage) => {
    if (message.type === 'shutdown') return shutdown(0);
    if (message.type === 'pause') {
      driver.pauseWorker(port).then(
        () => send({ type: 'paused', pid: process.pid }),
        (error) => console.error('worker-process: pause failed', error),
      );
      return;
    }
    if (message.type === 'execute') {
      const startedAt = Date.now();
      executor.execute(message.executionId).then(
        () => send({ type: 'executed', pid: process.pid, requestId: message.requestId, ok: true, startedAt, finishedAt: Date.now() }),
        (error) => send({ type: 'executed', pid: process.pid, requestId: message.requestId, ok: false, error: String(error), startedAt, finishedAt: Date.now() }),
      );
    }
  });
  // The parent is gone (killed, crashed): do not linger as an orphan consuming the queue.
  process.on('disconnect', () => shutdown(1));

  send({ type: 'ready', pid: process.pid });
}

main().catch((error) => {
  console.error('worker-process: failed to start', error);
  process.exit(1);
});
