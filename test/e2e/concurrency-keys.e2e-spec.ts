/**
 * Concurrency keys: at most `limit` executions holding a key in progress; the others wait
 * `scheduled` with their `flow_key` (no job, no timer) in the key's queue (by priority, then arrival), and are woken,
 * first in the queue first, by the transaction that frees a slot (a step's end, a cancel, a recovery); newcomers queue
 * behind waiters; a waiter that ends leaves the queue; a key function that throws or returns no key
 * fails the step; the manual's sample. Driven step by step on the manual queue; a body is held in progress until the
 * test releases it, so every schedule here is the test's, not the machine's.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { ConcurrencyKeyError, HousekeepingService, StepExecution, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { RefundWorkflow } from '../../docs/samples/concurrency-keys.js';
import { Order, PaymentsService } from '../../docs/samples/shop.js';
import { BadKeyWorkflow, ChargeWorkflow, CONCURRENCY_WORKFLOWS, PairWorkflow, performHeld, RoutineChargeWorkflow, slots, UrgentChargeWorkflow } from '../src/concurrency-workflows.js';
import { createTestApp, recreateTables, type TestApp } from '../src/test-app.js';
import { loggedDuring } from '../utils/logged-statements.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

describeEachDatabase('concurrency keys', (kind) => {
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
  });

  const hero = (name: string) => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };
  /** `count` workflows of `workflowClass`, each for a hero named `key`. */
  const started = async (workflowClass: typeof ChargeWorkflow | typeof UrgentChargeWorkflow | typeof RoutineChargeWorkflow | typeof PairWorkflow, key: string, count: number) => {
    const list: Array<{ hero: TestHero; workflow: WorkflowRecord }> = [];
    for (let i = 0; i < count; i++) {
      const h = await hero(key);
      list.push({ hero: h, workflow: await workflows.start(workflowClass, h) });
    }
    return list;
  };
  const runHeld = (entry: { hero: TestHero; workflow: WorkflowRecord }) => performHeld(app.gd, entry);
  const keyRow = async (key: string) => {
    const rows: Array<{ holding: unknown; waiters: unknown }> = await app.dataSource.query(
      `SELECT holding, waiters FROM geneva_drive_flow_keys WHERE flow_key = ${kind === 'postgres' ? '$1' : '?'}`,
      [key],
    );
    return rows.length === 0 ? null : { holding: Number(rows[0].holding), waiters: (JSON.parse(String(rows[0].waiters)) as Array<{ e: string }>).map((waiter) => waiter.e) };
  };
  const jobsOf = (execution: StepExecution) => app.gd.enqueuedJobs.filter((job) => job.executionId === execution.id);
  const current = async (workflow: WorkflowRecord) => (await workflows.currentExecution(workflow))!;

  it('limit 1: a second execution waits scheduled with its key, no job; the first one’s end wakes it with its commit, and it runs', async () => {
    const [a, b] = await started(ChargeWorkflow, 'acct-1', 2);
    const first = await runHeld(a);
    const waiting = await app.gd.performNextStep(b.workflow);
    expect(waiting).toMatchObject({ stepName: 'charge', state: 'scheduled', flowKey: 'acct-1', startedAt: null });
    expect(await keyRow('acct-1')).toEqual({ holding: 1, waiters: [waiting!.id] });
    expect(jobsOf(waiting!)).toHaveLength(1); // its first job only: it waits with no job and no timer
    expect(slots.started).toEqual([a.hero.id]);

    await first.release(); // charge completes: its commit frees the slot and sends the waiter's job
    const wake = jobsOf(waiting!);
    expect(wake).toHaveLength(2);
    expect(wake[1].jobId).toMatch(new RegExp(`^${waiting!.id}-slot-`));
    expect(await keyRow('acct-1')).toEqual({ holding: 0, waiters: [waiting!.id] });

    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'charge', state: 'completed', flowKey: 'acct-1' });
    expect(slots.started).toEqual([a.hero.id, b.hero.id]);
    expect(await keyRow('acct-1')).toEqual({ holding: 0, waiters: [] });
    // Another key is another count.
    const [c] = await started(ChargeWorkflow, 'acct-2', 1);
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ stepName: 'charge', state: 'completed', flowKey: 'acct-2' });
  });

  it('waiters start in arrival order: a woken waiter that has not started yet keeps its slot from a newcomer, and a later waiter woken early waits again', async () => {
    const [a, b, c, d] = await started(ChargeWorkflow, 'fifo', 4);
    const first = await runHeld(a);
    const waitB = (await app.gd.performNextStep(b.workflow))!;
    const waitC = (await app.gd.performNextStep(c.workflow))!;
    await first.release(); // wakes b only
    expect(jobsOf(waitB)).toHaveLength(2);
    expect(jobsOf(waitC)).toHaveLength(1);
    // A newcomer, with the slot free: behind b and c.
    const waitD = (await app.gd.performNextStep(d.workflow))!;
    expect(waitD).toMatchObject({ state: 'scheduled', flowKey: 'fifo' });
    // c's job, run before b's (a duplicate or a redelivery): c is not first, and waits on.
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ state: 'scheduled', flowKey: 'fifo' });
    expect(await keyRow('fifo')).toEqual({ holding: 0, waiters: [waitB.id, waitC.id, waitD.id] });
    await app.gd.performNextStep(b.workflow);
    await app.gd.performNextStep(c.workflow);
    await app.gd.performNextStep(d.workflow);
    expect(slots.started).toEqual([a, b, c, d].map((entry) => entry.hero.id));
    expect(await keyRow('fifo')).toEqual({ holding: 0, waiters: [] });
  });

  it("a step's priority places its waiter ahead of lower priorities (a lower number first, none ranking first), in arrival order within one", async () => {
    const [a] = await started(ChargeWorkflow, 'ranked', 1);
    const first = await runHeld(a);
    const [routine1] = await started(RoutineChargeWorkflow, 'ranked', 1);
    const [urgent1] = await started(UrgentChargeWorkflow, 'ranked', 1);
    const [plain] = await started(ChargeWorkflow, 'ranked', 1);
    const [urgent2] = await started(UrgentChargeWorkflow, 'ranked', 1);
    const [routine2] = await started(RoutineChargeWorkflow, 'ranked', 1);
    const arrivals = [routine1, urgent1, plain, urgent2, routine2];
    const waiting = new Map<unknown, StepExecution>();
    for (const entry of arrivals) waiting.set(entry, (await app.gd.performNextStep(entry.workflow))!);
    const queue = [plain, urgent1, urgent2, routine1, routine2];
    expect(await keyRow('ranked')).toEqual({ holding: 1, waiters: queue.map((entry) => waiting.get(entry)!.id) });
    await first.release();
    // Each end wakes the next in the queue; a job of one further back finds it not first and waits on.
    for (const [index, entry] of queue.entries()) {
      const behind = queue[index + 1];
      if (behind) expect(await app.gd.performNextStep(behind.workflow)).toMatchObject({ state: 'scheduled', flowKey: 'ranked' });
      expect(await app.gd.performNextStep(entry.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    }
    expect(slots.started).toEqual([a, ...queue].map((entry) => entry.hero.id));
    expect(await keyRow('ranked')).toEqual({ holding: 0, waiters: [] });
  });

  (kind === 'mysql' ? it : it.skip)('MySQL/MariaDB: an uncontended key is taken and freed by one statement each; a refused take changes nothing', async () => {
    const [a, b, c] = await started(ChargeWorkflow, 'one-each', 3);
    const sent = await loggedDuring(app.dataSource, () => app.gd.performNextStep(a.workflow));
    expect(sent.filter((sql) => sql.includes('geneva_drive_flow_keys'))).toEqual([
      expect.stringMatching(/^INSERT INTO geneva_drive_flow_keys .* ON DUPLICATE KEY UPDATE .*LAST_INSERT_ID/),
      expect.stringMatching(/^UPDATE geneva_drive_flow_keys SET holding = holding - 1, .* AND waiters = '\[\]'$/),
    ]);
    expect(await keyRow('one-each')).toEqual({ holding: 0, waiters: [] });
    // Held by c, the key refuses b's take: b queues, the row's count untouched.
    const first = await runHeld(c);
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ state: 'scheduled', flowKey: 'one-each' });
    expect(await keyRow('one-each')).toEqual({ holding: 1, waiters: [(await current(b.workflow)).id] });
    await first.release();
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await keyRow('one-each')).toEqual({ holding: 0, waiters: [] });
  });

  it('a canceled waiter, or one whose step is skipped, leaves the queue at once; a paused one when its turn comes (its phase 1 cancels its execution, waking the next); resumed, it queues again', async () => {
    const [a, b, c, d, e] = await started(ChargeWorkflow, 'cancel', 5);
    const first = await runHeld(a);
    await app.gd.performNextStep(b.workflow);
    const waitC = (await app.gd.performNextStep(c.workflow))!;
    const waitD = (await app.gd.performNextStep(d.workflow))!;
    await app.gd.performNextStep(e.workflow);
    await workflows.cancel(b.workflow);
    await workflows.skip(e.workflow); // its waiting step skipped: out of the queue, on to its next step
    expect(await keyRow('cancel')).toEqual({ holding: 1, waiters: [waitC.id, waitD.id] });
    await workflows.pause(c.workflow);
    await first.release(); // wakes c, first in line
    expect(jobsOf(waitC)).toHaveLength(2);
    expect(jobsOf(waitD)).toHaveLength(1);
    await app.gd.performNextStep(c.workflow); // paused: its execution is canceled, leaving the queue, and d is woken
    expect(await keyRow('cancel')).toEqual({ holding: 0, waiters: [waitD.id] });
    expect(jobsOf(waitD)).toHaveLength(2);
    expect(await app.gd.performNextStep(d.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    await workflows.resume(c.workflow);
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ stepName: 'charge', state: 'completed', flowKey: 'cancel' });
    expect(slots.started).toEqual([a, d, c].map((entry) => entry.hero.id));
    expect(await keyRow('cancel')).toEqual({ holding: 0, waiters: [] });
  });

  it('a holder whose worker looks dead frees its slot when housekeeping recovers it', async () => {
    const [a, b] = await started(ChargeWorkflow, 'crash', 2);
    const first = await runHeld(a);
    const waitB = (await app.gd.performNextStep(b.workflow))!;
    const running = await current(a.workflow);
    await app.dataSource.getRepository(StepExecution).update({ id: running.id }, { startedAt: new Date(Date.now() - 3 * 3_600_000) });
    await app.moduleRef.get(HousekeepingService).run();
    expect(await keyRow('crash')).toEqual({ holding: 0, waiters: [waitB.id] });
    expect(jobsOf(waitB)).toHaveLength(2);
    await first.release();
    // b was first in line: it takes the slot before a's successor, which queues behind it.
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await app.gd.performNextStep(a.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await keyRow('crash')).toEqual({ holding: 0, waiters: [] });
  });

  it('housekeeping leaves a waiter alone however long it waits, and sends again a wake whose job was lost', async () => {
    const [a, b] = await started(ChargeWorkflow, 'patient', 2);
    const first = await runHeld(a);
    const waitB = (await app.gd.performNextStep(b.workflow))!;
    await app.dataSource.getRepository(StepExecution).update({ id: waitB.id }, { scheduledFor: new Date(Date.now() - 3 * 3_600_000) });
    const housekeeping = app.moduleRef.get(HousekeepingService);
    expect(await housekeeping.run()).toMatchObject({ stuckScheduledRecovered: 0, stuckScheduledStillQueued: 0, flowWaitersWoken: 0 });
    expect(jobsOf(waitB)).toHaveLength(1);
    await first.release(); // the wake goes out; say its job was lost
    expect(jobsOf(waitB)).toHaveLength(2);
    expect(await housekeeping.run()).toMatchObject({ flowWaitersWoken: 0 }); // a wake just sent: not lost yet
    await app.dataSource.query(`UPDATE geneva_drive_flow_keys SET updated_at = ${kind === 'postgres' ? '$1' : '?'}`, [kind === 'sqlite' ? '2020-01-01 00:00:00.000' : new Date(Date.UTC(2020, 0, 1))]);
    expect(await housekeeping.run()).toMatchObject({ stuckScheduledRecovered: 0, flowWaitersWoken: 1 });
    expect(jobsOf(waitB)).toHaveLength(3);
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await housekeeping.run()).toMatchObject({ flowWaitersWoken: 0 });
  });

  it('housekeeping finds a wake whose job was lost however many newcomers queue behind its waiter', async () => {
    const [a, b, c] = await started(ChargeWorkflow, 'busy', 3);
    const first = await runHeld(a);
    const waitB = (await app.gd.performNextStep(b.workflow))!;
    await first.release(); // b's wake goes out; say its job was lost
    await app.dataSource.query(`UPDATE geneva_drive_flow_keys SET updated_at = ${kind === 'postgres' ? '$1' : '?'}`, [kind === 'sqlite' ? '2020-01-01 00:00:00.000' : new Date(Date.UTC(2020, 0, 1))]);
    // A newcomer queues behind b, which the free slot admits: joining the queue is no sign of life of b.
    const waitC = (await app.gd.performNextStep(c.workflow))!;
    expect(waitC).toMatchObject({ state: 'scheduled', flowKey: 'busy' });
    expect(await keyRow('busy')).toEqual({ holding: 0, waiters: [waitB.id, waitC.id] });
    expect(jobsOf(waitB)).toHaveLength(2);
    expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ flowWaitersWoken: 1 });
    expect(jobsOf(waitB)).toHaveLength(3);
    expect(jobsOf(waitC)).toHaveLength(1);
    expect(await app.gd.performNextStep(b.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ stepName: 'charge', state: 'completed' });
    expect(await keyRow('busy')).toEqual({ holding: 0, waiters: [] });
  });

  it('a workflow-level key limits every step of the class; a step’s own replaces it', async () => {
    const [a, b, c] = await started(PairWorkflow, 'pair', 3);
    const first = await runHeld(a);
    const second = await runHeld(b);
    expect(await app.gd.performNextStep(c.workflow)).toMatchObject({ stepName: 'first', state: 'scheduled', flowKey: 'pair' });
    await first.release();
    await second.release();
    expect(await keyRow('pair')).toEqual({ holding: 0, waiters: [(await current(c.workflow)).id] });
    // notify: its own key, limit 1.
    expect(await app.gd.performNextStep(a.workflow)).toMatchObject({ stepName: 'notify', state: 'completed', flowKey: 'notify:pair' });
    expect(await keyRow('notify:pair')).toEqual({ holding: 0, waiters: [] });
  });

  it('a key function that throws, or returns no key, fails the step under its policy, holding no slot', async () => {
    const [a] = await started(ChargeWorkflow, 'throws', 1);
    slots.failingKeys.add(a.hero.id);
    await expect(app.gd.performNextStep(a.workflow)).rejects.toThrow('no key for throws');
    const [failed] = await app.dataSource.getRepository(StepExecution).find({ where: { workflowId: a.workflow.id } });
    expect(failed).toMatchObject({ stepName: 'charge', flowKey: null, state: 'failed' });
    expect(await keyRow('throws')).toBeNull();
    expect(slots.started).toEqual([]);

    const bad = await workflows.start(BadKeyWorkflow, await hero('long'));
    const error = await app.gd.performNextStep(bad).then(
      () => null,
      (raised: unknown) => raised,
    );
    expect(error).toBeInstanceOf(ConcurrencyKeyError);
    expect(String(error)).toMatch(/at most 255 UTF-8 bytes, got a string of 256 bytes/);
  });
});

