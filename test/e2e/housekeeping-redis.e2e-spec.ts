/**
 * The lost-enqueue proof on real Redis (SIG-34), with each Redis queue adapter (`bull`, `bullmq`): a signal commits — the signal claimed, the
 * parked execution `scheduled` — but its after-commit enqueue fails because the queue's Redis client
 * is closed. A fresh application on the same database finds nothing in its queue; housekeeping sees the
 * overdue `scheduled` row and enqueues the SAME execution again (job id = execution id); the queue's
 * worker runs it, and the signal is consumed exactly once. A second run finds the job still waiting
 * in the queue and counts it as still queued, not as recovered. Also: an enqueue that fails during
 * recovery is reported in `unrecoverable`, never counted as recovered.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  HousekeepingService,
  QUEUE_PORT,
  Signal,
  SignalService,
  StepExecution,
  WorkflowRecord,
  WorkflowService,
  type GenevaDriveModuleOptions,
} from 'geneva-drive';
import { describeEachDatabase, redisAvailable, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { ErrorLines } from '../src/error-lines.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { ChoreWorkflow, DeliveryWorkflow, hkJournal } from '../src/housekeeping-workflows.js';
import { REDIS_QUEUE_DRIVERS, type RedisQueueDriver } from '../src/redis-queues.js';

const HOUR = 3_600_000;
const QUEUE_NAME = 'gd-housekeeping';
const RUN_ID = `${process.pid}-${Date.now().toString(36)}`;

/** Polls `condition` until it holds; fails with `what` after `timeoutMs` (a guard, not a timing assertion). */
async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function obliterate(driver: RedisQueueDriver, prefix: string): Promise<void> {
  const queue = driver.handle(QUEUE_NAME, prefix);
  try {
    await queue.obliterate();
  } finally {
    await queue.close();
  }
}

if (!redisAvailable()) {
  const reason = 'Redis did not answer the global setup PING (set GD_REDIS_URL, or GENEVA_DRIVE_TEST_REQUIRE=redis to fail instead)';
  console.warn(`housekeeping-redis: skipped — ${reason}`);
  describe.skip(`housekeeping with Redis queues (skipped: ${reason})`, () => {
    it('lost-enqueue proof', () => undefined);
  });
} else {
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
    describeEachDatabase(`housekeeping with ${driver.adapter} on Redis`, (kind) => redisSuite(driver, kind));
  }
}

