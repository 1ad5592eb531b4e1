/**
 * GenevaDriveHealthIndicator through @nestjs/terminus' HealthCheckService, on a real database and
 * each Redis queue adapter (`bull`, `bullmq`): up, down when the queue stops answering, and down past the gauges'
 * thresholds read from the last housekeeping run.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { HousekeepingService, QUEUE_PORT, WorkflowService } from 'geneva-drive';
import { GenevaDriveHealthIndicator } from 'geneva-drive/terminus';
import { describeEachDatabase, redisAvailable, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { sleep, waitUntil } from '../src/bull-wait.js';
import { DeliveryWorkflow } from '../src/housekeeping-workflows.js';
import { REDIS_QUEUE_DRIVERS, type RedisQueueDriver } from '../src/redis-queues.js';

@Module({ imports: [TerminusModule], providers: [GenevaDriveHealthIndicator], exports: [GenevaDriveHealthIndicator] })
class HealthModule {}

function healthSuite(driver: RedisQueueDriver, kind: DatabaseKind): void {
  let app: TestApp | undefined;
  const prefix = `gd-e2e-health-${driver.adapter}-${process.pid}-${kind}`;

  beforeEach(async () => {
    app = await createTestApp(kind, [DeliveryWorkflow], {
      queue: driver.options({ prefix, name: 'gd-health' }),
      waitingVisibilityThreshold: 1,
      imports: [HealthModule],
    });
    // Bull rejects, unhandled, when a queue is closed before its processor finished connecting.
    await waitUntil('the processor to connect', async () => (await queue().workerCount()) > 0);
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  const queue = () => driver.view(app!.moduleRef.get(QUEUE_PORT));
  const check = (thresholds?: { waitingOverdue?: number; stuck?: number }) => {
    const indicator = app!.moduleRef.get(GenevaDriveHealthIndicator);
    return app!.moduleRef
      .get(HealthCheckService)
      .check([() => indicator.isHealthy('workflows', thresholds)])
      .then((result) => result, (error: { response: unknown }) => error.response);
  };

  it('is up when the database and the queue answer, with no gauges before housekeeping ran', async () => {
    expect(await check({ waitingOverdue: 0 })).toMatchObject({
      status: 'ok',
      info: { workflows: { status: 'up', database: 'up', queue: 'up', waitingOverdue: null, stuck: null } },
    });
  });

  it('is down when the queue no longer answers', async () => {
    await queue().close();
    expect(await check()).toMatchObject({ status: 'error', error: { workflows: { status: 'down', database: 'up', queue: 'down: Connection is closed.' } } });
  });

  it('is down past the overdue threshold of the last housekeeping run, up without thresholds', async () => {
    const heroes = app!.dataSource.getRepository(TestHero);
    await app!.moduleRef.get(WorkflowService).start(DeliveryWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    await sleep(300); // parked, and past the 1 ms visibility threshold
    await app!.moduleRef.get(HousekeepingService).run();

    expect(await check({ waitingOverdue: 0 })).toMatchObject({ status: 'error', error: { workflows: { status: 'down', waitingOverdue: 1, stuck: 0 } } });
    expect(await check({ waitingOverdue: 1 })).toMatchObject({ status: 'ok', info: { workflows: { status: 'up', waitingOverdue: 1 } } });
    expect(await check()).toMatchObject({ status: 'ok' });
  });
}

function bothAdapters(): void {
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) describeEachDatabase(`GenevaDriveHealthIndicator on ${driver.adapter}`, (kind) => healthSuite(driver, kind));
}

if (redisAvailable()) {
  bothAdapters();
} else {
  describe.skip('GenevaDriveHealthIndicator (Redis not reachable)', bothAdapters);
}
