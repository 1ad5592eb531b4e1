/**
 * The Redis queue adapters (`bull` and `bullmq`, each suite run on both) on a real Redis, with nothing
 * driven by hand: the test application consumes its own queue (concurrency 2) and the tests only
 * start workflows and watch the database and Redis.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { QUEUE_PORT, SignalService, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { WorkflowRegistry } from '../../libs/geneva-drive/src/registry/workflow.registry.js';
import { describeEachDatabase, redisAvailable, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { sleep, waitUntil } from '../src/bull-wait.js';
import { REDIS_QUEUE_DRIVERS, type FailedJobEvent, type JobEvent, type QueueView, type RedisQueueDriver } from '../src/redis-queues.js';
import {
  journalOf,
  QUEUE_WORKFLOWS,
  QueueDelayedWorkflow,
  QueueFailingWorkflow,
  QueueHeldWorkflow,
  QueueParkedWorkflow,
  QueueSignalWorkflow,
  QueueSlowWorkflow,
  QueueStepError,
  QueueThreeStepWorkflow,
  queueJournal,
  holdSteps,
  releaseHeldSteps,
} from '../src/bull-workflows.js';

const QUEUE_NAME = 'geneva-drive';

function redisQueueSuite(driver: RedisQueueDriver, kind: DatabaseKind): void {
  // Unique per file, adapter, jest worker process and database: parallel workers and runs never share keys.
  const prefix = `gd-e2e-${driver.adapter}-queue-${process.pid}-${kind}`;
  let admin: ReturnType<RedisQueueDriver['handle']>;
  let app: TestApp;
  let queue: QueueView;
  let workflows: WorkflowService;
  let hero: TestHero;
  const active: JobEvent[] = [];
  const failed: FailedJobEvent[] = [];

  beforeAll(async () => {
    // A queue handle of our own for cleaning: obliterate pauses the queue it is called on.
    admin = driver.handle(QUEUE_NAME, prefix);
    await admin.obliterate();
    // Chains never stop on time here, however loaded the machine: which steps had a job of their own is exact.
    app = await createTestApp(kind, QUEUE_WORKFLOWS, {
      queue: driver.options({ prefix, name: QUEUE_NAME, concurrency: 2 }),
      chainSteps: { maxDuration: '10m' },
    });
    const adapter = app.moduleRef.get(QUEUE_PORT);
    queue = driver.view(adapter);
    // Local events: this process is the only consumer of the queue.
    driver.onActive(adapter, (job) => active.push(job));
    driver.onFailed(adapter, (job) => failed.push(job));
    workflows = app.moduleRef.get(WorkflowService);
  });

  afterAll(async () => {
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
  });

  beforeEach(async () => {
    await queue.removePending(); // delayed jobs a previous test left behind
    await app.reset();
    queueJournal.length = 0;
    active.length = 0;
    failed.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const stateOf = async (wf: WorkflowRecord) => (await workflows.find(wf.id)).state;
  const waitForState = (wf: WorkflowRecord, state: WorkflowRecord['state']) =>
    waitUntil(`workflow ${wf.id} to be ${state}`, async () => {
      const record = await workflows.find(wf.id);
      return record.state === state ? record : null;
    });

  it('runs a three-step workflow to finished by itself: a step that waits is a job whose id is its execution id, steps due at once start in this process', async () => {
    const wf = await workflows.start(QueueThreeStepWorkflow, hero);
    const finished = await waitForState(wf, 'finished');

    expect(finished.finishedAt).toBeInstanceOf(Date);
    expect(journalOf(wf.id)).toEqual(['one', 'two', 'three']);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['stepOne', 'completed', 'success'],
      ['stepTwo', 'completed', 'success'],
      ['stepThree', 'completed', 'success'],
    ]);
    // The 300 ms wait was scheduled and the queue did not run the step before it was due.
    const [one, two] = history;
    expect(two.scheduledFor.getTime() - one.finishedAt!.getTime()).toBeGreaterThanOrEqual(290);
    expect(two.startedAt!.getTime()).toBeGreaterThanOrEqual(two.scheduledFor.getTime() - 10);
    // The step after the wait is a job with the execution id (in Redis BullMQ's stands behind
    // `step-`; the events and rows give the engine's). The first, due when start() committed in
    // this worker process (it has free slots), started here with no trip to Redis; stepThree, due
    // the moment stepTwo completed, started in the same worker and transaction.
    expect(active).toEqual([{ jobId: two.id, executionId: two.id }]);
    // Each row records its job id; the inline step had none.
    expect(history.map((e) => e.jobId)).toEqual([one.id, two.id, null]);
    expect(history[2].startedAt!.getTime()).toBeGreaterThanOrEqual(two.finishedAt!.getTime());
  });

  it('a signal sent in a worker process with a free slot wakes the parked step here, under a job id of its own that the row records', async () => {
    const wf = await workflows.start(QueueSignalWorkflow, hero);
    const parked = await waitUntil('the step to park', async () => {
      const current = await workflows.currentExecution(wf);
      return current?.state === 'waiting' ? current : null;
    });
    const signal = await app.moduleRef.get(SignalService).signal(wf, 'go');
    await waitForState(wf, 'finished');
    const wakeId = `${parked.id}-wake-${signal.id}`;
    // No trip through Redis: the wake started in this process (an enqueue-only sender's goes through
    // Redis under the same id: see the signals-race and multi-process specs).
    expect(active).toEqual([]);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.jobId])).toEqual([
      ['first', 'completed', history[0].id],
      ['awaitGo', 'completed', wakeId],
    ]);
  });

  it('alone on its queue, keeps a burst of due jobs beyond its slots in the process: none goes through Redis', async () => {
    // The queue orders a backlog by priority: with one in the application, the burst would go to Redis.
    expect(app.moduleRef.get(WorkflowRegistry, { strict: false }).hasJobPriorities()).toBe(false);
    holdSteps(true);
    try {
      const burst: WorkflowRecord[] = [];
      for (let i = 0; i < 6; i++) burst.push(await workflows.start(QueueHeldWorkflow, hero, { allowMultiple: true }));
      // Both slots busy, four jobs waiting: twice as many as the slots, which is all a process that
      // shares its queue keeps.
      await waitUntil('both slots taken', () => queueJournal.length === 2);
      expect(await queue.counts()).toMatchObject({ waiting: 0, active: 0 });
      while (queueJournal.length < burst.length) {
        const started = queueJournal.length;
        releaseHeldSteps();
        await waitUntil('the next held steps to start', () => queueJournal.length > started);
      }
      releaseHeldSteps();
      for (const wf of burst) await waitForState(wf, 'finished');
      expect(active).toEqual([]);
    } finally {
      holdSteps(false);
    }
  });

  it('keeps a delayed step in Redis as one job with the execution id, however often it is enqueued', async () => {
    const wf = await workflows.start(QueueParkedWorkflow, hero);
    const execution = (await workflows.currentExecution(wf))!;
    // Jobs are enqueued after the commit, a moment after start() returns.
    const job = await waitUntil(`the job of execution ${execution.id}`, () => queue.getJob(execution.id));

    expect(job.queueId).toBe(driver.queueJobId(execution.id));
    // Besides the execution, the job names its workflow, type, step and hero, flat in its data on both
    // adapters: the executor locks and reads them without a lookup.
    expect(job.data).toEqual({ executionId: execution.id, workflowId: wf.id, workflowType: 'QueueParkedWorkflow', stepName: 'later', heroType: 'TestHero', heroId: String(hero.id) });
    expect(job.state).toBe('delayed');
    expect(job.attempts).toBe(1);
    expect(job.dueAt).toBeGreaterThanOrEqual(execution.scheduledFor.getTime() - 50);
    expect(job.dueAt).toBeLessThanOrEqual(execution.scheduledFor.getTime() + 50);

    // resume() enqueues the kept execution again: same job id, so still one job.
    await workflows.pause(wf);
    await workflows.resume(wf);
    await sleep(100);
    expect(await queue.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 1 });
    expect(await queue.delayedIds()).toEqual([execution.id]);
    expect(journalOf(wf.id)).toEqual([]);
  });

  it('leaves a workflow whose step throws paused, with the error recorded, and the queue does not retry the job', async () => {
    const wf = await workflows.start(QueueFailingWorkflow, hero);
    await waitForState(wf, 'paused');
    const [execution, ...others] = await workflows.executionHistory(wf);
    expect(others).toHaveLength(0);
    expect(execution).toMatchObject({ stepName: 'explode', state: 'failed', outcome: 'failed', errorClassName: QueueStepError.name });
    expect(execution.errorMessage).toContain(`boom in workflow ${wf.id}`);

    // The engine re-throws after committing: the queue records one failed attempt out of one.
    const failure = await waitUntil('the queue to report the failed job', () => failed.find((job) => job.executionId === execution.id));
    expect(failure).toMatchObject({ jobId: execution.id, attemptsMade: 1, attempts: 1, message: `boom in workflow ${wf.id}` });

    await sleep(500); // a retry would run now (no backoff is configured)
    expect(journalOf(wf.id)).toEqual(['explode']);
    expect(active.filter((job) => job.executionId === execution.id)).toHaveLength(1);
    expect(await queue.getJob(execution.id)).toBeNull(); // removed on failure, so a resume can re-enqueue
    expect(await stateOf(wf)).toBe('paused');
    expect(await workflows.executionHistory(wf)).toHaveLength(1);
  });

  it('holds a delayed step while its workflow is paused past the due time, and runs it once after resume', async () => {
    const wf = await workflows.start(QueueDelayedWorkflow, hero);
    await workflows.pause(wf);
    const first = (await workflows.currentExecution(wf))!;
    expect(Date.now()).toBeLessThan(first.scheduledFor.getTime()); // paused before the step was due
    expect(await waitUntil('the delayed job in Redis', () => queue.getJob(first.id))).toBeTruthy();

    // The job comes due while the workflow is paused: the queue delivers it and the engine refuses to run it.
    await waitUntil('the delayed job to be delivered and removed', async () => Date.now() > first.scheduledFor.getTime() && (await queue.getJob(first.id)) === null);
    expect(active.map((job) => job.jobId)).toContain(first.id);
    await sleep(100);
    expect(journalOf(wf.id)).toEqual([]);
    expect(await stateOf(wf)).toBe('paused');

    await workflows.resume(wf);
    await waitForState(wf, 'finished');
    expect(journalOf(wf.id)).toEqual(['delayed', 'last']);
    const history = await workflows.executionHistory(wf);
    expect(history.filter((e) => e.stepName === 'delayed' && e.state === 'completed')).toHaveLength(1);
    expect(history.at(-1)).toMatchObject({ stepName: 'last', state: 'completed', outcome: 'success' });
  });

  it('on shutdown, waits for the running step and enqueues its successor before the queue closes', async () => {
    const ownPrefix = `${prefix}-shutdown`;
    const own = await createTestApp(kind, [QueueSlowWorkflow], { prepare: false, queue: driver.options({ prefix: ownPrefix, name: QUEUE_NAME, concurrency: 1 }) });
    const wf = await own.moduleRef.get(WorkflowService).start(QueueSlowWorkflow, hero);
    await waitUntil('the slow step to start', () => journalOf(wf.id).includes('slow:start'));
    await own.close();

    expect(journalOf(wf.id)).toEqual(['slow:start', 'slow:end']);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['slow', 'completed', 'success'],
      ['later', 'scheduled', null],
    ]);
    const ownQueue = driver.handle(QUEUE_NAME, ownPrefix);
    try {
      expect((await ownQueue.getJob(history[1].id))?.state).toBe('delayed');
    } finally {
      await ownQueue.obliterate();
      await ownQueue.close();
    }
  });

  it('enqueues nothing for a workflow started inside a caller transaction that rolls back', async () => {
    const rollback = new Error('caller rolls back');
    await expect(
      app.dataSource.transaction(async (manager) => {
        const wf = await workflows.start(QueueParkedWorkflow, hero, { manager });
        expect(wf.id).toBeDefined();
        throw rollback;
      }),
    ).rejects.toBe(rollback);

    await sleep(300); // after-commit hooks would have run by now
    expect(await app.dataSource.getRepository(WorkflowRecord).count()).toBe(0);
    expect(await queue.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 0, completed: 0, failed: 0 });
    expect(active).toHaveLength(0);

    // Control: the same start, committed, does leave its (delayed) job in Redis.
    const committed = await app.dataSource.transaction((manager) => workflows.start(QueueParkedWorkflow, hero, { manager }));
    const execution = (await workflows.currentExecution(committed))!;
    await waitUntil('the committed workflow’s job', () => queue.getJob(execution.id));
    expect(await queue.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 1 });
  });
}

function bothAdapters(): void {
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
    describeEachDatabase(`${driver.adapter} queue adapter on Redis`, (kind) => redisQueueSuite(driver, kind));
  }
}

if (redisAvailable()) {
  bothAdapters();
} else {
  const reason = `Redis not reachable at ${process.env.GD_REDIS_URL ?? 'redis://127.0.0.1:6379'}`;
  console.warn(`bull-queue.e2e-spec: ${reason} — Redis queue tests skipped (set GENEVA_DRIVE_TEST_REQUIRE=redis to make this a failure)`);
  describe.skip(`Redis queue adapters (skipped: ${reason})`, bothAdapters);
}
