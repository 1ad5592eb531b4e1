/**
 * The `bull` and `bullmq` adapters register their queue through @nestjs/bull and @nestjs/bullmq (each
 * suite runs on both): the application's BullModule.forRoot settings apply, the queue can be injected
 * by its name, and the engine's consumer is a processor Nest starts. Real Redis, each test on keys of
 * its own prefix.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, InjectQueue } from '@nestjs/bull';
import { BullModule as BullMqModule, InjectQueue as InjectBullMqQueue } from '@nestjs/bullmq';
import { Injectable, type DynamicModule, type Type } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type Bull from 'bull';
import type { Queue as BullMqQueue } from 'bullmq';
import { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule, QUEUE_PORT, QueueConfigurationError, WorkflowService, type QueueAdapterOptions, type WorkflowRecord } from 'geneva-drive';
import type { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import type { BullMqQueueAdapter } from '../../libs/geneva-drive/src/queue/bullmq-queue.adapter.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { engineLogger } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { journalOf, QueueParkedWorkflow, queueJournal, QueueThreeStepWorkflow } from '../src/bull-workflows.js';
import { REDIS_QUEUE_DRIVERS, type RedisAdapter } from '../src/redis-queues.js';

const QUEUE_NAME = 'gd-nest-bull';

/** An application service that reaches the engine's queue the way bull-board or an admin page would. */
@Injectable()
class QueueInspector {
  constructor(@InjectQueue(QUEUE_NAME) readonly queue: Bull.Queue) {}
}

@Injectable()
class BullMqQueueInspector {
  constructor(@InjectBullMqQueue(QUEUE_NAME) readonly queue: BullMqQueue) {}
}

/** What differs between the two Nest packages: the root module, the injecting service, and each library's own options. */
interface NestQueuePackage {
  adapter: RedisAdapter;
  forRoot(options: { prefix: string; own?: boolean }): DynamicModule;
  inspector: Type<{ queue: unknown }>;
  /** The library's own options given to the engine, over those of forRoot({ own: true }). */
  ownOptions: Record<string, unknown>;
  /** Checks the own options reached the queue (and its worker). */
  checkOwnOptions(app: TestingModule): Promise<void>;
}

const NEST_PACKAGES: NestQueuePackage[] = [
  {
    adapter: 'bull',
    forRoot: ({ prefix, own }) => BullModule.forRoot({ redis: redisUrl(), prefix, ...(own ? { settings: { lockDuration: 1000 } } : {}) }),
    inspector: QueueInspector,
    ownOptions: { settings: { lockDuration: 45_000, stalledInterval: 20_000 }, limiter: { max: 50, duration: 1000 }, defaultJobOptions: { timeout: 60_000 } },
    async checkOwnOptions(app) {
      const queue = app.get(QueueInspector).queue as Bull.Queue & { settings: Record<string, unknown>; limiter: unknown };
      expect(queue.settings).toMatchObject({ lockDuration: 45_000, stalledInterval: 20_000 });
      expect(queue.limiter).toMatchObject({ max: 50, duration: 1000 });
    },
  },
  {
    adapter: 'bullmq',
    forRoot: ({ prefix, own }) => BullMqModule.forRoot({ connection: { url: redisUrl() }, prefix, ...(own ? { defaultJobOptions: { keepLogs: 1 } } : {}) }),
    inspector: BullMqQueueInspector,
    ownOptions: { worker: { lockDuration: 45_000, stalledInterval: 20_000, limiter: { max: 50, duration: 1000 } }, defaultJobOptions: { keepLogs: 7, attempts: 5 } },
    async checkOwnOptions(app) {
      const adapter = app.get(QUEUE_PORT) as BullMqQueueAdapter;
      expect(adapter.worker!.opts).toMatchObject({ lockDuration: 45_000, stalledInterval: 20_000, limiter: { max: 50, duration: 1000 }, concurrency: 1 });
      expect(adapter.queue.defaultJobOptions).toMatchObject({ keepLogs: 7, attempts: 5 });
    },
  },
];

/** The queue the engine runs on. */
const engineQueue = (app: TestingModule) => (app.get(QUEUE_PORT) as BullQueueAdapter | BullMqQueueAdapter).queue;

