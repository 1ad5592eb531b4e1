/**
 * Rate limits: at most `limit` starts of a key within any `per` window. An execution over the rate
 * is scheduled for the time the claims made so far leave free (one delayed job, its promise in its
 * metadata), in arrival order; a job run before its time does nothing; a start made late pushes a
 * promised one back; a start the concurrency gate refuses is not counted; a key function that
 * throws fails the step; without the migration the step pauses its workflow. The engine's clock
 * is the test's, so every time here is exact.
 */
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, jest } from '@jest/globals';
import { ConcurrencyKeyError, FlowControlNotMigratedError, StepExecution, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import { ChargeWorkflow, CONCURRENCY_WORKFLOWS, MailWorkflow, PacedWorkflow, slots } from '../src/concurrency-workflows.js';
import { createTestApp, recreateTables, warningsLogger, type TestApp } from '../src/test-app.js';
import { ReceiptWorkflow } from '../../docs/samples/rate-limits.js';
import { Mailer, Order } from '../../docs/samples/shop.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const T0 = Date.UTC(2030, 0, 1, 12, 0, 0);
const MINUTE = 60_000;
/** The engine's clock, the test's: every time the engine reads (and writes) is T0 plus this. */
let offset = 0;
const at = (ms: number) => (offset = ms);

describeEachDatabase('rate limits', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, CONCURRENCY_WORKFLOWS);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    slots.reset();
    offset = 0;
    jest.spyOn(app.moduleRef.get(WorkflowStore), 'now').mockImplementation(() => new Date(T0 + offset));
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  const started = async (workflowClass: typeof MailWorkflow | typeof PacedWorkflow, key: string, count: number) => {
    const heroes = app.dataSource.getRepository(TestHero);
    const list: Array<{ hero: TestHero; workflow: WorkflowRecord }> = [];
    for (let i = 0; i < count; i++) {
      const hero = await heroes.save(heroes.create({ name: key }));
      list.push({ hero, workflow: await workflows.start(workflowClass, hero) });
    }
    return list;
  };
  const jobsOf = (execution: StepExecution) => app.gd.enqueuedJobs.filter((job) => job.executionId === execution.id);
  const windowOf = async (key: string) => {
    const rows: Array<{ rate_window: unknown }> = await app.dataSource.query(`SELECT rate_window FROM geneva_drive_flow_keys WHERE flow_key = ${kind === 'postgres' ? '$1' : '?'}`, [key]);
    return JSON.parse(String(rows[0].rate_window)) as { s: number[]; c: number[] };
  };
  const startsOf = async (list: Array<{ workflow: WorkflowRecord }>) =>
    (await Promise.all(list.map(async (entry) => (await workflows.executionHistory(entry.workflow)).filter((e) => e.startedAt !== null).map((e) => e.startedAt!.getTime() - T0)))).flat().sort((a, b) => a - b);

  it('limit 2 per minute: the third and fourth are scheduled for the next window, the fifth for the one after, each with one delayed job; they start then, in arrival order', async () => {
    const mails = await started(MailWorkflow, 'tenant-1', 5);
    expect(await app.gd.performNextStep(mails[0].workflow)).toMatchObject({ state: 'completed' });
    at(1_000);
    expect(await app.gd.performNextStep(mails[1].workflow)).toMatchObject({ state: 'completed' });
    at(2_000);
    const third = (await app.gd.performNextStep(mails[2].workflow))!;
    const fourth = (await app.gd.performNextStep(mails[3].workflow))!;
    const fifth = (await app.gd.performNextStep(mails[4].workflow))!;
    // Claims: 0 and 1 s started; the window after the first start holds the third, after the second the fourth.
    expect(third).toMatchObject({ state: 'scheduled', startedAt: null, scheduledFor: new Date(T0 + MINUTE) });
    expect(fourth).toMatchObject({ state: 'scheduled', scheduledFor: new Date(T0 + MINUTE + 1_000) });
    expect(fifth).toMatchObject({ state: 'scheduled', scheduledFor: new Date(T0 + 2 * MINUTE) });
    expect(third.metadata).toMatchObject({ rateWindow: { key: 'tenant-1', at: T0 + MINUTE } });
    for (const execution of [third, fourth, fifth]) {
      const jobs = jobsOf(execution);
      expect(jobs).toHaveLength(2); // its first job, and the delayed one of its time
      expect(jobs[1].jobId).toMatch(new RegExp(`^${execution.id}-rate-`));
      expect(jobs[1].runAt).toEqual(execution.scheduledFor);
    }
    expect(await windowOf('tenant-1')).toEqual({ s: [0, 1_000].map((t) => T0 + t), c: [MINUTE + 1_000, 2 * MINUTE].map((t) => T0 + t) });

    // A job run before its time (a duplicate, a redelivery) does nothing, and sends nothing.
    at(30_000);
    expect(await app.gd.performNextStep(mails[2].workflow)).toMatchObject({ state: 'scheduled', scheduledFor: new Date(T0 + MINUTE) });
    expect(jobsOf(third)).toHaveLength(2);

    at(MINUTE);
    expect(await app.gd.performNextStep(mails[2].workflow)).toMatchObject({ state: 'completed', startedAt: new Date(T0 + MINUTE) });
    at(MINUTE + 1_000);
    expect(await app.gd.performNextStep(mails[3].workflow)).toMatchObject({ state: 'completed', startedAt: new Date(T0 + MINUTE + 1_000) });
    at(2 * MINUTE);
    expect(await app.gd.performNextStep(mails[4].workflow)).toMatchObject({ state: 'completed', startedAt: new Date(T0 + 2 * MINUTE) });
    expect(slots.started).toEqual(mails.map((entry) => entry.hero.id));
    // Every window of a minute holds at most two starts.
    const starts = await startsOf(mails);
    expect(starts).toEqual([0, 1_000, MINUTE, MINUTE + 1_000, 2 * MINUTE]);
    for (const start of starts) expect(starts.filter((other) => other >= start && other < start + MINUTE).length).toBeLessThanOrEqual(2);
    // Another key is another window.
    const [other] = await started(MailWorkflow, 'tenant-2', 1);
    expect(await app.gd.performNextStep(other.workflow)).toMatchObject({ state: 'completed' });
  });

  it('a start made late takes a promised one\'s window: it gets a new claim after every other (one more delayed job), never the window over its limit', async () => {
    const [a, b, c] = await started(PacedWorkflow, 'late', 3);
    await app.gd.performNextStep(a.workflow); // fetch at 0
    const waitB = (await app.gd.performNextStep(b.workflow))!;
    const waitC = (await app.gd.performNextStep(c.workflow))!;
    expect([waitB.scheduledFor, waitC.scheduledFor]).toEqual([new Date(T0 + MINUTE), new Date(T0 + 2 * MINUTE)]);
    at(MINUTE + 40_000); // b's job runs 40 s late
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'fetch', state: 'completed', startedAt: new Date(T0 + MINUTE + 40_000) });
    at(2 * MINUTE); // c's time: a minute has not passed since b started
    const [d] = await started(PacedWorkflow, 'late', 1);
    const pushed = (await app.gd.performNextStep(c.workflow))!;
    // Not b's start + 1 min (2:40) alone: after the last claim (c's own, 2:00) too, a time nobody holds.
    expect(pushed).toMatchObject({ state: 'scheduled', scheduledFor: new Date(T0 + 3 * MINUTE) });
    expect(jobsOf(waitC)).toHaveLength(3);
    // A newcomer queues behind it.
    expect(await app.gd.performNextStep(d.workflow)).toMatchObject({ state: 'scheduled', scheduledFor: new Date(T0 + 4 * MINUTE) });
    at(3 * MINUTE);
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ stepName: 'fetch', state: 'completed' });
    at(4 * MINUTE);
    expect(await app.gd.performNextStep(d.workflow)).toMatchObject({ stepName: 'fetch', state: 'completed' });
    expect(await startsOf([a, b, c, d])).toEqual([0, MINUTE + 40_000, 3 * MINUTE, 4 * MINUTE]);
  });

  it('a start the concurrency gate refuses is not counted: it is, when the slot lets it start', async () => {
    const [a] = await started(PacedWorkflow, 'p1', 1);
    const [b] = await started(PacedWorkflow, 'p2', 1);
    await app.gd.performNextStep(a.workflow); // fetch at 0, on p1's window
    await app.gd.performNextStep(b.workflow); // and on p2's
    // report: the workflow's rate limit (a minute after fetch) and the one slot of 'reports'.
    expect(await app.gd.performNextStep(a.workflow)).toMatchObject({ stepName: 'report', state: 'scheduled', scheduledFor: new Date(T0 + MINUTE) });
    await app.gd.performNextStep(b.workflow);
    at(MINUTE);
    const held = slots.holdNext(a.hero.id);
    const running = app.gd.performNextStep(a.workflow);
    await held.entered;
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'report', state: 'scheduled', flowKey: 'reports' });
    expect((await windowOf('p2')).s).toEqual([T0]); // refused by the slot: no start counted
    at(MINUTE + 5_000);
    held.release();
    await running;
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'report', state: 'completed', startedAt: new Date(T0 + MINUTE + 5_000) });
    expect((await windowOf('p2')).s).toEqual([T0 + MINUTE + 5_000]);
  });

  it('a key function that throws fails the step under its policy, counting no start', async () => {
    const [a] = await started(MailWorkflow, 'broken', 1);
    slots.failingKeys.add(a.hero.id);
    await app.gd.performNextStep(a.workflow).catch(() => undefined);
    const [execution] = await workflows.executionHistory(a.workflow);
    expect(execution).toMatchObject({ stepName: 'send', state: 'failed', errorClassName: 'Error' });
    expect(slots.started).toEqual([]);
    expect((await workflows.find(a.workflow.id)).state).toBe('paused');
  });

  it('a key that is not one is a ConcurrencyKeyError naming rateLimit', () => {
    expect(new ConcurrencyKeyError('send', '""', 'rateLimit').message).toBe('rateLimit.key of step "send" must return a non-empty string of at most 255 UTF-8 bytes, got ""');
  });
});

