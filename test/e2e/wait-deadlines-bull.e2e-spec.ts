/**
 * Wait deadlines on the Bull queue, real Redis, nothing driven by hand: the deadline is a delayed
 * Bull job of its own id (`<execution id>-deadline`) that fires by itself, a lost one is recovered
 * by housekeeping, and a signal that wins leaves the deadline job a no-op.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import Bull from 'bull';
import { HousekeepingService, QUEUE_PORT, SignalService, StepExecution, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import type { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { DEADLINE_WORKFLOWS, deadlineJournal, InstantDeadlineWorkflow, resetDeadlineFixtures, RunOnTimeoutWorkflow, ShortDeadlineWorkflow } from '../src/deadline-workflows.js';
import { removePendingJobs, sleep, waitUntil } from '../src/bull-wait.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const QUEUE_NAME = 'geneva-drive-deadlines';

function bullDeadlineSuite(kind: DatabaseKind): void {
  const prefix = `gd-e2e-deadlines-${process.pid}-${kind}`;
  let admin: Bull.Queue;
  let app: TestApp;
  let queue: Bull.Queue<{ executionId: string }>;
  let workflows: WorkflowService;
  let hero: TestHero;
  const ran: string[] = [];
  const completedJobs = new Map<string, Bull.Job>();

  beforeAll(async () => {
    admin = new Bull(QUEUE_NAME, redisUrl(), { prefix });
    await admin.obliterate({ force: true });
    app = await createTestApp(kind, DEADLINE_WORKFLOWS, { queue: { adapter: 'bull', redis: redisUrl(), prefix, name: QUEUE_NAME, concurrency: 2 } });
    queue = (app.moduleRef.get(QUEUE_PORT) as BullQueueAdapter).queue;
    queue.on('completed', (job) => {
      ran.push(String(job.id));
      completedJobs.set(String(job.id), job);
    });
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(async () => {
    await app?.close();
    await admin?.obliterate({ force: true });
    await admin?.close();
  });
  beforeEach(async () => {
    await removePendingJobs(queue);
    await app.reset();
    resetDeadlineFixtures();
    ran.length = 0;
    completedJobs.clear();
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const finished = (wf: WorkflowRecord) => waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
  const parkedRow = (wf: WorkflowRecord) =>
    waitUntil('the step to park', async () => {
      const current = await workflows.currentExecution(wf);
      return current?.state === 'waiting' ? current : null;
    });
  // The deadline job is added to Redis after the commit that parks the step: a reader of the row may come first.
  const deadlineJob = (row: { id: string }) => waitUntil('the deadline job in Redis', () => queue.getJob(`${row.id}-deadline`));
  const pastDeadline = (id: string, agoMs: number) => app.dataSource.getRepository(StepExecution).update({ id }, { timeoutAt: new Date(Date.now() - agoMs) });

  it('the deadline is a delayed Bull job of its own id; it fires by itself and the body runs timed out', async () => {
    const wf = await workflows.start(ShortDeadlineWorkflow, hero);
    const row = await parkedRow(wf);
    await finished(wf);
    expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
    // Bull reports the deadline job complete after its handler returned: the timed-out run it enqueued may finish first.
    // Completed jobs are removed from Redis, so the job is read from the completion event.
    const job = await waitUntil('the deadline job to complete', () => completedJobs.get(`${row.id}-deadline`));
    expect(job.data).toEqual({ executionId: row.id, workflowId: wf.id, workflowType: wf.type, stepName: row.stepName, heroType: wf.heroType, heroId: wf.heroId });
    expect(job.opts.delay).toBeGreaterThan(0);
    // The timed-out run is due at once: it may start in this process rather than through Redis; the row records its job either way.
    expect((await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: row.id })).jobId).toBe(`${row.id}-timeout`);
  });

  it('a deadline job goes through Redis even when it is due as it is enqueued, never started in the enqueuing process', async () => {
    const wf = await workflows.start(InstantDeadlineWorkflow, hero);
    await finished(wf);
    expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
    const parked = (await workflows.executionHistory(wf)).find((execution) => execution.stepName === 'awaitSignature')!;
    await waitUntil('the deadline job to complete in Redis', () => ran.includes(`${parked.id}-deadline`));
  });

  it('a lost deadline job is recovered by housekeeping', async () => {
    const wf = await workflows.start(RunOnTimeoutWorkflow, hero);
    const row = await parkedRow(wf);
    const job = await deadlineJob(row);
    expect(await job.isDelayed()).toBe(true);
    await job.remove(); // lost with a Redis failover
    await pastDeadline(row.id, 20 * 60_000);
    const summary = await app.moduleRef.get(HousekeepingService).run();
    expect(summary.overdueDeadlinesRecovered).toBe(1);
    await finished(wf);
    expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
  });

  it('a signal that wins leaves the deadline job a no-op', async () => {
    const wf = await workflows.start(RunOnTimeoutWorkflow, hero);
    const row = await parkedRow(wf);
    const signal = await app.moduleRef.get(SignalService).signal(wf, 'signed');
    await finished(wf);
    await pastDeadline(row.id, 1000);
    const job = await deadlineJob(row);
    await job.promote();
    await waitUntil('the deadline job to run', () => ran.includes(`${row.id}-deadline`));
    await sleep(100);
    expect(deadlineJournal).toEqual(['send', `awaitSignature(${signal.id})`, 'file']);
    expect((await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.metadata?.timedOut ?? false])).toEqual([
      ['send', 'completed', false],
      ['awaitSignature', 'completed', false],
      ['file', 'completed', false],
    ]);
  });
}

if (redisAvailable()) {
  describeEachDatabase('wait deadlines on Bull', bullDeadlineSuite);
} else {
  const reason = `Redis not reachable at ${process.env.GD_REDIS_URL ?? 'redis://127.0.0.1:6379'}`;
  console.warn(`wait-deadlines-bull.e2e-spec: ${reason} — skipped (set GENEVA_DRIVE_TEST_REQUIRE=redis to make this a failure)`);
  describe.skip(`wait deadlines on Bull (skipped: ${reason})`, () => describeEachDatabase('wait deadlines on Bull', bullDeadlineSuite));
}
