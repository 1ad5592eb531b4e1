/**
 * A geneva-drive worker with tracing, in its own OS process, for the tracing spec
 * (test/e2e/tracing.e2e-spec.ts compiles it with tsc and forks it with an IPC channel). It consumes
 * the spec's Bull or BullMQ queue with GenevaDriveTracingModule, the OpenTelemetry SDK's in-memory exporter as
 * the global tracer provider and the async-hooks context manager, as an app would set them up.
 *
 * Environment: GD_TRACING_DB (sqlite | postgres | mysql), GD_TRACING_SQLITE_FILE (for SQLite: this
 * compiled copy of databases.ts would otherwise resolve another file), GD_TRACING_ADAPTER (bull |
 * bullmq), GD_TRACING_REDIS,
 * GD_TRACING_PREFIX, GD_TRACING_QUEUE. It sends { type: 'ready' } once booted, answers
 * { type: 'spans' } with the spans finished so far, and closes on { type: 'shutdown' }.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { GenevaDriveModule } from '../../libs/geneva-drive/src/index.js';
import { GenevaDriveTracingModule } from '../../libs/geneva-drive/src/tracing/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { inMemoryTracerProvider, TRACING_WORKFLOWS, type SpanSummary } from './tracing-workflows.js';

export type TracingWorkerMessage = { type: 'ready' } | { type: 'spans'; spans: SpanSummary[] };
export type TracingParentMessage = { type: 'spans' } | { type: 'shutdown' };

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`tracing-worker: ${name} is not set`);
  return value;
};

const kind = env('GD_TRACING_DB') as DatabaseKind;
const options = { ...dataSourceOptions(kind), migrations: [], migrationsRun: false };
if (kind === 'sqlite') Object.assign(options, { database: env('GD_TRACING_SQLITE_FILE') });

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const tracing = inMemoryTracerProvider();
trace.setGlobalTracerProvider(tracing.provider);

@Module({
  imports: [
    TypeOrmModule.forRoot(options),
    GenevaDriveModule.forRoot({
      queue: {
        adapter: env('GD_TRACING_ADAPTER') as 'bull' | 'bullmq',
        redis: env('GD_TRACING_REDIS'),
        prefix: env('GD_TRACING_PREFIX'),
        name: env('GD_TRACING_QUEUE'),
        concurrency: 1,
      },
      housekeeping: false,
    }),
    GenevaDriveTracingModule.forRoot(),
  ],
  providers: [...TRACING_WORKFLOWS],
})
class TracingWorkerModule {}

const app = await NestFactory.createApplicationContext(TracingWorkerModule, { logger: ['error', 'warn'] });
const send = (message: TracingWorkerMessage) => process.send!(message);
process.on('message', (message: TracingParentMessage) => {
  if (message.type === 'spans') send({ type: 'spans', spans: tracing.spans() });
  if (message.type === 'shutdown') void app.close().then(() => process.exit(0));
});
// The parent is gone: do not linger consuming the queue.
process.on('disconnect', () => void app.close().then(() => process.exit(1)));
send({ type: 'ready' });
