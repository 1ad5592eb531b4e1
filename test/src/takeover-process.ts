/**
 * The victim process of the dead-worker takeover spec (test/e2e/dead-worker-takeover.e2e-spec.ts
 * compiles it with test/tsconfig.takeover.json and forks it): a worker on the Redis queue
 * (concurrency 2, chainSteps on, housekeeping off) whose step bodies stop at known points
 * (takeover-workflows.ts) until the spec SIGKILLs it. Sends { type: 'ready' } once booted.
 *
 * Environment: GD_TAKEOVER_DB (postgres | mysql), GD_TAKEOVER_ADAPTER (bull | bullmq),
 * GD_TAKEOVER_REDIS, GD_TAKEOVER_PREFIX, GD_TAKEOVER_QUEUE; GD_TAKEOVER_VICTIM=1.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { GenevaDriveModule } from '../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { REDIS_QUEUE_DRIVERS, type RedisAdapter } from './redis-queues.js';
import { TAKEOVER_LOCKS, TAKEOVER_WORKFLOWS, type TakeoverVictimMessage } from './takeover-workflows.js';

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`takeover-process: ${name} is not set`);
  return value;
};
const adapter = env('GD_TAKEOVER_ADAPTER') as RedisAdapter;
const queue = REDIS_QUEUE_DRIVERS[adapter].options({ redis: env('GD_TAKEOVER_REDIS'), prefix: env('GD_TAKEOVER_PREFIX'), name: env('GD_TAKEOVER_QUEUE'), concurrency: 2 });

@Module({
  imports: [
    TypeOrmModule.forRoot({ ...dataSourceOptions(env('GD_TAKEOVER_DB') as DatabaseKind), migrations: [], migrationsRun: false }),
    GenevaDriveModule.forRoot({ queue: { ...queue, ...TAKEOVER_LOCKS[adapter] }, housekeeping: false, chainSteps: { maxDuration: '1h' } }),
  ],
  providers: TAKEOVER_WORKFLOWS,
})
class TakeoverVictimModule {}

const app = await NestFactory.createApplicationContext(TakeoverVictimModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
process.on('disconnect', () => void app.close().finally(() => process.exit(1)));
process.on('message', (message: { type: 'shutdown' }) => {
  if (message.type === 'shutdown') void app.close().finally(() => process.exit(0));
});
process.send!({ type: 'ready' } satisfies TakeoverVictimMessage);