describeEachDatabase('rate limits without their migration', (kind) => {
  let app: TestApp;
  const warnings = warningsLogger();
  beforeAll(async () => {
    app = await createTestApp(kind, CONCURRENCY_WORKFLOWS, { withoutRateLimits: true, logger: warnings.logger });
  });

  it('warns at boot of the steps with a rate limit, naming the migration', () => {
    expect(warnings.warnings).toEqual([
      'The rate-limits migration (AddGenevaDriveRateLimits1730000000009) has not run: steps with a rate limit (MailWorkflow.send, PacedWorkflow.fetch, PacedWorkflow.report) will pause their workflow at their gate until it does',
    ]);
  });
  afterAll(() => app.close());

  it('a step with a rate limit pauses its workflow, naming the migration; concurrency keys work', async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'old-schema' }));
    const workflows = app.moduleRef.get(WorkflowService);
    const mail = await workflows.start(MailWorkflow, hero);
    const error = await app.gd.performNextStep(mail).then(
      () => null,
      (raised: unknown) => raised,
    );
    expect(error).toBeInstanceOf(FlowControlNotMigratedError);
    expect(String((error as Error).message)).toContain('the rate_window column of geneva_drive_flow_keys: run the AddGenevaDriveRateLimits1730000000009 migration');
    expect((await workflows.find(mail.id)).state).toBe('paused');
    const charge = await workflows.start(ChargeWorkflow, await heroes.save(heroes.create({ name: 'keyed' })));
    expect(await app.gd.performNextStep(charge)).toMatchObject({ stepName: 'charge', state: 'completed', flowKey: 'keyed' });
  });
});