describeEachDatabase('concurrency keys without the flow-control migration', (kind) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await createTestApp(kind, CONCURRENCY_WORKFLOWS, { withoutFlowControl: true });
  });
  afterAll(() => app.close());

  it('a step with a key pauses its workflow, naming the migration; steps without one run', async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    const workflow = await workflows.start(ChargeWorkflow, await heroes.save(heroes.create({ name: 'old' })));
    await expect(app.gd.performNextStep(workflow)).rejects.toThrow(/AddGenevaDriveFlowControl1730000000007/);
    expect((await workflows.find(workflow.id)).state).toBe('paused');
  });
});

describeEachDatabase('manual §4: concurrency keys', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, [RefundWorkflow, PaymentsService], { entities: [Order] });
    workflows = app.moduleRef.get(WorkflowService);
    await recreateTables(app.dataSource, [Order]);
  });
  afterAll(() => app.close());
  beforeEach(() => app.reset());

  it("one step at a time per customer; the capture step holds the provider's key instead", async () => {
    const orders = app.dataSource.getRepository(Order);
    const [first, second] = [await orders.save({ sku: 'A', amountCents: 100, customerEmail: 'ann@example.com' }), await orders.save({ sku: 'B', amountCents: 200, customerEmail: 'ann@example.com' })];
    const [one, two] = [await workflows.start(RefundWorkflow, first), await workflows.start(RefundWorkflow, second)];
    expect(await app.gd.performNextStep(one)).toMatchObject({ stepName: 'reserve', state: 'completed', flowKey: 'customer:ann@example.com' });
    expect(await app.gd.performNextStep(two)).toMatchObject({ stepName: 'reserve', state: 'completed', flowKey: 'customer:ann@example.com' });
    expect(await app.gd.performNextStep(one)).toMatchObject({ stepName: 'capture', state: 'completed', flowKey: 'provider:payments' });
    expect(await app.gd.performNextStep(two)).toMatchObject({ stepName: 'capture', state: 'completed', flowKey: 'provider:payments' });
    expect((await orders.find({ order: { id: 'ASC' } })).map((order) => order.status)).toEqual(['paid', 'paid']);
  });
});
