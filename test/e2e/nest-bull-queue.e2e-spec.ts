/**
 * The `bull` adapter registers its queue through @nestjs/bull: the application's BullModule.forRoot
 * settings apply, the queue can be injected by its name, and the engine's consumer is a processor
 * Nest starts. Real Redis, each test on keys of its own prefix.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { BullModule, getQueueToken, InjectQueue } from '@nestjs/bull';
import { Injectable, type DynamicModule } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type Bull from 'bull';
import { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule, QUEUE_PORT, QueueConfigurationError, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { engineLogger } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { journalOf, QueueParkedWorkflow, queueJournal, QueueThreeStepWorkflow } from '../src/bull-workflows.js';

const QUEUE_NAME = 'gd-nest-bull';

/** An application service that reaches the engine's queue the way bull-board or an admin page would. */
@Injectable()
class QueueInspector {
  constructor(@InjectQueue(QUEUE_NAME) readonly queue: Bull.Queue) {}
}

function nestBullSuite(kind: DatabaseKind): void {
  let moduleRef: TestingModule | undefined;
  const redis = new Redis(redisUrl());
  // Unique per jest worker and database: parallel runs never share keys.
  const prefix = (test: string) => `gd-e2e-nest-bull-${process.pid}-${kind}-${test}`;

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
    for (const key of await redis.keys(`gd-e2e-nest-bull-${process.pid}-${kind}-*`)) await redis.del(key);
    await clearDefaultPrefix();
    redis.disconnect();
  });

  async function boot(imports: Array<DynamicModule | Promise<DynamicModule>>): Promise<TestingModule> {
    await prepareDatabase(kind);
    moduleRef = await Test.createTestingModule({
      imports: [TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false }), ...imports],
      providers: [QueueThreeStepWorkflow, QueueParkedWorkflow, QueueInspector],
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
      BullModule.forRoot({ redis: redisUrl(), prefix: prefix('root') }),
      GenevaDriveModule.forRoot({ queue: { adapter: 'bull', name: QUEUE_NAME, concurrency: 2 }, housekeeping: false, logger: engineLogger() }),
    ]);
    const adapter = app.get(QUEUE_PORT) as BullQueueAdapter;
    const injected = app.get(QueueInspector).queue;
    expect(injected).toBe(adapter.queue);
    expect(app.get(getQueueToken(QUEUE_NAME))).toBe(adapter.queue);

    const wf = await startThreeSteps(app);
    await finish(app, wf);

    // A parked step leaves its job in Redis under the forRoot prefix, and the injected queue reads it.
    const heroes = app.get<DataSource>(getDataSourceToken()).getRepository(TestHero);
    const parked = await app.get(WorkflowService).start(QueueParkedWorkflow, await heroes.save(heroes.create({ name: 'Bob' })));
    const execution = (await app.get(WorkflowService).currentExecution(parked))!;
    const job = await waitUntil('the parked job', () => injected.getJob(execution.id));
    expect(job.data).toEqual({ executionId: execution.id, workflowId: parked.id, heroType: 'TestHero', heroId: parked.heroId });
    expect(await injected.getJobCounts()).toMatchObject({ delayed: 1 });
    expect(await redis.exists(`${prefix('root')}:${QUEUE_NAME}:${execution.id}`)).toBe(1);
    expect(await redis.keys(`bull:${QUEUE_NAME}:*`)).toEqual([]);
  });

  it("passes Bull's own options through, over BullModule.forRoot's", async () => {
    const app = await boot([
      BullModule.forRoot({ redis: redisUrl(), prefix: 'not-this-one', settings: { lockDuration: 1000 } }),
      GenevaDriveModule.forRoot({
        queue: {
          adapter: 'bull',
          name: QUEUE_NAME,
          prefix: prefix('options'),
          settings: { lockDuration: 45_000, stalledInterval: 20_000 },
          limiter: { max: 50, duration: 1000 },
          defaultJobOptions: { timeout: 60_000 },
        },
        housekeeping: false,
        logger: engineLogger(),
      }),
    ]);
    const queue = app.get(QueueInspector).queue as Bull.Queue & { settings: Record<string, unknown>; limiter: unknown; defaultJobOptions: Record<string, unknown> };
    expect(queue.settings).toMatchObject({ lockDuration: 45_000, stalledInterval: 20_000 });
    expect(queue.limiter).toMatchObject({ max: 50, duration: 1000 });

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
      GenevaDriveModule.forRoot({ queue: { adapter: 'bull', name: QUEUE_NAME, redis: redisUrl(), prefix: prefix('standalone') }, housekeeping: false, logger: engineLogger() }),
    ]);
    await finish(app, await startThreeSteps(app));
    expect((await redis.keys(`${prefix('standalone')}:${QUEUE_NAME}:*`)).length).toBeGreaterThan(0);
  });

  it('forRootAsync: a bull queue declared beside useFactory is registered, with the factory giving the rest', async () => {
    const app = await boot([
      BullModule.forRoot({ redis: redisUrl(), prefix: prefix('async') }),
      GenevaDriveModule.forRootAsync({
        queue: { adapter: 'bull', name: QUEUE_NAME },
        useFactory: async () => ({ housekeeping: false as const, logger: engineLogger() }),
      }),
    ]);
    expect(app.get(QueueInspector).queue).toBe((app.get(QUEUE_PORT) as BullQueueAdapter).queue);
    await finish(app, await startThreeSteps(app));
  });

  it("forRootAsync: a bull queue returned by the factory is refused at boot, saying where it goes", async () => {
    // The compilation fails, leaving no application to close: without TypeORM, no connection stays open.
    const build = Test.createTestingModule({
      imports: [GenevaDriveModule.forRootAsync({ useFactory: () => ({ queue: { adapter: 'bull' as const, redis: redisUrl() }, housekeeping: false as const }) })],
    })
      .setLogger(engineLogger())
      .compile();
    await expect(build).rejects.toThrow(QueueConfigurationError);
    await expect(build).rejects.toThrow(/declare `queue` beside useFactory/);
  });
}

if (redisAvailable()) {
  describeEachDatabase('bull queue through @nestjs/bull', nestBullSuite);
} else {
  describe.skip('bull queue through @nestjs/bull (Redis not reachable)', () => describeEachDatabase('bull queue through @nestjs/bull', nestBullSuite));
}
