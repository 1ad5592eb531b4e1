/**
 * Signals, sender side: `SignalService.signal()` (reference PART B §B.1, §B.3, §B.7 — SIG-01..12,
 * SIG-18..24, SIG-41/42) and the delivery-side acceptance scenarios of PART C. The receiver side
 * (gate, settlement, the `waiting` state) lives in signals-waiting.e2e-spec.ts. A signal whose name
 * no step of its workflow waits for (the rows these tests keep pending) is sent with `allowUnknownName`.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { EntitySubscriberInterface } from 'typeorm';
import {
  InvalidSignalError,
  Signal,
  SignalPayloadTooLargeError,
  SignalService,
  SignalNotReceivedError,
  StepExecution,
  UnknownSignalNameError,
  WorkflowNotOngoingError,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import {
  ALL_INVOICES,
  CustomMatcherWorkflow,
  InvoiceWorkflow,
  MatcherInvoiceWorkflow,
  PlainTwoStepWorkflow,
  resetSignalFixtures,
  seenSignals,
  SelfSignalWorkflow,
  signalControls,
  signalJournal,
  EmailMatcherWorkflow,
  PingThenPongWorkflow,
  PAYMENT_CONFIRMED,
  TypedPaymentWorkflow,
} from '../src/signal-workflows.js';

/** Never called: what the compiler checks of a typed signal definition (`npx tsc -p tsconfig.spec.json`). */
export function typedDefinitionChecks(signals: SignalService, workflow: WorkflowRecord, step: TypedPaymentWorkflow): void {
  const sent: Promise<Signal<{ amountCents: number }>> = signals.signal(workflow, PAYMENT_CONFIRMED, { payload: { amountCents: 5 } });
  void sent;
  // @ts-expect-error the step reads the payload typed: it has no member `amount`
  void step.receivedSignalOf(PAYMENT_CONFIRMED).payload.amount;
  // @ts-expect-error the sender's payload must have the definition's type
  void signals.signal(workflow, PAYMENT_CONFIRMED, { payload: { amount: 5 } });
  // @ts-expect-error signalHero checks it too
  void signals.signalHero(TypedPaymentWorkflow, workflow, PAYMENT_CONFIRMED, { payload: { amountCents: '5' } });
}
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const DEFAULT_LIMIT = 131_072;

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describeEachDatabase('signals: delivery', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let hero: TestHero;

  const signalRows = (workflowId?: string) =>
    app.dataSource.getRepository(Signal).find({ where: workflowId ? { workflowId } : {}, order: { createdAt: 'ASC', id: 'ASC' } });
  const signalRow = (id: string) => app.dataSource.getRepository(Signal).findOneByOrFail({ id });
  const executionRow = (id: string) => app.dataSource.getRepository(StepExecution).findOneByOrFail({ id });
  const current = async (wf: WorkflowRecord) => (await workflows.currentExecution(wf))!;
  const jobIds = () => app.gd.enqueuedJobs.map((job) => job.executionId);
  const newHero = async (name = 'Ada') => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };

  /** An InvoiceWorkflow-shaped workflow parked at awaitPayment. */
  const parked = async (workflowClass = InvoiceWorkflow, on = hero) => {
    const wf = await workflows.start(workflowClass, on);
    await app.gd.performNextStep(wf); // prepare
    await app.gd.performNextStep(wf); // awaitPayment parks
    await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
    return wf;
  };

  beforeAll(async () => {
    app = await createTestApp(kind, [...ALL_INVOICES, PingThenPongWorkflow, PlainTwoStepWorkflow, SelfSignalWorkflow, EmailMatcherWorkflow, CustomMatcherWorkflow, TypedPaymentWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
    signals = app.moduleRef.get(SignalService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetSignalFixtures();
    hero = await newHero();
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  // ------------------------------------------------------------------ SIG-01..04, B.3

  describe('recording a signal', () => {
    it('AT-01 persists the row first: pending, no timestamps, counters 0, not a duplicate, nothing enqueued', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const jobsBefore = jobIds().length;
      const signal = await signals.signal(wf, 'x', { allowUnknownName: true, payload: { orderId: 42 } });
      expect(signal).toBeInstanceOf(Signal);
      expect(signal).toMatchObject({ workflowId: wf.id, name: 'x', idempotencyKey: null, state: 'pending', claimed: 0, consumed: 0, duplicateDelivery: false });
      expect(signal.claimedAt).toBeNull();
      expect(signal.consumedAt).toBeNull();
      const stored = await signalRow(signal.id);
      expect(stored).toMatchObject({ workflowId: wf.id, name: 'x', state: 'pending', claimed: 0, consumed: 0, claimedAt: null, consumedAt: null, payload: { orderId: 42 } });
      expect(stored.createdAt).toBeInstanceOf(Date);
      expect(stored.isClaimed()).toBe(false);
      expect(stored.isConsumed()).toBe(false);
      // The flag is not a column: a reload always reads false.
      expect(stored.duplicateDelivery).toBe(false);
      expect(jobIds()).toHaveLength(jobsBefore);
    });

    it('accepts the workflow id instead of the record, and stores a numeric idempotency key as a string', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const signal = await signals.signal(wf.id, 'x', { allowUnknownName: true, idempotencyKey: 42 });
      expect((await signalRow(signal.id)).idempotencyKey).toBe('42');
      const again = await signals.signal(wf.id, 'x', { allowUnknownName: true, idempotencyKey: '42' });
      expect(again.duplicateDelivery).toBe(true);
      expect(again.id).toBe(signal.id);
    });

    it('AT-02 a blank name is an InvalidSignalError and writes nothing', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      for (const name of ['', '   ', null, undefined]) {
        await expect(signals.signal(wf, name as unknown as string)).rejects.toThrow(InvalidSignalError);
      }
      expect(await signalRows()).toHaveLength(0);
    });

    it('AT-03 an unknown option is an InvalidSignalError naming it, and writes nothing', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const attempt = signals.signal(wf, 'x', { timeout: 300 } as never);
      await expect(attempt).rejects.toThrow(InvalidSignalError);
      await expect(attempt).rejects.toThrow(/timeout/);
      expect(await signalRows()).toHaveLength(0);
    });

    it('a missing workflow is WorkflowNotFoundError and writes nothing', async () => {
      await expect(signals.signal('987654321', 'x')).rejects.toMatchObject({ name: 'WorkflowNotFoundError' });
      expect(await signalRows()).toHaveLength(0);
    });

    it('B.3 lifecycle: pending → claimed → consumed; counters move, isClaimed/isConsumed read them, no isPending (AT-54)', async () => {
      const wf = await workflows.start(InvoiceWorkflow, hero);
      const sent = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 700 } });
      expect(sent.isClaimed()).toBe(false);
      expect(sent.isConsumed()).toBe(false);
      expect('isPending' in sent).toBe(false);

      await app.gd.performNextStep(wf); // prepare: the signal is buffered, untouched
      expect(await signalRow(sent.id)).toMatchObject({ state: 'pending', claimed: 0, consumed: 0 });

      // The gate attaches and the step runs in one performNextStep; check the claim from inside the body.
      let duringBody: Signal | undefined;
      signalControls.awaitBody = async () => {
        duringBody = await signalRow(sent.id);
      };
      await app.gd.performNextStep(wf);
      expect(duringBody).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0, consumedAt: null });
      expect(duringBody!.claimedAt).toBeInstanceOf(Date);
      expect(duringBody!.isClaimed()).toBe(true);
      expect(duringBody!.isConsumed()).toBe(false);

      const done = await signalRow(sent.id);
      expect(done).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
      expect(done.consumedAt).toBeInstanceOf(Date);
      expect(done.claimedAt!.getTime()).toBe(duringBody!.claimedAt!.getTime());
      // claimed? stays true after consumption: it answers "was it ever picked up".
      expect(done.isClaimed()).toBe(true);
      expect(done.isConsumed()).toBe(true);
    });

    it('SIG-22 isClaimed/isConsumed read the counters, never the state', () => {
      const midFanOut = Object.assign(new Signal(), { state: 'claimed', claimed: 2, consumed: 1 });
      expect(midFanOut.isConsumed()).toBe(true);
      const inconsistent = Object.assign(new Signal(), { state: 'consumed', claimed: 0, consumed: 0 });
      expect(inconsistent.isClaimed()).toBe(false);
      expect(inconsistent.isConsumed()).toBe(false);
    });

    it('SIG-04/AT-04 a signal to a parked step wakes it: pinned, due now, one job after commit, workflow still ready', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      const before = Date.now();
      const signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 12_500 } });
      expect(signal).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0, duplicateDelivery: false });
      const woken = await executionRow(waiting.id);
      expect(woken).toMatchObject({ state: 'scheduled', signalId: signal.id });
      expect(woken.scheduledFor.getTime()).toBeGreaterThanOrEqual(before - 5);
      expect(woken.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 5);
      // The wait stays on record: parked at waitingSince, woken (due) at scheduledFor.
      expect(woken.waitingSince).toEqual(waiting.waitingSince);
      expect(woken.scheduledFor.getTime()).toBeGreaterThanOrEqual(woken.waitingSince!.getTime());
      // The wake-up's own job id is on the row, and stays once that job ran the step.
      const wakeId = `${waiting.id}-wake-${signal.id}`;
      expect(woken.jobId).toBe(wakeId);
      expect(app.gd.enqueuedJobs.at(-1)).toMatchObject({ executionId: waiting.id, jobId: wakeId });
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
      expect(app.gd.enqueuedJobs.at(-1)!.runAt.getTime()).toBe(woken.scheduledFor.getTime());
      expect((await app.gd.reload(wf)).state).toBe('ready');
      const stored = await signalRow(signal.id);
      expect(stored.claimedAt).toBeInstanceOf(Date);
      expect(await app.gd.performNextStep(wf)).toMatchObject({ id: waiting.id, state: 'completed', jobId: wakeId, waitingSince: waiting.waitingSince });
    });

    it('signals.list returns the workflow\'s signals oldest first, and only its own', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const other = await workflows.start(PlainTwoStepWorkflow, await newHero('Bob'));
      const a = await signals.signal(wf, 'a', { allowUnknownName: true });
      await signals.signal(other, 'elsewhere', { allowUnknownName: true });
      const b = await signals.signal(wf, 'b', { allowUnknownName: true });
      const c = await signals.signal(wf.id, 'a', { allowUnknownName: true });
      const listed = await signals.list(wf);
      expect(listed.map((s) => s.id)).toEqual([a.id, b.id, c.id]);
      expect(listed.map((s) => s.name)).toEqual(['a', 'b', 'a']);
      expect((await signals.list(other.id)).map((s) => s.name)).toEqual(['elsewhere']);
      expect(await signals.list(wf)).toEqual(listed);
    });
  });

  // ------------------------------------------------------------------ SIG-06 dedup

  describe('deduplication (SIG-06)', () => {
    it('AT-21 a redelivered key returns the original row, first payload wins, nothing woken, counters unchanged', async () => {
      const wf = await parked();
      const first = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 100 }, idempotencyKey: 'evt_1' });
      const woken = await current(wf);
      const firstRow = await signalRow(first.id);
      const jobsBefore = jobIds().length;

      const again = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 999 }, idempotencyKey: 'evt_1' });
      expect(again.duplicateDelivery).toBe(true);
      expect(again.id).toBe(first.id);
      expect(again.payload).toEqual({ amountCents: 100 });
      expect(again).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });
      const after = await signalRow(first.id);
      expect(after).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0, payload: { amountCents: 100 } });
      expect(after.updatedAt.getTime()).toBe(firstRow.updatedAt.getTime());
      expect((await current(wf)).id).toBe(woken.id);
      expect(jobIds()).toHaveLength(jobsBefore);
      expect(await signalRows(wf.id)).toHaveLength(1);
    });

    it('a redelivery of a buffered signal wakes nothing and the original row keeps its payload', async () => {
      const wf = await workflows.start(InvoiceWorkflow, hero);
      const first = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 }, idempotencyKey: 'k' });
      const again = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 2 }, idempotencyKey: 'k' });
      expect(again).toMatchObject({ id: first.id, duplicateDelivery: true, state: 'pending', payload: { amountCents: 1 } });
      await app.gd.speedrunWorkflow(wf);
      expect(signalJournal).toEqual(['prepared', 'captured(1)', 'receipt']);
      expect(await signalRows(wf.id)).toHaveLength(1);
    });

    it('AT-23 no key → two rows; the same key under another name or on another workflow → distinct rows', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const other = await workflows.start(PlainTwoStepWorkflow, await newHero('Bob'));
      const n1 = await signals.signal(wf, 'x', { allowUnknownName: true });
      const n2 = await signals.signal(wf, 'x', { allowUnknownName: true });
      expect(n2.id).not.toBe(n1.id);
      expect(n2.duplicateDelivery).toBe(false);
      const k1 = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'evt' });
      const k2 = await signals.signal(wf, 'y', { allowUnknownName: true, idempotencyKey: 'evt' });
      const k3 = await signals.signal(other, 'x', { allowUnknownName: true, idempotencyKey: 'evt' });
      expect(new Set([k1.id, k2.id, k3.id]).size).toBe(3);
      expect([k1, k2, k3].every((s) => !s.duplicateDelivery)).toBe(true);
      expect(await signalRows(wf.id)).toHaveLength(4);
      expect(await signalRows(other.id)).toHaveLength(1);
    });

    it('AT-20 ten concurrent deliveries of one key: one row, one original, nine duplicates, claimed once, one job', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => signals.signal(wf.id, 'payment_confirmed', { payload: { attempt: i }, idempotencyKey: 'evt_1' })),
      );
      expect(new Set(results.map((s) => s.id)).size).toBe(1);
      expect(results.filter((s) => !s.duplicateDelivery)).toHaveLength(1);
      expect(results.filter((s) => s.duplicateDelivery)).toHaveLength(9);
      const rows = await signalRows(wf.id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled', signalId: rows[0].id });
    });
  });

  // ------------------------------------------------------------------ SIG-11, SIG-35 concurrency

  describe('concurrency and isolation (SIG-11, SIG-35)', () => {
    it('SIG-35 concurrent signals without a key for one parked step: exactly one wakes it, the others stay pending', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      const results = await Promise.all(Array.from({ length: 5 }, (_, i) => signals.signal(wf.id, 'payment_confirmed', { payload: { n: i } })));
      const winners = results.filter((s) => s.state === 'claimed');
      expect(winners).toHaveLength(1);
      expect(results.filter((s) => s.state === 'pending')).toHaveLength(4);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled', signalId: winners[0].id });
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
      expect((await signalRows(wf.id)).map((s) => s.claimed).sort()).toEqual([0, 0, 0, 0, 1]);
    });

    (kind === 'sqlite' ? it.skip : it)(
      'SIG-11 in a caller transaction whose snapshot predates the park, signal() still sees and wakes the parked step (not on SQLite: one shared connection)',
      async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await app.gd.performNextStep(wf); // prepare; awaitPayment is scheduled
        const execution = await current(wf);
        const snapshotTaken = deferred();
        const parkedMeanwhile = deferred();
        const caller = app.dataSource.transaction(async (manager) => {
          // The caller's first read: under MySQL/MariaDB REPEATABLE READ it fixes the snapshot.
          expect(await manager.findOneBy(StepExecution, { id: execution.id })).toMatchObject({ state: 'scheduled' });
          snapshotTaken.resolve();
          await parkedMeanwhile.promise;
          return signals.signal(wf.id, 'payment_confirmed', { manager });
        });
        await snapshotTaken.promise;
        expect(await app.gd.performNextStep(wf)).toMatchObject({ id: execution.id, state: 'waiting' }); // committed outside
        parkedMeanwhile.resolve();
        const signal = await caller;
        expect(signal.state).toBe('claimed');
        expect(await executionRow(execution.id)).toMatchObject({ state: 'scheduled', signalId: signal.id, waitingSince: expect.any(Date) });
      },
    );

    (kind === 'sqlite' ? it.skip : it)(
      'SIG-06/SIG-11 in a caller transaction whose snapshot predates a concurrent delivery of the same key, the original row is returned (not on SQLite)',
      async () => {
        const wf = await workflows.start(PlainTwoStepWorkflow, hero);
        const snapshotTaken = deferred();
        const deliveredMeanwhile = deferred();
        const caller = app.dataSource.transaction(async (manager) => {
          expect(await manager.findBy(Signal, { workflowId: wf.id })).toEqual([]);
          snapshotTaken.resolve();
          await deliveredMeanwhile.promise;
          return signals.signal(wf.id, 'x', { allowUnknownName: true, idempotencyKey: 'evt_1', payload: { late: true }, manager });
        });
        await snapshotTaken.promise;
        const first = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'evt_1', payload: { first: true } });
        deliveredMeanwhile.resolve();
        const late = await caller;
        expect(late).toMatchObject({ id: first.id, duplicateDelivery: true, payload: { first: true } });
        expect(await signalRows(wf.id)).toHaveLength(1);
      },
    );
  });

  // ------------------------------------------------------------------ SIG-07, SIG-08

  describe('workflow state at delivery (SIG-07, SIG-08)', () => {
    it('AT-24 a finished workflow refuses a new signal (with or without key) with WorkflowNotOngoingError, writing nothing', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      for (const options of [{ allowUnknownName: true }, { idempotencyKey: 'new', allowUnknownName: true }]) {
        const attempt = signals.signal(wf, 'x', options);
        await expect(attempt).rejects.toThrow(WorkflowNotOngoingError);
        await expect(attempt).rejects.toThrow(/finished/);
      }
      expect(await signalRows()).toHaveLength(0);
    });

    it('AT-24 a canceled workflow refuses a new signal the same way', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'known' });
      await workflows.cancel(wf);
      const attempt = signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'other' });
      await expect(attempt).rejects.toBeInstanceOf(WorkflowNotOngoingError);
      await expect(attempt).rejects.toMatchObject({ state: 'canceled', signalName: 'x', workflowId: wf.id });
      await expect(signals.signal(wf, 'x', { allowUnknownName: true })).rejects.toThrow(/canceled/);
      // ...but a redelivery of the known key is the no-op it is on an ongoing workflow.
      const redelivered = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'known' });
      expect(redelivered.duplicateDelivery).toBe(true);
      expect(await signalRows(wf.id)).toHaveLength(1);
    });

    it('AT-25 redelivering the event that finished the workflow returns it as a duplicate; a new key still raises', async () => {
      const wf = await parked();
      const evt1 = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 5 }, idempotencyKey: 'evt_1' });
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      const again = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 6 }, idempotencyKey: 'evt_1' });
      expect(again).toMatchObject({ id: evt1.id, duplicateDelivery: true, state: 'consumed', payload: { amountCents: 5 } });
      await expect(signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt_2' })).rejects.toThrow(WorkflowNotOngoingError);
      // The same key under another name is a new event, so it raises too.
      await expect(signals.signal(wf, 'other_name', { allowUnknownName: true, idempotencyKey: 'evt_1' })).rejects.toThrow(WorkflowNotOngoingError);
      expect(await signalRows(wf.id)).toHaveLength(1);
    });

    it('AT-41 a paused workflow buffers (nothing woken, no job) and resume delivers it; the run consumes it', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      await workflows.pause(wf);
      const jobsBefore = jobIds().length;
      const signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 300 } });
      expect(signal).toMatchObject({ state: 'pending', claimed: 0, duplicateDelivery: false });
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
      expect(jobIds()).toHaveLength(jobsBefore);

      await workflows.resume(wf);
      const resumed = await executionRow(waiting.id);
      expect(resumed).toMatchObject({ state: 'scheduled', signalId: signal.id, waitingSince: waiting.waitingSince });
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
      expect(await signalRow(signal.id)).toMatchObject({ state: 'claimed', claimed: 1 });

      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(signalJournal).toEqual(['prepared', 'captured(300)', 'receipt']);
      expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
    });
  });

  // ------------------------------------------------------------------ SIG-41 payload

  describe('payload (SIG-41)', () => {
    it('AT-27 round-trips exactly: Date stays Date, bigint, nested values, keys as sent', async () => {
      const at = new Date('2024-02-29T12:34:56.789Z');
      const payload = {
        at,
        big: 2n ** 70n,
        nested: { list: [1, 'two', { when: new Date(0) }, null], flag: false },
        order_id: 42,
        amountCents: 100,
        $gd: 'a user key that looks like a codec tag',
      };
      const wf = await parked();
      const sent = await signals.signal(wf, 'payment_confirmed', { payload });
      const [stored] = await signals.list(wf);
      expect(stored.id).toBe(sent.id);
      expect(stored.payload).toEqual(payload);
      expect(stored.payload.at).toBeInstanceOf(Date);
      expect(stored.payload.at.getTime()).toBe(at.getTime());
      expect(typeof stored.payload.big).toBe('bigint');
      expect(stored.payload.nested.list[2].when).toBeInstanceOf(Date);
      // Keys are kept as sent: no camel/snake conversion, no indifferent access.
      expect(Object.keys(stored.payload).sort()).toEqual(['$gd', 'amountCents', 'at', 'big', 'nested', 'order_id']);
      expect(stored.payload.orderId).toBeUndefined();

      // The step body reads the same values through receivedSignal.
      await app.gd.speedrunWorkflow(wf);
      const seen = seenSignals.find((s) => s.step === 'awaitPayment')!;
      expect(seen.signalId).toBe(sent.id);
      expect(seen.payload).toEqual(payload);
      expect((seen.payload as typeof payload).at).toBeInstanceOf(Date);
    });

    it('AT-27 an omitted payload reads back {}, an explicit null reads null, and scalars and arrays come back as they are', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const omitted = await signals.signal(wf, 'omitted', { allowUnknownName: true });
      expect(omitted.payload).toEqual({});
      const explicitNull = await signals.signal(wf, 'null', { allowUnknownName: true, payload: null });
      const text = await signals.signal(wf, 'text', { allowUnknownName: true, payload: 'hello' });
      const numericText = await signals.signal(wf, 'numeric_text', { allowUnknownName: true, payload: '42' });
      const number = await signals.signal(wf, 'number', { allowUnknownName: true, payload: 7 });
      const list = await signals.signal(wf, 'list', { allowUnknownName: true, payload: [1, 'a', { b: true }] });
      const byId = new Map((await signals.list(wf)).map((s) => [s.id, s.payload]));
      expect(byId.get(omitted.id)).toEqual({});
      expect(byId.get(explicitNull.id)).toBeNull();
      expect(byId.get(text.id)).toBe('hello');
      expect(byId.get(numericText.id)).toBe('42');
      expect(byId.get(number.id)).toBe(7);
      expect(byId.get(list.id)).toEqual([1, 'a', { b: true }]);
    });
  });

  // ------------------------------------------------------------------ SIG-42 size

  describe('payload size (SIG-42)', () => {
    /** A payload whose encoded JSON is exactly `bytes` bytes: {"d":"…"} is 8 bytes plus the string. */
    const payloadOfSize = (bytes: number, char = 'x') => ({ d: char.repeat((bytes - 8) / Buffer.byteLength(char)) });

    it('AT-26 the default limit is 131072 encoded UTF-8 bytes: at the limit is accepted, one byte over raises before writing', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const atLimit = await signals.signal(wf, 'fits', { allowUnknownName: true, payload: payloadOfSize(DEFAULT_LIMIT) });
      expect(((await signalRow(atLimit.id)).payload as { d: string }).d).toHaveLength(DEFAULT_LIMIT - 8);
      const attempt = signals.signal(wf, 'too_big', { allowUnknownName: true, payload: payloadOfSize(DEFAULT_LIMIT + 1) });
      await expect(attempt).rejects.toBeInstanceOf(SignalPayloadTooLargeError);
      await expect(attempt).rejects.toThrow(/maxSignalPayloadSize/);
      await expect(attempt).rejects.toMatchObject({ size: DEFAULT_LIMIT + 1, limit: DEFAULT_LIMIT });
      // Bytes, not characters: 'é' is two bytes in UTF-8.
      await expect(signals.signal(wf, 'wide', { allowUnknownName: true, payload: payloadOfSize(DEFAULT_LIMIT + 2, 'é') })).rejects.toThrow(SignalPayloadTooLargeError);
      await signals.signal(wf, 'wide_fits', { allowUnknownName: true, payload: payloadOfSize(DEFAULT_LIMIT, 'é') });
      expect((await signalRows(wf.id)).map((s) => s.name)).toEqual(['fits', 'wide_fits']);
    });

    it('SIG-42 the size check runs first: an oversized redelivery of a known key, or to a finished workflow, raises the size error', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      const original = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'k', payload: { small: true } });
      await expect(signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'k', payload: payloadOfSize(DEFAULT_LIMIT + 1) })).rejects.toThrow(SignalPayloadTooLargeError);
      await app.gd.speedrunWorkflow(wf);
      await expect(signals.signal(wf, 'x', { allowUnknownName: true, payload: payloadOfSize(DEFAULT_LIMIT + 1) })).rejects.toThrow(SignalPayloadTooLargeError);
      expect(await signalRows(wf.id)).toEqual([expect.objectContaining({ id: original.id, payload: { small: true } })]);
    });

    it('an oversized signal in workflows.start raises before the workflow is created', async () => {
      await expect(workflows.start(InvoiceWorkflow, hero, { signals: [{ name: 'payment_confirmed', payload: payloadOfSize(DEFAULT_LIMIT + 1) }] })).rejects.toThrow(
        SignalPayloadTooLargeError,
      );
      expect(await workflows.findOngoing(InvoiceWorkflow, hero)).toBeNull();
      expect(jobIds()).toHaveLength(0);
    });

    describe('with configured limits', () => {
      let tiny: TestApp;
      let unlimited: TestApp;
      beforeAll(async () => {
        tiny = await createTestApp(kind, [PlainTwoStepWorkflow], { prepare: false, maxSignalPayloadSize: 64 });
        unlimited = await createTestApp(kind, [PlainTwoStepWorkflow], { prepare: false, maxSignalPayloadSize: null });
      });
      afterAll(async () => {
        await tiny.close();
        await unlimited.close();
      });

      it('AT-26 maxSignalPayloadSize 64 refuses a 1 KB payload; null disables the check', async () => {
        const wf = await workflows.start(PlainTwoStepWorkflow, hero);
        const kilobyte = { d: 'x'.repeat(1024) };
        const attempt = tiny.moduleRef.get(SignalService).signal(wf.id, 'x', { allowUnknownName: true, payload: kilobyte });
        await expect(attempt).rejects.toThrow(SignalPayloadTooLargeError);
        await expect(attempt).rejects.toThrow(/maxSignalPayloadSize \(64\)/);
        await tiny.moduleRef.get(SignalService).signal(wf.id, 'small', { allowUnknownName: true, payload: payloadOfSize(64) });
        const huge = { d: 'x'.repeat(DEFAULT_LIMIT * 2) };
        const accepted = await unlimited.moduleRef.get(SignalService).signal(wf.id, 'huge', { allowUnknownName: true, payload: huge });
        expect((await signalRow(accepted.id)).payload).toEqual(huge);
        expect((await signalRows(wf.id)).map((s) => s.name)).toEqual(['small', 'huge']);
      });
    });
  });

  // ------------------------------------------------------------------ SIG-09, SIG-10, SIG-32

  describe('one transaction (SIG-09, SIG-10)', () => {
    it('AT-16 inside a caller transaction the wake is visible; a rollback leaves no row, the step parked and no job', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      const rollback = new Error('caller rolls back');
      let inside: { signal?: Signal | null; execution?: StepExecution | null } = {};
      await expect(
        app.dataSource.transaction(async (manager) => {
          const signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 }, manager });
          inside = {
            signal: await manager.findOneBy(Signal, { id: signal.id }),
            execution: await manager.findOneBy(StepExecution, { id: waiting.id }),
          };
          expect(jobIds()).toHaveLength(jobsBefore); // not before the commit
          throw rollback;
        }),
      ).rejects.toBe(rollback);
      expect(inside.signal).toMatchObject({ state: 'claimed', claimed: 1 });
      expect(inside.execution).toMatchObject({ state: 'scheduled', signalId: inside.signal!.id });
      expect(await signalRows()).toHaveLength(0);
      const after = await executionRow(waiting.id);
      expect(after).toMatchObject({ state: 'waiting', signalId: null });
      expect(after.waitingSince!.getTime()).toBe(waiting.waitingSince!.getTime());
      // Give a stray after-commit callback a chance to run: there must be none.
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(jobIds()).toHaveLength(jobsBefore);
    });

    it('SIG-10 in a caller transaction that commits, the job is enqueued only after the commit', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      let jobsInside = -1;
      await app.dataSource.transaction(async (manager) => {
        await signals.signal(wf, 'payment_confirmed', { manager });
        jobsInside = jobIds().length;
      });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(jobsInside).toBe(jobsBefore);
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
    });

    it('AT-22 after a duplicate inside the caller transaction, another signal in it still succeeds (savepoint) and both commit', async () => {
      const wf = await workflows.start(PlainTwoStepWorkflow, hero);
      await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'evt_1' });
      await app.dataSource.transaction(async (manager) => {
        const duplicate = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'evt_1', manager });
        expect(duplicate.duplicateDelivery).toBe(true);
        const fresh = await signals.signal(wf, 'x', { allowUnknownName: true, idempotencyKey: 'evt_2', manager });
        expect(fresh.duplicateDelivery).toBe(false);
        // The caller's own statements still work after the caught unique violation.
        await manager.update(TestHero, { id: hero.id }, { name: 'still usable' });
      });
      expect((await signalRows(wf.id)).map((s) => s.idempotencyKey)).toEqual(['evt_1', 'evt_2']);
      expect((await app.dataSource.getRepository(TestHero).findOneByOrFail({ id: hero.id })).name).toBe('still usable');
    });

    it('AT-14 a matcher that throws inside signal() reaches the sender and rolls the whole delivery back; fixed, a redelivery wakes', async () => {
      const wf = await parked(MatcherInvoiceWorkflow);
      const waiting = await current(wf);
      const unrelated = await signals.signal(wf, 'unrelated', { allowUnknownName: true, payload: { u: 1 } });
      const unrelatedBefore = await signalRow(unrelated.id);
      const jobsBefore = jobIds().length;

      signalControls.matcherThrows = true;
      await expect(signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 5 }, idempotencyKey: 'evt' })).rejects.toThrow('matcher exploded');
      expect(signalControls.matcherCalls).toBe(1);
      expect((await signalRows(wf.id)).map((s) => s.id)).toEqual([unrelated.id]);
      const still = await executionRow(waiting.id);
      expect(still).toMatchObject({ state: 'waiting', signalId: null });
      expect(still.waitingSince!.getTime()).toBe(waiting.waitingSince!.getTime());
      expect(still.scheduledFor.getTime()).toBe(waiting.scheduledFor.getTime());
      expect(await signalRow(unrelated.id)).toEqual(unrelatedBefore);
      expect(jobIds()).toHaveLength(jobsBefore);

      signalControls.matcherThrows = false;
      const redelivered = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 5 }, idempotencyKey: 'evt' });
      expect(redelivered).toMatchObject({ duplicateDelivery: false, state: 'claimed', claimed: 1 });
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled', signalId: redelivered.id });
      expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
    });

    it('AT-15 a failure at the last write of dispatch rolls back the insert, the pin and the flip', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      const jobsBefore = jobIds().length;
      const store = app.moduleRef.get(WorkflowStore, { strict: false });
      if (kind === 'postgres') {
        // PostgreSQL delivers in one statement and enqueues once it has committed: the failure is
        // the database's own, raised by the wake's UPDATE (the transaction it falls back to fails there too).
        await app.dataSource.query(
          `CREATE FUNCTION gd_refuse_wake() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected at the end of dispatch'; END $$`,
        );
        await app.dataSource.query(`CREATE TRIGGER gd_refuse_wake BEFORE UPDATE ON geneva_drive_step_executions FOR EACH ROW WHEN (NEW.state = 'scheduled') EXECUTE FUNCTION gd_refuse_wake()`);
      } else {
        jest.spyOn(store, 'enqueue').mockRejectedValueOnce(new Error('injected at the end of dispatch'));
      }
      try {
        await expect(signals.signal(wf, 'payment_confirmed')).rejects.toThrow('injected at the end of dispatch');
      } finally {
        if (kind === 'postgres') await app.dataSource.query('DROP FUNCTION gd_refuse_wake() CASCADE');
      }
      expect(await signalRows()).toHaveLength(0);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
      expect(jobIds()).toHaveLength(jobsBefore);
      // The sender simply retries.
      await signals.signal(wf, 'payment_confirmed');
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled' });
    });

    it('AT-17 the workflow lock is taken before the INSERT, and no COMMIT separates the INSERT from the wake', async () => {
      const wf = await parked();
      const queries: string[] = [];
      const recorder: EntitySubscriberInterface = {
        beforeQuery: (event) => {
          queries.push(event.query);
        },
      };
      app.dataSource.subscribers.push(recorder);
      try {
        await signals.signal(wf, 'payment_confirmed');
      } finally {
        app.dataSource.subscribers.splice(app.dataSource.subscribers.indexOf(recorder), 1);
      }
      // PostgreSQL sends the transaction as one message: its statements, in order.
      queries.splice(0, queries.length, ...queries.flatMap((q) => (/^BEGIN; /.test(q) ? q.split('; ') : [q])));
      const index = (pattern: RegExp) => queries.findIndex((q) => pattern.test(q));
      // SQLite has no row locks: the engine's transaction takes the database write lock with BEGIN IMMEDIATE.
      const lock = index(kind === 'sqlite' ? /^BEGIN IMMEDIATE/i : /geneva_drive_workflows.*FOR UPDATE/is);
      // PostgreSQL inserts the signal, claimed, and wakes the execution in one statement.
      const insert = index(/^(WITH .*)?INSERT INTO\W+geneva_drive_signals/is);
      // MySQL writes the claim and the wake with one multi-table UPDATE, SQLite row by row.
      const wake = queries.findIndex((q, i) => i >= insert && /UPDATE\b.*geneva_drive_step_executions/is.test(q) && /signal_id/i.test(q));
      const commit = queries.findIndex((q, i) => i > insert && /^COMMIT/i.test(q));
      expect(lock).toBeGreaterThanOrEqual(0);
      expect(insert).toBeGreaterThan(lock);
      expect(wake).toBeGreaterThanOrEqual(insert);
      expect(commit).toBeGreaterThan(wake);
      expect(queries.slice(0, lock + 1).some((q) => /^(START TRANSACTION|BEGIN)/i.test(q))).toBe(true);
    });
  });

  // ------------------------------------------------------------------ one message (PostgreSQL)

  describe('a signal decided by its name alone', () => {
    /** The statements `work` sends, each message as one (the id block the sender takes ahead left out). */
    const messagesOf = async (work: () => Promise<unknown>) => {
      const queries: string[] = [];
      const recorder: EntitySubscriberInterface = { beforeQuery: (event) => void queries.push(event.query) };
      app.dataSource.subscribers.push(recorder);
      try {
        await work();
      } finally {
        app.dataSource.subscribers.splice(app.dataSource.subscribers.indexOf(recorder), 1);
      }
      return queries.filter((q) => !/nextval\(/.test(q));
    };
    const oneMessage = /^BEGIN; SELECT 1 FROM "geneva_drive_workflows" .* FOR UPDATE; WITH .*INSERT INTO "geneva_drive_signals".*UPDATE "geneva_drive_step_executions".*; COMMIT$/s;

    it('wakes its parked step in one message on PostgreSQL: lock, insert claimed, wake, COMMIT; its job goes once that committed', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      let signal!: Signal;
      const messages = await messagesOf(async () => (signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 7 } })));
      if (kind === 'postgres') expect(messages).toEqual([expect.stringMatching(oneMessage)]);
      else expect(messages.length).toBeGreaterThan(3);
      expect(signal).toMatchObject({ state: 'claimed', claimed: 1, duplicateDelivery: false });
      expect(signal.claimedAt).toBeInstanceOf(Date);
      expect(await signalRow(signal.id)).toMatchObject({ state: 'claimed', claimed: 1, payload: { amountCents: 7 } });
      const woken = await executionRow(waiting.id);
      expect(woken).toMatchObject({ state: 'scheduled', signalId: signal.id, jobId: `${waiting.id}-wake-${signal.id}` });
      expect(app.gd.enqueuedJobs.filter((job) => job.jobId === woken.jobId)).toHaveLength(1);
      await app.gd.speedrunWorkflow(wf);
      expect(signalJournal).toContain('captured(7)');
    });

    it('a redelivery of its key answers with the first row and wakes nothing more, in one message on PostgreSQL', async () => {
      const wf = await parked();
      const first = await signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt-1', payload: { amountCents: 1 } });
      const jobs = app.gd.enqueuedJobs.length;
      let again!: Signal;
      const messages = await messagesOf(async () => (again = await signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt-1', payload: { amountCents: 2 } })));
      if (kind === 'postgres') expect(messages).toEqual([expect.stringMatching(/^BEGIN; .*; COMMIT$/s)]);
      expect(again).toMatchObject({ id: first.id, duplicateDelivery: true, payload: { amountCents: 1 }, claimed: 1 });
      expect(await signalRows(wf.id)).toHaveLength(1);
      expect(app.gd.enqueuedJobs).toHaveLength(jobs);
    });

    it('a step whose matcher has a payload condition is decided in the transaction, where the matcher runs (the message writes nothing for its class)', async () => {
      const wf = await parked(MatcherInvoiceWorkflow);
      const messages = await messagesOf(() => signals.signal(wf.id, 'payment_confirmed'));
      // Other classes take the name alone, so PostgreSQL sends the message first: it writes nothing for this class.
      if (kind === 'postgres') expect(messages.filter((q) => /^BEGIN; /.test(q))).toHaveLength(1);
      if (kind === 'postgres') expect(messages.filter((q) => /^START TRANSACTION$/i.test(q.trim()))).toHaveLength(1);
      expect(signalControls.matcherCalls).toBe(1);
      expect(await current(wf)).toMatchObject({ state: 'scheduled' });
    });

    it('given the record of a class whose matcher has a payload condition, no message is sent: the transaction decides at once', async () => {
      const wf = await parked(MatcherInvoiceWorkflow);
      const messages = await messagesOf(() => signals.signal(wf, 'payment_confirmed'));
      expect(messages.filter((q) => /^BEGIN; /.test(q))).toEqual([]);
      if (kind === 'postgres') expect(messages.filter((q) => /^START TRANSACTION$/i.test(q.trim()))).toHaveLength(1);
      expect(signalControls.matcherCalls).toBe(1);
      expect(await current(wf)).toMatchObject({ state: 'scheduled' });
    });

    it('a paused workflow: the message writes nothing, and the transaction buffers the signal for resume', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      await workflows.pause(wf);
      const signal = await signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt-p' });
      expect(signal).toMatchObject({ state: 'pending', claimed: 0 });
      expect(await signalRows(wf.id)).toHaveLength(1);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
      await workflows.resume(wf);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled', signalId: signal.id });
    });

    it('a signal for another step than the parked one is buffered, pending, and wakes nothing', async () => {
      const wf = await workflows.start(PingThenPongWorkflow, hero);
      await app.gd.performNextStep(wf); // `ping` parks
      const waiting = await current(wf);
      const jobs = app.gd.enqueuedJobs.length;
      const messages = await messagesOf(async () => expect(await signals.signal(wf, 'pong')).toMatchObject({ state: 'pending', claimed: 0, claimedAt: null }));
      if (kind === 'postgres') expect(messages).toEqual([expect.stringMatching(/^BEGIN; .*; COMMIT$/s)]);
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
      expect(app.gd.enqueuedJobs).toHaveLength(jobs);
      // Buffered: `pong` finds it at its gate once `ping` has had its own.
      await signals.signal(wf, 'ping');
      await app.gd.speedrunWorkflow(wf);
      expect(seenSignals.map((seen) => seen.step)).toEqual(['ping', 'pong']);
    });
  });

  // ------------------------------------------------------------------ names no step waits for

  describe('a name no step of the class waits for', () => {
    const typo =
      'No step of InvoiceWorkflow waits for a signal "paymnt_confirmed": it waits for "payment_confirmed". To keep it for a step a later version adds, pass allowUnknownName: true';

    it('is refused with UnknownSignalNameError naming the names the class waits for, writing nothing', async () => {
      const wf = await parked();
      const attempt = signals.signal(wf, 'paymnt_confirmed', { payload: { amountCents: 5 }, idempotencyKey: 'evt_1' });
      await expect(attempt).rejects.toThrow(typo);
      await expect(attempt).rejects.toBeInstanceOf(UnknownSignalNameError);
      await expect(attempt).rejects.toBeInstanceOf(InvalidSignalError); // caught where bad input is
      await expect(attempt).rejects.toMatchObject({ argument: 'name', workflowClass: 'InvoiceWorkflow', signalName: 'paymnt_confirmed', waitedNames: ['payment_confirmed'] });
      expect(await signalRows()).toEqual([]);
      await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
    });

    it('is refused by signalHero and by start(..., { signals }) too, before anything is written', async () => {
      await expect(workflows.start(InvoiceWorkflow, hero, { signals: [{ name: 'payment_confirmed' }, { name: 'paymnt_confirmed' }] })).rejects.toThrow(typo);
      expect(await app.dataSource.getRepository(WorkflowRecord).count()).toBe(0);
      await workflows.start(InvoiceWorkflow, hero);
      await expect(signals.signalHero(InvoiceWorkflow, hero, 'paymnt_confirmed')).rejects.toThrow(typo);
      await expect(signals.signal(await workflows.start(PlainTwoStepWorkflow, hero), 'go')).rejects.toThrow(
        'No step of PlainTwoStepWorkflow waits for a signal "go": it waits for no signal. To keep it for a step a later version adds, pass allowUnknownName: true',
      );
      expect(await signalRows()).toEqual([]);
    });

    it('with allowUnknownName: true is kept pending, for a step a later version adds; a redelivery of its key answers without the flag', async () => {
      const wf = await parked();
      const kept = await signals.signal(wf, 'refund_requested', { idempotencyKey: 'evt_9', allowUnknownName: true });
      expect(kept).toMatchObject({ name: 'refund_requested', state: 'pending', duplicateDelivery: false });
      expect(await signals.signal(wf, 'refund_requested', { idempotencyKey: 'evt_9' })).toMatchObject({ id: kept.id, duplicateDelivery: true });
      const started = await workflows.start(InvoiceWorkflow, await newHero('Bob'), { signals: [{ name: 'refund_requested', allowUnknownName: true }] });
      expect((await signals.list(started)).map((s) => [s.name, s.state])).toEqual([['refund_requested', 'pending']]);
      await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
    });

    it('is any name when a step waits with a custom matcher that names no signal', async () => {
      const wf = await workflows.start(CustomMatcherWorkflow, hero);
      expect(await signals.signal(wf, 'settled_elsewhere')).toMatchObject({ name: 'settled_elsewhere', state: 'pending' });
    });

    it('refuses an allowUnknownName that is not a boolean', async () => {
      const wf = await parked();
      await expect(signals.signal(wf, 'payment_confirmed', { allowUnknownName: 'yes' } as never)).rejects.toThrow(
        new InvalidSignalError('options', 'allowUnknownName must be a boolean, got "yes"'),
      );
      expect(await signalRows()).toEqual([]);
    });
  });

  // ------------------------------------------------------------------ typed signal definitions

  describe('a signal definition (a SignalMatcher<Payload>) shared by the sender and the step', () => {
    it('sends under its name, and the step reads the payload typed, without a cast', async () => {
      const wf = await workflows.start(TypedPaymentWorkflow, hero);
      await app.gd.performNextStep(wf); // capture parks
      await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
      const sent = await signals.signal(wf, PAYMENT_CONFIRMED, { payload: { amountCents: 1250 }, idempotencyKey: 'evt_1' });
      expect(sent).toMatchObject({ name: 'payment_confirmed', state: 'claimed', payload: { amountCents: 1250 } });
      expect(await signals.signalHero(TypedPaymentWorkflow, hero, PAYMENT_CONFIRMED, { payload: { amountCents: 1250 }, idempotencyKey: 'evt_1' })).toMatchObject([{ id: sent.id, duplicateDelivery: true }]);
      await app.gd.performNextStep(wf);
      expect(seenSignals).toEqual([{ step: 'capture', signalId: sent.id, payload: { cents: '1250' } }]);
    });

    it('refuses, in a step that received no signal of its name, with SignalNotReceivedError', async () => {
      const wf = await workflows.start(TypedPaymentWorkflow, hero, { signals: [{ name: 'payment_confirmed', payload: { amountCents: 1 } }] });
      await app.gd.performNextStep(wf); // capture takes the buffered signal
      const misread = app.gd.performNextStep(wf);
      await expect(misread).rejects.toThrow(SignalNotReceivedError);
      await expect(misread).rejects.toThrow('Step "misread" of TypedPaymentWorkflow did not receive a signal "payment_confirmed": it received no signal');
      await app.gd.assertWorkflowState(wf, 'paused');
    });
  });

  // ------------------------------------------------------------------ signal-with-start

  describe('signal-with-start', () => {
    it('buffers the signals in the start transaction; the waiter attaches without parking', async () => {
      const wf = await workflows.start(InvoiceWorkflow, hero, {
        signals: [
          { name: 'payment_confirmed', payload: { amountCents: 700 }, idempotencyKey: 'evt_1' },
          { name: 'noise', allowUnknownName: true },
          { name: 'payment_confirmed', payload: { amountCents: 999 }, idempotencyKey: 'evt_1' },
        ],
      });
      const buffered = await signals.list(wf);
      expect(buffered.map((s) => [s.name, s.state, s.idempotencyKey])).toEqual([
        ['payment_confirmed', 'pending', 'evt_1'],
        ['noise', 'pending', null],
      ]);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(signalJournal).toEqual(['prepared', 'captured(700)', 'receipt']);
      expect((await workflows.executionHistory(wf)).every((e) => e.waitingSince === null && e.state !== 'waiting')).toBe(true);
      expect((await signals.list(wf)).map((s) => s.state)).toEqual(['consumed', 'pending']);
    });

    it('with a caller manager that rolls back, neither the workflow nor its signals nor a job exist', async () => {
      const rollback = new Error('rollback');
      await expect(
        app.dataSource.transaction(async (manager) => {
          await workflows.start(InvoiceWorkflow, hero, { manager, signals: [{ name: 'payment_confirmed' }] });
          throw rollback;
        }),
      ).rejects.toBe(rollback);
      expect(await workflows.findOngoing(InvoiceWorkflow, hero)).toBeNull();
      expect(await signalRows()).toHaveLength(0);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(jobIds()).toHaveLength(0);
    });

    it('an invalid signal fails the start before anything is written', async () => {
      await expect(workflows.start(InvoiceWorkflow, hero, { signals: [{ name: '' }] })).rejects.toThrow(InvalidSignalError);
      expect(await workflows.findOngoing(InvoiceWorkflow, hero)).toBeNull();
      expect(jobIds()).toHaveLength(0);
    });
  });

  // ------------------------------------------------------------------ SIG-12, SIG-33, SIG-38

  describe('where signals come from', () => {
    it('AT-63 a step signalling its own workflow does not deadlock; the signal buffers and a later step attaches it without parking', async () => {
      const wf = await workflows.start(SelfSignalWorkflow, hero);
      await app.gd.performNextStep(wf);
      expect(signalJournal).toEqual(['sent(pending)']);
      const [ping] = await signals.list(wf);
      expect(ping).toMatchObject({ name: 'ping', state: 'pending' });
      const next = await app.gd.performNextStep(wf);
      expect(next).toMatchObject({ stepName: 'awaitPing', state: 'completed', signalId: ping.id, waitingSince: null });
      expect(signalJournal).toEqual(['sent(pending)', 'got(self)']);
      expect((await signalRow(ping.id)).state).toBe('consumed');
    });

    it('AT-62 a workflow whose class is gone still records the signal as pending; the parked row stays waiting', async () => {
      const wf = await parked();
      const waiting = await current(wf);
      await app.dataSource.getRepository(WorkflowRecord).update({ id: wf.id }, { type: 'RemovedWorkflow' });
      const jobsBefore = jobIds().length;
      const signal = await signals.signal(wf, 'payment_confirmed');
      expect(signal).toMatchObject({ state: 'pending', claimed: 0 });
      expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
      expect(jobIds()).toHaveLength(jobsBefore);
    });

    it('AT-12 (port) the matcher runs on the workflow as it is at delivery: the hero is read under the lock, not from the sender\'s copy', async () => {
      const wf = await workflows.start(EmailMatcherWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.assertWaitingForSignal(wf, 'paid');
      // The sender holds an old copy of the hero; the database says otherwise by delivery time.
      await app.dataSource.getRepository(TestHero).update({ id: hero.id }, { name: 'new@example.com' });
      const stale = await signals.signal(wf, 'paid', { payload: { email: 'Ada' } });
      expect(stale.state).toBe('pending');
      await app.gd.assertWaitingForSignal(wf);
      const fresh = await signals.signal(wf, 'paid', { payload: { email: 'new@example.com' } });
      expect(fresh.state).toBe('claimed');
      expect((await current(wf)).signalId).toBe(fresh.id);
    });
  });
});