function nestBullSuite(nest: NestQueuePackage, kind: DatabaseKind): void {
  let moduleRef: TestingModule | undefined;
  const redis = new Redis(redisUrl());
  const driver = REDIS_QUEUE_DRIVERS[nest.adapter];
  const queueOptions = (options: Record<string, unknown>) => ({ adapter: nest.adapter, name: QUEUE_NAME, ...options }) as QueueAdapterOptions;
  // Unique per adapter, jest worker and database: parallel runs never share keys.
  const prefix = (test: string) => `gd-e2e-nest-${nest.adapter}-${process.pid}-${kind}-${test}`;

  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
    queueJournal.length = 0; // workflow ids start over with each fresh schema
  });

  // Nothing should ever land under Bull's default prefix; clear what an earlier, failed run left there.
  const clearDefaultPrefix = async () => {
    for (const key of await redis.keys(`bull:${QUEUE_NAME}:*`)) await redis.del(key);
  };
  beforeAll(clearDefaultPrefix);

  afterAll(async () => {
    for (const key of await redis.keys(`gd-e2e-nest-${nest.adapter}-${process.pid}-${kind}-*`)) await redis.del(key);
    await clearDefaultPrefix();
    redis.disconnect();
  });

  async function boot(imports: Array<DynamicModule | Promise<DynamicModule>>): Promise<TestingModule> {
    await prepareDatabase(kind);
    moduleRef = await Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false }), ...imports],
      providers: [QueueThreeStepWorkflow, QueueParkedWorkflow, nest.inspector],
    })
      .setLogger(engineLogger())
      .compile();
    await moduleRef.init();
    return moduleRef;
  }

  async function startThreeSteps(app: TestingModule): Promise<WorkflowRecord> {
    const heroes = app.get<DataSource>(getDataSourceToken()).getRepository(TestHero);
    return app.get(WorkflowService).start(QueueThreeStepWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
  }

  async function finish(app: TestingModule, wf: WorkflowRecord): Promise<void> {
    await waitUntil(`workflow ${wf.id} to finish`, async () => (await app.get(WorkflowService).find(wf.id)).state === 'finished');
    expect(journalOf(wf.id)).toEqual(['one', 'two', 'three']);
  }

  it("uses BullModule.forRoot's connection and prefix, and the application injects the engine's queue", async () => {
    const app = await boot([
      nest.forRoot({ prefix: prefix('root') }),
      GenevaDriveModule.forRoot({ queue: queueOptions({ concurrency: 2 }), housekeeping: false, logger: engineLogger() }),
    ]);
    const injected = app.get(nest.inspector).queue;
    expect(injected).toBe(engineQueue(app));
    expect(app.get(getQueueToken(QUEUE_NAME))).toBe(engineQueue(app));

    const wf = await startThreeSteps(app);
    await finish(app, wf);

    // A parked step leaves its job in Redis under the forRoot prefix, and the injected queue reads it.
    const heroes = app.get<DataSource>(getDataSourceToken()).getRepository(TestHero);
    const parked = await app.get(WorkflowService).start(QueueParkedWorkflow, await heroes.save(heroes.create({ name: 'Bob' })));
    const execution = (await app.get(WorkflowService).currentExecution(parked))!;
    const queued = injected as { getJob(id: string): Promise<{ data: unknown } | null | undefined>; getJobCounts(): Promise<Record<string, number>> };
    const job = await waitUntil('the parked job', () => queued.getJob(driver.queueJobId(execution.id)));
    expect(job.data).toEqual({ executionId: execution.id, workflowId: parked.id, workflowType: parked.type, stepName: execution.stepName, heroType: 'TestHero', heroId: parked.heroId });
    expect(await queued.getJobCounts()).toMatchObject({ delayed: 1 });
    expect(await redis.exists(`${prefix('root')}:${QUEUE_NAME}:${driver.queueJobId(execution.id)}`)).toBe(1);
    expect(await redis.keys(`bull:${QUEUE_NAME}:*`)).toEqual([]);
  });

  it("passes the queue library's own options through, over BullModule.forRoot's", async () => {
    const app = await boot([
      nest.forRoot({ prefix: 'not-this-one', own: true }),
      GenevaDriveModule.forRoot({ queue: queueOptions({ prefix: prefix('options'), ...nest.ownOptions }), housekeeping: false, logger: engineLogger() }),
    ]);
    await nest.checkOwnOptions(app);

    const wf = await startThreeSteps(app);
    await finish(app, wf);
    // The engine's per-job options win over the defaults; the others apply.
    const history = await app.get(WorkflowService).executionHistory(wf);
    expect(history).toHaveLength(3);
    expect(await redis.keys(`not-this-one:${QUEUE_NAME}:*`)).toEqual([]);
    expect((await redis.keys(`${prefix('options')}:${QUEUE_NAME}:*`)).length).toBeGreaterThan(0);
  });

  it('works without BullModule.forRoot, from the redis option alone', async () => {
    const app = await boot([
      GenevaDriveModule.forRoot({ queue: queueOptions({ redis: redisUrl(), prefix: prefix('standalone') }), housekeeping: false, logger: engineLogger() }),
    ]);
    await finish(app, await startThreeSteps(app));
    expect((await redis.keys(`${prefix('standalone')}:${QUEUE_NAME}:*`)).length).toBeGreaterThan(0);
  });

  it(`forRootAsync: a ${nest.adapter} queue declared beside useFactory is registered, with the factory giving the rest`, async () => {
    const app = await boot([
      nest.forRoot({ prefix: prefix('async') }),
      GenevaDriveModule.forRootAsync({
        queue: queueOptions({}),
        useFactory: async () => ({ housekeeping: false as const, logger: engineLogger() }),
      }),
    ]);
    expect(app.get(nest.inspector).queue).toBe(engineQueue(app));
    await finish(app, await startThreeSteps(app));
  });

  it(`forRootAsync: a ${nest.adapter} queue returned by the factory is refused at boot, saying where it goes`, async () => {
    // The compilation fails, leaving no application to close: without TypeORM, no connection stays open.
    const build = Test.createTestingModule({
      imports: [GenevaDriveModule.forRootAsync({ useFactory: () => ({ queue: queueOptions({ redis: redisUrl() }), housekeeping: false as const }) })],
    })
      .setLogger(engineLogger())
      .compile();
    await expect(build).rejects.toThrow(QueueConfigurationError);
    await expect(build).rejects.toThrow(/declare `queue` beside useFactory/);
  });
}

function bothPackages(): void {
  for (const nest of NEST_PACKAGES) {
    describeEachDatabase(`${nest.adapter} queue through @nestjs/${nest.adapter}`, (kind) => nestBullSuite(nest, kind));
  }
}

if (redisAvailable()) {
  bothPackages();
} else {
  describe.skip('Redis queues through @nestjs/bull and @nestjs/bullmq (Redis not reachable)', bothPackages);
}