describeEachDatabase('manual §4: rate limits', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let now = T0;

  beforeAll(async () => {
    app = await createTestApp(kind, [ReceiptWorkflow, Mailer], { entities: [Order] });
    workflows = app.moduleRef.get(WorkflowService);
    await recreateTables(app.dataSource, [Order]);
    jest.spyOn(app.moduleRef.get(WorkflowStore), 'now').mockImplementation(() => new Date(now));
  });
  afterAll(async () => {
    jest.restoreAllMocks();
    await app.close();
  });

  it('100 receipts a minute per domain: the 101st is sent a minute after the first, another domain at once', async () => {
    const orders = app.dataSource.getRepository(Order);
    const started: WorkflowRecord[] = [];
    for (let i = 0; i < 101; i++) started.push(await workflows.start(ReceiptWorkflow, await orders.save({ sku: `R${i}`, amountCents: 100, customerEmail: `c${i}@shop.test` })));
    for (const [i, workflow] of started.entries()) {
      now = T0 + i * 100; // a receipt every 100 ms
      await app.gd.performNextStep(workflow);
    }
    const mailer = app.moduleRef.get(Mailer);
    expect(mailer.sent).toHaveLength(100);
    const last = (await workflows.currentExecution(started[100]))!;
    expect(last).toMatchObject({ stepName: 'sendReceipt', state: 'scheduled', scheduledFor: new Date(T0 + MINUTE) });
    const other = await workflows.start(ReceiptWorkflow, await orders.save({ sku: 'X', amountCents: 100, customerEmail: 'x@elsewhere.test' }));
    expect(await app.gd.performNextStep(other)).toMatchObject({ state: 'completed' });
    now = T0 + MINUTE;
    expect(await app.gd.performNextStep(started[100])).toMatchObject({ stepName: 'sendReceipt', state: 'completed', startedAt: new Date(T0 + MINUTE) });
    expect(mailer.sent).toHaveLength(102);
  });
});