function redisSuite(driver: RedisQueueDriver, kind: DatabaseKind): void {
  const prefixes = ['a', 'b', 'c', 'd', 'e'].map((letter) => `gd-hk-${driver.adapter}-${RUN_ID}-${kind}-${letter}`);
  const queueOptions = (prefix: string, concurrency: number): GenevaDriveModuleOptions['queue'] => driver.options({ name: QUEUE_NAME, prefix, concurrency });
  const apps: TestApp[] = [];
  const boot = async (options: Parameters<typeof createTestApp>[2]) => {
    const app = await createTestApp(kind, [DeliveryWorkflow, ChoreWorkflow], options);
    apps.push(app);
    return app;
  };
  const close = async (app: TestApp) => {
    apps.splice(apps.indexOf(app), 1);
    await app.close();
  };

  beforeAll(async () => {
    for (const prefix of prefixes) await obliterate(driver, prefix);
  });
  afterAll(async () => {
    for (const app of apps.splice(0)) await app.close();
    for (const prefix of prefixes) await obliterate(driver, prefix);
  });

  it('a woken execution whose enqueue was lost is enqueued again (same execution, job id = execution id) by housekeeping in a fresh app, and a worker of the queue runs it: the signal is consumed exactly once', async () => {
    const [prefixA, prefixB] = prefixes;
    hkJournal.length = 0;

    // App A: enqueue-only. The workflow parks on `delivered`.
    const logger = new ErrorLines();
    const appA = await boot({ queue: queueOptions(prefixA, 0), logger });
    const heroes = appA.dataSource.getRepository(TestHero);
    const wf = await appA.moduleRef.get(WorkflowService).start(DeliveryWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    const parkedRow = await appA.gd.performNextStep(wf);
    expect(parkedRow).toMatchObject({ stepName: 'awaitDelivery', state: 'waiting' });

    // Its Redis client is closed, then the signal arrives: the transaction commits, the enqueue fails.
    await driver.view(appA.moduleRef.get(QUEUE_PORT)).close();
    const signal = await appA.moduleRef.get(SignalService).signal(wf, 'delivered', { payload: { parcel: 'P-42' } });
    expect(signal.duplicateDelivery).toBe(false);
    await until('the after-commit enqueue to fail', async () => logger.errors.some((line) => /Enqueue after commit failed/.test(line)));
    const woken = await appA.dataSource.getRepository(StepExecution).findOneByOrFail({ id: parkedRow!.id });
    expect(woken).toMatchObject({ state: 'scheduled', signalId: signal.id });
    expect(await appA.dataSource.getRepository(Signal).findOneByOrFail({ id: signal.id })).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });
    await close(appA);

    // App B: same database, a working (enqueue-only) queue on its own prefix. Nothing is queued.
    const appB = await boot({ prepare: false, queue: queueOptions(prefixB, 0), stuckScheduledThreshold: '15m' });
    const inspectB = driver.handle(QUEUE_NAME, prefixB);
    try {
      expect(await inspectB.getJob(woken.id)).toBeNull();
      const executions = appB.dataSource.getRepository(StepExecution);

      // Not overdue yet: housekeeping leaves it alone.
      expect(await appB.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckScheduledRecovered: 0, unrecoverable: [] });
      expect(await inspectB.getJob(woken.id)).toBeNull();

      // Overdue past stuckScheduledThreshold: two runs re-enqueue the same execution; Redis holds one job.
      // Only the first recovered anything: the second found the job still waiting in the queue.
      await executions.update(woken.id, { scheduledFor: new Date(Date.now() - HOUR) });
      const first = await appB.moduleRef.get(HousekeepingService).run();
      const second = await appB.moduleRef.get(HousekeepingService).run();
      expect(first).toMatchObject({ stuckScheduledRecovered: 1, stuckScheduledStillQueued: 0, stuckInProgressRecovered: 0, unrecoverable: [] });
      expect(second).toMatchObject({ stuckScheduledRecovered: 0, stuckScheduledStillQueued: 1, unrecoverable: [] });
      const job = await inspectB.getJob(woken.id);
      expect(job?.queueId).toBe(driver.queueJobId(woken.id));
      // The job names the workflow, its type, the step and the hero, so the executor locks and reads them without a lookup.
      expect(job?.data).toEqual({ executionId: woken.id, workflowId: wf.id, workflowType: wf.type, stepName: woken.stepName, heroType: wf.heroType, heroId: wf.heroId });
      const counts = await inspectB.counts();
      expect(counts.waiting + counts.delayed + counts.active).toBe(1);
      expect(await executions.countBy({ workflowId: wf.id })).toBe(1);
    } finally {
      await inspectB.close();
    }
    await close(appB);

    // App C: a worker on that queue runs the job: the woken step, then the next one.
    const appC = await boot({ prepare: false, queue: queueOptions(prefixB, 1), stuckScheduledThreshold: '15m' });
    await until('the workflow to finish', async () => (await appC.gd.reload(wf)).state === 'finished');

    expect(hkJournal).toEqual(['delivered P-42', 'archived']);
    const history = await appC.moduleRef.get(WorkflowService).executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['awaitDelivery', 'completed', 'success'],
      ['archive', 'completed', 'success'],
    ]);
    expect(history[0].id).toBe(woken.id);
    const signals = await appC.moduleRef.get(SignalService).list(wf);
    expect(signals).toHaveLength(1);
    expect(signals[0]).toMatchObject({ id: signal.id, state: 'consumed', claimed: 1, consumed: 1 });
    expect(await appC.moduleRef.get(HousekeepingService).run()).toMatchObject({
      stuckScheduledRecovered: 0,
      stuckScheduledStillQueued: 0,
      stuckInProgressRecovered: 0,
      unrecoverable: [],
    });
    await close(appC);
  });

  it('a job left in Redis in no list (a worker lost it in a Redis restart) does not count as still queued: housekeeping replaces it, and the step runs', async () => {
    hkJournal.length = 0;
    const app = await boot({ queue: queueOptions(prefixes[4], 0), stuckScheduledThreshold: '15m' });
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    const executions = app.dataSource.getRepository(StepExecution);
    const queue = driver.view(app.moduleRef.get(QUEUE_PORT));
    const wf = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Stranded' })));
    const [row] = await workflows.executionHistory(wf);
    // start() hands its job to the queue after it returns.
    await until('the job in Redis', async () => (await queue.getJob(row.id))?.state === 'waiting');

    // The job's data stays, in no list: an add of the same id would answer with it and add nothing.
    await queue.strand(row.id);
    expect((await queue.getJob(row.id))?.state).toBe(driver.adapter === 'bull' ? 'stuck' : 'unknown');
    await executions.update(row.id, { scheduledFor: new Date(Date.now() - HOUR) });
    const first = await app.moduleRef.get(HousekeepingService).run();
    expect(first).toMatchObject({ stuckScheduledRecovered: 1, stuckScheduledStillQueued: 0, unrecoverable: [] });
    expect((await queue.getJob(row.id))?.state).toBe('waiting');
    // The job put back is one that will run: the next run counts it as still queued.
    expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckScheduledRecovered: 0, stuckScheduledStillQueued: 1 });
    await close(app);

    const worker = await boot({ prepare: false, queue: queueOptions(prefixes[4], 1), stuckScheduledThreshold: '15m' });
    await until('the workflow to finish', async () => (await worker.gd.reload(wf)).state === 'finished');
    expect(hkJournal).toEqual(['sweep Stranded', 'mop Stranded']);
    await close(worker);
  });

  it('an enqueue that fails during recovery is reported in unrecoverable (not counted as recovered), and the run terminates', async () => {
    const prefix = prefixes[2];
    hkJournal.length = 0;
    const app = await boot({ queue: queueOptions(prefix, 0), stuckInProgressThreshold: '1h', stuckScheduledThreshold: '15m' });
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    const executions = app.dataSource.getRepository(StepExecution);

    const overdue = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Overdue' })));
    const [overdueRow] = await workflows.executionHistory(overdue);
    await executions.update(overdueRow.id, { scheduledFor: new Date(Date.now() - HOUR) });

    const crashed = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Crashed' })));
    const [crashedRow] = await workflows.executionHistory(crashed);
    await executions.update(crashedRow.id, { state: 'in_progress', startedAt: new Date(Date.now() - 2 * HOUR) });
    await app.dataSource.getRepository(WorkflowRecord).update(crashed.id, { state: 'performing', currentStepName: 'sweep' });

    await driver.view(app.moduleRef.get(QUEUE_PORT)).close();
    const summary = await app.moduleRef.get(HousekeepingService).run();

    // The in_progress row was closed and its successor committed, but the successor's job failed;
    // the overdue row's job failed too. Neither counts as recovered; both are scheduled and retried later.
    const crashedHistory = await workflows.executionHistory(crashed);
    expect(crashedHistory.map((e) => [e.id === crashedRow.id, e.state, e.outcome])).toEqual([
      [true, 'completed', 'recovered'],
      [false, 'scheduled', null],
    ]);
    expect(summary).toMatchObject({
      stuckInProgressRecovered: 0,
      stuckScheduledRecovered: 0,
      unrecoverable: [crashedHistory[1].id, overdueRow.id],
    });
    expect(await executions.findOneByOrFail({ id: overdueRow.id })).toMatchObject({ state: 'scheduled' });
    await close(app);
  });

  it('start() whose enqueue fails (the Redis client closed) still returns the committed workflow: the failure is logged for housekeeping, not thrown', async () => {
    const logger = new ErrorLines();
    const app = await boot({ queue: queueOptions(prefixes[3], 0), logger });
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    await driver.view(app.moduleRef.get(QUEUE_PORT)).close();

    // On PostgreSQL start() is one statement with no transaction around it: committed as it returns.
    const wf = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Lost' })));
    expect((await workflows.executionHistory(wf)).map((e) => e.state)).toEqual(['scheduled']);
    await until('the enqueue to fail', async () => logger.errors.some((line) => /Enqueue after commit failed/.test(line)));
    await close(app);
  });
}
