/**
 * Signals, receiver side (reference PART B §B.4–B.6, B.8–B.14): the gate, parking, dispatch,
 * matchers, composition with wait/skipIf/cancelIf, settlement of claims, the `waiting` state under
 * operator actions and housekeeping, the test helpers, definition-time checks and the
 * missing-migration mode, plus the matching PART C scenarios (AT-xx). A signal of a name no step of
 * its workflow waits for (one that must leave a step parked) is sent with `allowUnknownName`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { AssertionError } from 'node:assert';
import {
  ExecutorService,
  GenevaWorkflow,
  HousekeepingService,
  Signal,
  SignalMatcher,
  SignalService,
  SignalsNotMigratedError,
  Step,
  StepConfigurationError,
  StepExecution,
  Workflow,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import { buildWorkflowDefinition } from '../../libs/geneva-drive/src/registry/build-definition.js';
import { assertExecutionTransition, type StepExecutionState } from '../../libs/geneva-drive/src/state/step-execution-state.js';
import {
  ALL_INVOICES,
  CustomMatcherWorkflow,
  DelayedInvoiceWorkflow,
  EmailMatcherWorkflow,
  FinishOnErrorInvoiceWorkflow,
  FirstStepWaitsWorkflow,
  hookLog,
  InvoiceWorkflow,
  MatcherInvoiceWorkflow,
  PlainTwoStepWorkflow,
  ReattemptOnErrorInvoiceWorkflow,
  resetSignalFixtures,
  seenSignals,
  signalControls,
  signalJournal,
  SkipOnErrorInvoiceWorkflow,
  TwoWaitersWorkflow,
} from '../src/signal-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const DAY = 86_400_000;

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Whether `promise` is still pending after `ms` (it is left running). */
async function stillPending(promise: Promise<unknown>, ms = 150): Promise<boolean> {
  const marker = Symbol('pending');
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise((r) => (timer = setTimeout(() => r(marker), ms)));
  try {
    return (await Promise.race([promise.then(() => 'settled', () => 'settled'), waited])) === marker;
  } finally {
    clearTimeout(timer);
  }
}

class PaymentError extends Error {}

describeEachDatabase('signals: waiting', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let hero: TestHero;

  const signalRow = (id: string) => app.dataSource.getRepository(Signal).findOneByOrFail({ id });
  const signalRows = (workflowId: string) => app.dataSource.getRepository(Signal).find({ where: { workflowId }, order: { createdAt: 'ASC', id: 'ASC' } });
  const executionRow = (id: string) => app.dataSource.getRepository(StepExecution).findOneByOrFail({ id });
  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const current = async (wf: WorkflowRecord) => (await workflows.currentExecution(wf))!;
  const jobIds = () => app.gd.enqueuedJobs.map((job) => job.executionId);
  const setExecution = (id: string, changes: { waitingSince?: Date; scheduledFor?: Date; startedAt?: Date }) => app.dataSource.getRepository(StepExecution).update({ id }, changes);
  const newHero = async (name = 'ada@example.com') => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };

  /** An Invoice-shaped workflow parked at awaitPayment. */
  const parked = async (workflowClass = InvoiceWorkflow, on = hero) => {
    const wf = await workflows.start(workflowClass, on);
    await app.gd.performNextStep(wf); // prepare
    const parkedRow = await app.gd.performNextStep(wf); // awaitPayment parks
    expect(parkedRow).toMatchObject({ stepName: 'awaitPayment', state: 'waiting' });
    return wf;
  };
  /** Parked, then woken by a signal: the execution is scheduled and pinned; returns both. */
  const woken = async (workflowClass = InvoiceWorkflow, payload: Record<string, unknown> = { amountCents: 12_500 }) => {
    const wf = await parked(workflowClass);
    const signal = await signals.signal(wf, 'payment_confirmed', { payload });
    const execution = await current(wf);
    expect(execution).toMatchObject({ state: 'scheduled', signalId: signal.id });
    return { wf, signal, execution };
  };

  describe('with the signals migration', () => {
    beforeAll(async () => {
      app = await createTestApp(kind, [...ALL_INVOICES, FirstStepWaitsWorkflow, TwoWaitersWorkflow, EmailMatcherWorkflow, CustomMatcherWorkflow, PlainTwoStepWorkflow]);
      workflows = app.moduleRef.get(WorkflowService);
      signals = app.moduleRef.get(SignalService);
    });
    afterAll(() => app.close());
    beforeEach(async () => {
      await app.reset();
      resetSignalFixtures();
      hero = await newHero();
    });

    // ------------------------------------------------------------------ B.4 the gate

    describe('the gate (SIG-25..28)', () => {
      it('SIG-26c parks a step with no matching signal: waiting, waitingSince set, no job, workflow stays ready', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await app.gd.performNextStep(wf);
        const scheduled = await current(wf);
        const jobsBefore = jobIds().length;
        const before = Date.now();
        // AT-64: the helper call that causes the park returns normally.
        const result = await app.gd.performNextStep(wf);
        expect(result).toMatchObject({ id: scheduled.id, stepName: 'awaitPayment', state: 'waiting', signalId: null, outcome: null, startedAt: null });
        expect(result!.waitingSince!.getTime()).toBeGreaterThanOrEqual(before - 5);
        expect(jobIds()).toHaveLength(jobsBefore);
        const record = await app.gd.reload(wf);
        expect(record).toMatchObject({ state: 'ready', nextStepName: 'awaitPayment', currentStepName: null });
        expect((await current(wf)).id).toBe(scheduled.id); // currentExecution includes waiting rows
        expect(signalJournal).toEqual(['prepared']);
        await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
      });

      it('AT-07 a first step that waits parks right after creation; a later signal wakes it and the workflow finishes', async () => {
        const wf = await workflows.start(FirstStepWaitsWorkflow, hero);
        await app.gd.performNextStep(wf);
        await app.gd.assertWaitingForSignal(wf, 'go');
        await signals.signal(wf, 'go', { payload: { n: 1 } });
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(signalJournal).toEqual(['go(1)', 'done']);
      });

      it('AT-06 an early signal is buffered until the gate, which attaches it without parking', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        const signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 700 } });
        await app.gd.performNextStep(wf);
        expect(await signalRow(signal.id)).toMatchObject({ state: 'pending', claimed: 0 });
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(signalJournal).toEqual(['prepared', 'captured(700)', 'receipt']);
        const rows = await history(wf);
        expect(rows.find((e) => e.stepName === 'awaitPayment')).toMatchObject({ state: 'completed', signalId: signal.id, waitingSince: null });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
      });

      it('AT-08 a signal of another name leaves the step parked, stays pending and enqueues nothing', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        const jobsBefore = jobIds().length;
        const other = await signals.signal(wf, 'something_else', { allowUnknownName: true });
        expect(other.state).toBe('pending');
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting', signalId: null });
        expect(jobIds()).toHaveLength(jobsBefore);
      });

      it('AT-11 / SIG-24 the oldest matching signal is attached; a newer one stays pending (SIG-52)', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        const s1 = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 } });
        const s2 = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 2 } });
        await app.gd.speedrunWorkflow(wf);
        expect(signalJournal).toEqual(['prepared', 'captured(1)', 'receipt']);
        expect(await signalRow(s1.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
        expect(await signalRow(s2.id)).toMatchObject({ state: 'pending', claimed: 0, consumed: 0 });
      });

      it('AT-46 a stale duplicate job of a parked execution is a no-op: still waiting, nothing claimed', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        const ignored = await signals.signal(wf, 'unrelated', { allowUnknownName: true });
        await app.moduleRef.get(ExecutorService).execute(waiting.id);
        const after = await executionRow(waiting.id);
        expect(after).toMatchObject({ state: 'waiting', signalId: null });
        expect(after.waitingSince!.getTime()).toBe(waiting.waitingSince!.getTime());
        expect(await signalRow(ignored.id)).toMatchObject({ state: 'pending', claimed: 0 });
        expect(signalJournal).toEqual(['prepared']);
      });

      it('SIG-25 order: cancelIf beats skipIf beats the gate; a buffered signal is left alone by both', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        const signal = await signals.signal(wf, 'payment_confirmed');
        await app.gd.performNextStep(wf);
        let skipIfCalls = 0;
        signalControls.skipAwait = () => {
          skipIfCalls++;
          return true;
        };
        await app.dataSource.getRepository(TestHero).update({ id: hero.id }, { canceled: true });
        const result = await app.gd.performNextStep(wf);
        expect(result).toMatchObject({ stepName: 'awaitPayment', state: 'canceled', signalId: null, waitingSince: null });
        expect(skipIfCalls).toBe(0);
        expect(wf.state).toBe('canceled');
        expect(await signalRow(signal.id)).toMatchObject({ state: 'pending', claimed: 0 });
      });

      it('AT-29 / SIG-45 skipIf true at the first prepare skips without waiting; buffered signals are untouched and the workflow proceeds', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        const buffered = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 9 } });
        signalControls.skipAwait = true;
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(signalJournal).toEqual(['prepared', 'receipt']);
        const skipped = (await history(wf)).find((e) => e.stepName === 'awaitPayment')!;
        expect(skipped).toMatchObject({ state: 'skipped', outcome: 'skipped', signalId: null, waitingSince: null });
        expect(await signalRow(buffered.id)).toMatchObject({ state: 'pending', claimed: 0, consumed: 0 });
      });

      it('SIG-45 skipIf true with nothing buffered skips instead of parking', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        signalControls.skipAwait = true;
        await app.gd.performNextStep(wf);
        expect(await app.gd.performNextStep(wf)).toMatchObject({ stepName: 'awaitPayment', state: 'skipped' });
        expect((await current(wf)).stepName).toBe('issueReceipt');
      });

      it('AT-13 / SIG-28 a matcher that throws at the gate goes through the policy: failed, paused, raised; nothing claimed, body not run', async () => {
        const wf = await workflows.start(MatcherInvoiceWorkflow, hero);
        const buffered = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 3 } });
        await app.gd.performNextStep(wf);
        signalControls.matcherThrows = true;
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('matcher exploded');
        const failed = (await history(wf)).find((e) => e.stepName === 'awaitPayment')!;
        expect(failed).toMatchObject({ state: 'failed', outcome: 'failed', signalId: null });
        expect(failed.errorMessage).toMatch(/matcher exploded/);
        expect((await app.gd.reload(wf)).state).toBe('paused');
        expect(await signalRow(buffered.id)).toMatchObject({ state: 'pending', claimed: 0 });
        expect(signalJournal).toEqual(['prepared']);
      });
    });

    // ------------------------------------------------------------------ B.5/B.6 dispatch and matchers

    describe('dispatch and matchers (SIG-29..38)', () => {
      it('AT-05 the woken job runs with receivedSignal; the signal is consumed in the same step and the next step is scheduled', async () => {
        const { wf, signal, execution } = await woken();
        const ran = await app.gd.performNextStep(wf);
        expect(ran).toMatchObject({ id: execution.id, state: 'completed', outcome: 'success', signalId: signal.id });
        expect(seenSignals).toEqual([{ step: 'awaitPayment', signalId: signal.id, payload: { amountCents: 12_500 } }]);
        const consumed = await signalRow(signal.id);
        expect(consumed).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
        expect(consumed.consumedAt!.getTime()).toBeGreaterThanOrEqual(ran!.startedAt!.getTime());
        expect(await current(wf)).toMatchObject({ stepName: 'issueReceipt', state: 'scheduled', signalId: null });
      });

      it('AT-67 / SIG-43 receivedSignal is set in before/around/after hooks of a waiting step, null elsewhere', async () => {
        const { wf, signal } = await woken();
        await app.gd.speedrunWorkflow(wf);
        expect(hookLog).toEqual([
          'before:prepare:null',
          'around:prepare:null',
          'after:prepare:null',
          `before:awaitPayment:${signal.id}`,
          `around:awaitPayment:${signal.id}`,
          `after:awaitPayment:${signal.id}`,
          'before:issueReceipt:null',
          'around:issueReceipt:null',
          'after:issueReceipt:null',
        ]);
        expect(seenSignals.find((s) => s.step === 'issueReceipt')).toEqual({ step: 'issueReceipt', signalId: null, payload: undefined });
      });

      it('SIG-35 a second signal arriving after the wake finds nothing waiting and stays pending', async () => {
        const { wf, signal } = await woken();
        const jobsBefore = jobIds().length;
        const second = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 } });
        expect(second).toMatchObject({ state: 'pending', claimed: 0 });
        expect(jobIds()).toHaveLength(jobsBefore);
        await app.gd.speedrunWorkflow(wf);
        expect(signalJournal).toEqual(['prepared', 'captured(12500)', 'receipt']);
        expect((await signalRow(signal.id)).state).toBe('consumed');
        expect((await signalRow(second.id)).state).toBe('pending');
      });

      it('AT-09 SignalMatcher with a payload predicate on wf.hero: someone else\'s email leaves it parked, the hero\'s wakes it', async () => {
        const wf = await workflows.start(EmailMatcherWorkflow, hero);
        await app.gd.performNextStep(wf);
        await app.gd.assertWaitingForSignal(wf, 'paid');
        const wrong = await signals.signal(wf, 'paid', { payload: { email: 'mallory@example.com' } });
        expect(wrong.state).toBe('pending');
        await app.gd.assertWaitingForSignal(wf, 'paid');
        const right = await signals.signal(wf, 'paid', { payload: { email: 'ada@example.com' } });
        expect(right.state).toBe('claimed');
        await app.gd.speedrunWorkflow(wf);
        expect(seenSignals).toEqual([{ step: 'awaitPaid', signalId: right.id, payload: { email: 'ada@example.com' } }]);
        expect((await signalRow(wrong.id)).state).toBe('pending');
      });

      it('AT-10 a custom { matches } object owns the decision: (b, 100) does not wake, (a, 5000) does', async () => {
        const wf = await workflows.start(CustomMatcherWorkflow, hero);
        await app.gd.performNextStep(wf);
        await app.gd.assertWaitingForSignal(wf, 'payment settled >= 1000');
        const small = await signals.signal(wf, 'b', { payload: { amountCents: 100 } });
        const otherName = await signals.signal(wf, 'c', { payload: { amountCents: 9000 } });
        expect([small.state, otherName.state]).toEqual(['pending', 'pending']);
        const big = await signals.signal(wf, 'a', { payload: { amountCents: 5000 } });
        expect(big.state).toBe('claimed');
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(seenSignals.map((s) => s.signalId)).toEqual([big.id]);
      });

      it('a custom matcher also picks from buffered signals at the gate, oldest accepted first', async () => {
        const wf = await workflows.start(CustomMatcherWorkflow, hero);
        await signals.signal(wf, 'a', { payload: { amountCents: 10 } });
        const accepted = await signals.signal(wf, 'b', { payload: { amountCents: 1000 } });
        await signals.signal(wf, 'a', { payload: { amountCents: 2000 } });
        await app.gd.speedrunWorkflow(wf);
        expect(seenSignals.map((s) => s.signalId)).toEqual([accepted.id]);
      });

      it('AT-28 / SIG-44 wait + waitFor: a signal during the delay is buffered, the delay is kept, the job then attaches it', async () => {
        const wf = await workflows.start(DelayedInvoiceWorkflow, hero);
        await app.gd.performNextStep(wf);
        const delayed = await current(wf);
        expect(delayed.state).toBe('scheduled');
        expect(delayed.scheduledFor.getTime()).toBeGreaterThan(Date.now() + 2 * DAY - 60_000);
        const jobsBefore = jobIds().length;
        const signal = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 50 } });
        expect(signal.state).toBe('pending');
        const still = await executionRow(delayed.id);
        expect(still).toMatchObject({ state: 'scheduled', signalId: null });
        expect(still.scheduledFor.getTime()).toBe(delayed.scheduledFor.getTime());
        expect(jobIds()).toHaveLength(jobsBefore);
        expect(signalJournal).toEqual(['prepared']);
        // The job runs when due (the helper ignores scheduledFor): the gate attaches without parking.
        expect(await app.gd.performNextStep(wf)).toMatchObject({ id: delayed.id, state: 'completed', signalId: signal.id, waitingSince: null });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
      });

      it('AT-18 a signal sent while the gate holds the lock waits for the park to commit, then wakes it', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await app.gd.performNextStep(wf);
        const execution = await current(wf);
        const entered = deferred();
        const release = deferred<boolean>();
        // skipIf runs inside the prepare transaction, after the workflow lock and before the gate.
        signalControls.skipAwait = () => {
          entered.resolve();
          return release.promise;
        };
        const gate = app.gd.performNextStep(wf);
        await entered.promise;
        const sender = signals.signal(wf.id, 'payment_confirmed', { payload: { amountCents: 77 } });
        expect(await stillPending(sender)).toBe(true); // blocked on the workflow lock
        const jobsBefore = jobIds().length;
        release.resolve(false);
        await gate;
        const signal = await sender;
        expect(signal).toMatchObject({ state: 'claimed', claimed: 1 });
        expect(await executionRow(execution.id)).toMatchObject({ state: 'scheduled', signalId: signal.id, waitingSince: expect.any(Date) });
        expect(jobIds().slice(jobsBefore)).toEqual([execution.id]);
        expect((await signalRows(wf.id)).filter((s) => s.state === 'pending')).toHaveLength(0);
      });

      // Not on SQLite: a caller's transaction there shares the one connection with the engine's.
      (kind === 'sqlite' ? it.skip : it)('AT-19 a gate that starts while a sender holds the lock waits, then attaches the committed signal without parking', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await app.gd.performNextStep(wf);
        const execution = await current(wf);
        const inserted = deferred<Signal>();
        const commit = deferred();
        const sender = app.dataSource.transaction(async (manager) => {
          inserted.resolve(await signals.signal(wf.id, 'payment_confirmed', { payload: { amountCents: 19 }, manager }));
          await commit.promise;
        });
        const signal = await inserted.promise;
        const gate = app.gd.performNextStep(wf);
        expect(await stillPending(gate)).toBe(true); // the gate waits for the sender's lock
        commit.resolve();
        await sender;
        const ran = await gate;
        expect(ran).toMatchObject({ id: execution.id, state: 'completed', signalId: signal.id, waitingSince: null });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
      });
    });

    // ------------------------------------------------------------------ B.9 settlement

    describe('settlement (SIG-50..57)', () => {
      const assertCounters = async (id: string, state: string, claimed: number, consumed: number) =>
        expect(await signalRow(id)).toMatchObject({ state, claimed, consumed });

      it('AT-30 skipIf true at wake skips and consumes the waking signal; a second waiter for the name parks', async () => {
        const wf = await workflows.start(TwoWaitersWorkflow, hero);
        await app.gd.performNextStep(wf);
        await app.gd.assertWaitingForSignal(wf, 'ping');
        signalControls.skipFirst = true; // becomes true while parked: not re-checked until the wake
        const ping = await signals.signal(wf, 'ping');
        expect(ping.state).toBe('claimed');
        expect(await app.gd.performNextStep(wf)).toMatchObject({ stepName: 'first', state: 'skipped', signalId: ping.id });
        await assertCounters(ping.id, 'consumed', 1, 1);
        expect(await app.gd.performNextStep(wf)).toMatchObject({ stepName: 'second', state: 'waiting', signalId: null });
        expect(seenSignals).toEqual([]);
      });

      it('AT-31 cancelIf true at wake cancels step and workflow; the signal stays claimed', async () => {
        const { wf, signal, execution } = await woken();
        await app.dataSource.getRepository(TestHero).update({ id: hero.id }, { canceled: true });
        expect(await app.gd.performNextStep(wf)).toMatchObject({ id: execution.id, state: 'canceled' });
        expect(wf.state).toBe('canceled');
        await assertCounters(signal.id, 'claimed', 1, 0);
      });

      it('AT-32 skip() in a pinned step consumes the signal and schedules the next step', async () => {
        const { wf, signal } = await woken();
        signalControls.awaitBody = (instance) => instance.skip();
        expect(await app.gd.performNextStep(wf)).toMatchObject({ state: 'skipped', outcome: 'skipped' });
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect((await current(wf)).stepName).toBe('issueReceipt');
      });

      it('AT-33 a skip exception policy consumes the signal and re-raises the error to the job', async () => {
        const { wf, signal } = await woken(SkipOnErrorInvoiceWorkflow);
        signalControls.awaitBody = () => {
          throw new PaymentError('card declined');
        };
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('card declined');
        expect((await history(wf)).find((e) => e.stepName === 'awaitPayment')).toMatchObject({ state: 'skipped', signalId: signal.id });
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect((await current(wf)).stepName).toBe('issueReceipt');
      });

      it('SIG-53 an exception handler that decides finished() consumes the signal and finishes the workflow', async () => {
        const { wf, signal } = await woken(FinishOnErrorInvoiceWorkflow);
        signalControls.awaitBody = () => {
          throw new PaymentError('done anyway');
        };
        await app.gd.performNextStep(wf).catch(() => undefined);
        expect((await app.gd.reload(wf)).state).toBe('finished');
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect(signalJournal).not.toContain('receipt');
      });

      it('AT-37 finished() in a pinned step finishes the workflow and consumes the signal; the next step never runs', async () => {
        const { wf, signal } = await woken();
        signalControls.awaitBody = (instance) => instance.finished();
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect(signalJournal).toEqual(['prepared', 'captured(12500)']);
      });

      it('AT-34 operator skip of a woken, not yet run execution skips it, consumes its signal and schedules the next step', async () => {
        const { wf, signal, execution } = await woken();
        await workflows.skip(wf);
        expect(await executionRow(execution.id)).toMatchObject({ state: 'skipped', signalId: signal.id });
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect(await current(wf)).toMatchObject({ stepName: 'issueReceipt', state: 'scheduled' });
        expect(signalJournal).toEqual(['prepared']);
      });

      it('AT-35 operator skip of a paused workflow whose pinned step failed settles the failed row\'s claim', async () => {
        const { wf, signal, execution } = await woken();
        signalControls.awaitBody = () => {
          throw new PaymentError('boom');
        };
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('boom');
        expect(wf.state).toBe('paused');
        await assertCounters(signal.id, 'claimed', 1, 0);
        await workflows.skip(wf);
        expect(wf.state).toBe('ready');
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect((await signalRow(signal.id)).consumedAt).toBeInstanceOf(Date);
        expect(await executionRow(execution.id)).toMatchObject({ state: 'failed' });
        expect(await current(wf)).toMatchObject({ stepName: 'issueReceipt', state: 'scheduled' });
      });

      it('SIG-53 operator skip of a paused workflow whose woken execution never ran settles that execution\'s signal', async () => {
        const { wf, signal, execution } = await woken();
        await workflows.pause(wf);
        await workflows.skip(wf);
        expect(wf.state).toBe('ready');
        expect(await executionRow(execution.id)).toMatchObject({ state: 'canceled', signalId: signal.id });
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect(await current(wf)).toMatchObject({ stepName: 'issueReceipt', state: 'scheduled' });
      });

      it('operator skip of a paused workflow whose woken execution was canceled by its job during the pause settles that execution\'s signal', async () => {
        const { wf, signal, execution } = await woken();
        await workflows.pause(wf);
        // The wake-up job runs while the workflow is paused: the execution is canceled, pin kept.
        await app.moduleRef.get(ExecutorService).execute(execution.id);
        expect(await executionRow(execution.id)).toMatchObject({ state: 'canceled', signalId: signal.id });
        await assertCounters(signal.id, 'claimed', 1, 0);
        await workflows.skip(wf);
        expect(wf.state).toBe('ready');
        await assertCounters(signal.id, 'consumed', 1, 1);
        expect(await current(wf)).toMatchObject({ stepName: 'issueReceipt', state: 'scheduled' });
      });

      it('SIG-46 a hero deleted while the step was parked is noticed at the wake: the workflow is canceled, the signal stays claimed', async () => {
        const wf = await parked();
        await app.dataSource.getRepository(TestHero).delete({ id: hero.id });
        const signal = await signals.signal(wf, 'payment_confirmed');
        expect(signal.state).toBe('claimed');
        expect(await app.gd.performNextStep(wf)).toMatchObject({ state: 'canceled', signalId: signal.id });
        expect(wf.state).toBe('canceled');
        await assertCounters(signal.id, 'claimed', 1, 0);
        expect(signalJournal).toEqual(['prepared']);
      });

      it('AT-36 operator skip of a never-attached parked step leaves an unrelated buffered signal alone', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        const unrelated = await signals.signal(wf, 'something_else', { allowUnknownName: true });
        await workflows.skip(wf);
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'skipped', signalId: null });
        await assertCounters(unrelated.id, 'pending', 0, 0);
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(signalJournal).toEqual(['prepared', 'receipt']);
      });

      it('AT-38 / AT-52 / SIG-23 failure then resume re-reads the same payload; counters end 2/1 and claimedAt keeps its first value', async () => {
        const { wf, signal } = await woken();
        let calls = 0;
        signalControls.awaitBody = () => {
          if (++calls === 1) throw new PaymentError('transient');
        };
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('transient');
        expect(wf.state).toBe('paused');
        await assertCounters(signal.id, 'claimed', 1, 0);
        const firstClaim = (await signalRow(signal.id)).claimedAt!.getTime();
        await workflows.resume(wf);
        const retry = await current(wf);
        expect(retry.signalId).toBeNull(); // a fresh execution: its gate re-attaches
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(seenSignals.filter((s) => s.step === 'awaitPayment')).toEqual([
          { step: 'awaitPayment', signalId: signal.id, payload: { amountCents: 12_500 } },
          { step: 'awaitPayment', signalId: signal.id, payload: { amountCents: 12_500 } },
        ]);
        const final = await signalRow(signal.id);
        expect(final).toMatchObject({ state: 'consumed', claimed: 2, consumed: 1 });
        expect(final.claimedAt!.getTime()).toBe(firstClaim);
      });

      it('AT-39 / AT-52 reattempt() re-attaches the same signal in a fresh execution; one consumption at the end', async () => {
        const { wf, signal } = await woken();
        let calls = 0;
        signalControls.awaitBody = (instance) => {
          if (++calls === 1) instance.reattempt();
        };
        const first = await app.gd.performNextStep(wf);
        expect(first).toMatchObject({ state: 'completed', outcome: 'reattempted' });
        await assertCounters(signal.id, 'claimed', 1, 0);
        const retry = await app.gd.performNextStep(wf);
        expect(retry).toMatchObject({ state: 'completed', outcome: 'success', signalId: signal.id });
        expect(retry!.id).not.toBe(first!.id);
        expect(seenSignals.map((s) => s.signalId)).toEqual([signal.id, signal.id]);
        await assertCounters(signal.id, 'consumed', 2, 1);
      });

      it('AT-40 a reattempt policy reads the same signal on the second attempt; a newer match stays pending', async () => {
        const { wf, signal } = await woken(ReattemptOnErrorInvoiceWorkflow);
        let calls = 0;
        signalControls.awaitBody = () => {
          if (++calls === 1) throw new PaymentError('flaky');
        };
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('flaky');
        const newer = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 } });
        expect(newer.state).toBe('pending'); // the retry is scheduled, not waiting
        await app.gd.speedrunWorkflow(wf);
        expect(seenSignals.filter((s) => s.step === 'awaitPayment').map((s) => s.signalId)).toEqual([signal.id, signal.id]);
        await assertCounters(signal.id, 'consumed', 2, 1);
        await assertCounters(newer.id, 'pending', 0, 0);
      });

      it('SIG-55 pause() and cancel() in a pinned step leave the signal claimed', async () => {
        const paused = await woken();
        signalControls.awaitBody = (instance) => instance.pause();
        await app.gd.performNextStep(paused.wf);
        expect(paused.wf.state).toBe('paused');
        await assertCounters(paused.signal.id, 'claimed', 1, 0);
        // resume: the fresh execution re-attaches and consumes.
        signalControls.awaitBody = undefined;
        await workflows.resume(paused.wf);
        await app.gd.speedrunWorkflow(paused.wf);
        await assertCounters(paused.signal.id, 'consumed', 2, 1);

        const canceled = await woken(InvoiceWorkflow);
        signalControls.awaitBody = (instance) => instance.cancel();
        await app.gd.performNextStep(canceled.wf);
        expect(canceled.wf.state).toBe('canceled');
        await assertCounters(canceled.signal.id, 'claimed', 1, 0);
      });

      it('SIG-57 (recommendation) a retry skipped by skipIf before its gate settles the claim its failed predecessor held', async () => {
        const { wf, signal } = await woken();
        signalControls.awaitBody = () => {
          throw new PaymentError('boom');
        };
        await expect(app.gd.performNextStep(wf)).rejects.toThrow('boom');
        await assertCounters(signal.id, 'claimed', 1, 0);
        signalControls.skipAwait = true;
        await workflows.resume(wf);
        expect(await app.gd.performNextStep(wf)).toMatchObject({ stepName: 'awaitPayment', state: 'skipped', signalId: null });
        await assertCounters(signal.id, 'consumed', 1, 1);
      });

      it('AT-50 / SIG-51 two sequential waiters need two signals; each records its own', async () => {
        const wf = await workflows.start(TwoWaitersWorkflow, hero);
        const ping1 = await signals.signal(wf, 'ping', { payload: { n: 1 } });
        await app.gd.performNextStep(wf); // first consumes ping1
        await assertCounters(ping1.id, 'consumed', 1, 1);
        expect(await app.gd.performNextStep(wf)).toMatchObject({ stepName: 'second', state: 'waiting' });
        const ping2 = await signals.signal(wf, 'ping', { payload: { n: 2 } });
        expect(ping2.state).toBe('claimed');
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(seenSignals.map((s) => [s.step, s.signalId])).toEqual([
          ['first', ping1.id],
          ['second', ping2.id],
        ]);
        await assertCounters(ping2.id, 'consumed', 1, 1);
      });
    });

    // ------------------------------------------------------------------ B.10 the waiting state

    describe('the waiting state (SIG-58..62)', () => {
      it('SIG-58 a waiting execution only moves to scheduled, canceled or skipped', () => {
        const states: StepExecutionState[] = ['scheduled', 'waiting', 'in_progress', 'completed', 'failed', 'canceled', 'skipped'];
        const allowed = states.filter((to) => {
          try {
            assertExecutionTransition('waiting', to);
            return true;
          } catch {
            return false;
          }
        });
        expect(allowed).toEqual(['scheduled', 'canceled', 'skipped']);
        expect(() => assertExecutionTransition('scheduled', 'waiting')).not.toThrow();
      });

      it('AT-42 pause and resume without a signal keep the parked row: ready again, still waiting, nothing enqueued', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        await workflows.pause(wf);
        expect(wf.state).toBe('paused');
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting' });
        const jobsBefore = jobIds().length;
        await workflows.resume(wf);
        expect(wf.state).toBe('ready');
        const after = await executionRow(waiting.id);
        expect(after).toMatchObject({ state: 'waiting', signalId: null });
        expect(after.waitingSince!.getTime()).toBe(waiting.waitingSince!.getTime());
        expect(jobIds()).toHaveLength(jobsBefore);
        await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
      });

      it('SIG-60 resume delivers the oldest matching buffered signal (not a non-matching one) to the parked row', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        await workflows.pause(wf);
        const other = await signals.signal(wf, 'other', { allowUnknownName: true });
        const s1 = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 } });
        const s2 = await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 2 } });
        const jobsBefore = jobIds().length;
        await workflows.resume(wf);
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'scheduled', signalId: s1.id, waitingSince: waiting.waitingSince });
        expect(jobIds().slice(jobsBefore)).toEqual([waiting.id]);
        await app.gd.speedrunWorkflow(wf);
        expect(signalJournal).toEqual(['prepared', 'captured(1)', 'receipt']);
        expect((await signalRows(wf.id)).map((s) => [s.id, s.state])).toEqual([
          [other.id, 'pending'],
          [s1.id, 'consumed'],
          [s2.id, 'pending'],
        ]);
      });

      it('AT-66 a redelivered key on a paused workflow is a duplicate and is delivered once on resume', async () => {
        const wf = await parked();
        await workflows.pause(wf);
        const first = await signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt_1' });
        const again = await signals.signal(wf, 'payment_confirmed', { idempotencyKey: 'evt_1' });
        expect(again).toMatchObject({ id: first.id, duplicateDelivery: true, state: 'pending' });
        const jobsBefore = jobIds().length;
        await workflows.resume(wf);
        expect(jobIds().slice(jobsBefore)).toHaveLength(1);
        expect(await signalRow(first.id)).toMatchObject({ state: 'claimed', claimed: 1 });
        expect(await signalRows(wf.id)).toHaveLength(1);
      });

      it('AT-43 / AT-52 / SIG-62 woken then paused: the job cancels the execution, the claim stays; after resume a fresh execution re-attaches it', async () => {
        const { wf, signal, execution } = await woken();
        await workflows.pause(wf);
        await app.moduleRef.get(ExecutorService).execute(execution.id); // the job of the woken execution
        expect(await executionRow(execution.id)).toMatchObject({ state: 'canceled', signalId: signal.id });
        expect(signalJournal).toEqual(['prepared']);
        await workflows.resume(wf);
        const fresh = await current(wf);
        expect(fresh).toMatchObject({ stepName: 'awaitPayment', state: 'scheduled', signalId: null });
        expect(fresh.id).not.toBe(execution.id);
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(seenSignals.find((s) => s.step === 'awaitPayment')).toEqual({ step: 'awaitPayment', signalId: signal.id, payload: { amountCents: 12_500 } });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 2, consumed: 1 });
      });

      it('woken then paused and resumed before the job ran: the same pinned execution is enqueued again', async () => {
        const { wf, signal, execution } = await woken();
        await workflows.pause(wf);
        const jobsBefore = jobIds().length;
        await workflows.resume(wf);
        expect(jobIds().slice(jobsBefore)).toEqual([execution.id]);
        expect(await app.gd.performNextStep(wf)).toMatchObject({ id: execution.id, state: 'completed', signalId: signal.id });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
      });

      it('AT-44 / SIG-61 cancel of a parked workflow cancels the parked row and leaves signals untouched', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        const unrelated = await signals.signal(wf, 'unrelated', { allowUnknownName: true });
        await workflows.cancel(wf);
        expect(wf.state).toBe('canceled');
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'canceled', outcome: 'canceled' });
        expect(await signalRow(unrelated.id)).toMatchObject({ state: 'pending', claimed: 0, consumed: 0 });
      });

      it('AT-45 / SIG-59 creating another execution cancels the parked row: exactly one active row remains', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        await app.gd.performStepInline(wf, 'prepare');
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'canceled' });
        const active = (await history(wf)).filter((e) => ['scheduled', 'waiting', 'in_progress'].includes(e.state));
        expect(active.map((e) => [e.stepName, e.state])).toEqual([['awaitPayment', 'scheduled']]);
      });
    });

    // ------------------------------------------------------------------ B.11 housekeeping

    describe('housekeeping (SIG-64..67)', () => {
      const housekeeping = () => app.moduleRef.get(HousekeepingService).run();

      it('AT-57 / SIG-64 a row parked 30 days ago is not stuck', async () => {
        const wf = await parked();
        const waiting = await current(wf);
        const monthAgo = new Date(Date.now() - 30 * DAY);
        await setExecution(waiting.id, { waitingSince: monthAgo, scheduledFor: monthAgo });
        const summary = await housekeeping();
        expect(summary).toMatchObject({ stuckInProgressRecovered: 0, stuckScheduledRecovered: 0 });
        expect(await executionRow(waiting.id)).toMatchObject({ state: 'waiting' });
      });

      it('AT-58 / SIG-65 gauges count waiting rows per workflow class and the overdue ones (threshold 7 days)', async () => {
        const invoice = await parked();
        const first = await workflows.start(FirstStepWaitsWorkflow, hero);
        await app.gd.performNextStep(first);
        await setExecution((await current(first)).id, { waitingSince: new Date(Date.now() - 30 * DAY) });
        const gauges = (await housekeeping()).gauges!;
        expect(gauges['geneva_drive.waiting_step_executions']).toEqual({ total: 2, byWorkflow: { InvoiceWorkflow: 1, FirstStepWaitsWorkflow: 1 } });
        expect(gauges['geneva_drive.waiting_overdue']!.total).toBe(1);
        expect(gauges['geneva_drive.waiting_overdue']!.byWorkflow.FirstStepWaitsWorkflow).toBe(1);
        expect(gauges['geneva_drive.waiting_overdue']!.byWorkflow.InvoiceWorkflow ?? 0).toBe(0);
        expect(invoice.state).toBe('ready');
      });

      it('AT-55 / SIG-34 a woken execution whose enqueue was lost is re-enqueued by the stuck-scheduled sweep and consumes its signal', async () => {
        const { wf, signal, execution } = await woken();
        (app.gd.enqueuedJobs as unknown[]).length = 0; // the enqueue never happened
        await setExecution(execution.id, { scheduledFor: new Date(Date.now() - 60 * 60_000) });
        const summary = await housekeeping();
        expect(summary.stuckScheduledRecovered).toBe(1);
        expect(jobIds()).toEqual([execution.id]);
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', consumed: 1 });
      });

      it('AT-56 / SIG-67 a worker that died mid-step: recovery keeps the claim and the next run re-attaches the same signal', async () => {
        const { wf, signal, execution } = await woken();
        const entered = deferred();
        const hang = deferred();
        signalControls.awaitBody = async () => {
          entered.resolve();
          await hang.promise;
        };
        const crashed = app.gd.performNextStep(wf);
        await entered.promise;
        await setExecution(execution.id, { startedAt: new Date(Date.now() - 2 * 60 * 60_000) });
        const summary = await housekeeping();
        expect(summary.stuckInProgressRecovered).toBe(1);
        expect(await executionRow(execution.id)).toMatchObject({ state: 'completed', outcome: 'recovered' });
        expect(await signalRow(signal.id)).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });
        // The "dead" worker wakes up late: its outcome is discarded.
        hang.resolve();
        await crashed;
        signalControls.awaitBody = undefined;
        await app.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        expect(seenSignals.filter((s) => s.step === 'awaitPayment').map((s) => s.signalId)).toEqual([signal.id, signal.id]);
        // (The port's recovery copies the pin into the new execution, so `claimed` stays 1 rather than
        // the reference's re-attachment count of 2; consumption is the same.)
        expect(await signalRow(signal.id)).toMatchObject({ state: 'consumed', consumed: 1 });
      });

      it('AT-59 / SIG-66 old finished workflows lose their signals with them; recent ones keep theirs', async () => {
        const old = await workflows.start(InvoiceWorkflow, hero);
        await signals.signal(old, 'a', { allowUnknownName: true });
        await signals.signal(old, 'b', { allowUnknownName: true });
        await workflows.cancel(old);
        const longAgo = new Date(Date.now() - 60 * DAY);
        await app.dataSource.getRepository(WorkflowRecord).update({ id: old.id }, { finishedAt: longAgo, transitionedAt: longAgo });
        const recent = await workflows.start(InvoiceWorkflow, await newHero('recent'));
        await signals.signal(recent, 'c', { allowUnknownName: true });
        await workflows.cancel(recent);
        const summary = await housekeeping();
        expect(summary).toMatchObject({ workflowsDeleted: 1, signalsDeleted: 2 });
        expect(await signalRows(old.id)).toHaveLength(0);
        expect((await signalRows(recent.id)).map((s) => s.name)).toEqual(['c']);
      });
    });

    // ------------------------------------------------------------------ B.14 test helpers

    describe('test helpers (SIG-74..77)', () => {
      it('AT-64 / SIG-77 driving helpers refuse a parked execution, naming the awaited signal', async () => {
        const wf = await parked();
        for (const drive of [
          () => app.gd.performNextStep(wf),
          () => app.gd.speedrunWorkflow(wf),
          () => app.gd.speedrunCurrentStep(wf),
          () => app.gd.runIterations(wf, 1),
        ]) {
          const attempt = drive();
          await expect(attempt).rejects.toThrow(/parked/);
          await expect(attempt).rejects.toThrow(/payment_confirmed/);
        }
        await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
      });

      it('AT-64 speedrunWorkflow runs up to the park and then raises instead of spinning', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await expect(app.gd.speedrunWorkflow(wf)).rejects.toThrow(/parked.*payment_confirmed/s);
        expect(signalJournal).toEqual(['prepared']);
        await app.gd.assertWaitingForSignal(wf);
      });

      it('assertWaitingForSignal fails readably for another name, a custom matcher and a step that is not parked', async () => {
        const wf = await parked();
        await expect(app.gd.assertWaitingForSignal(wf, 'document_signed')).rejects.toThrow(AssertionError);
        await expect(app.gd.assertWaitingForSignal(wf, 'document_signed')).rejects.toThrow(/wait for "document_signed".*waits for "payment_confirmed"/);
        await signals.signal(wf, 'payment_confirmed');
        await expect(app.gd.assertWaitingForSignal(wf)).rejects.toThrow(/parked.*awaitPayment \(scheduled\)/);
        const custom = await workflows.start(CustomMatcherWorkflow, hero);
        await app.gd.performNextStep(custom);
        await expect(app.gd.assertWaitingForSignal(custom, 'a')).rejects.toThrow(AssertionError);
      });

      it('assertStepExecuted and assertTimedOut say a step name the class does not define is not a step of it', async () => {
        const wf = await parked();
        const typo = 'InvoiceWorkflow has no step "issueReciept": its steps are "prepare", "awaitPayment", "issueReceipt"';
        for (const attempt of [app.gd.assertStepExecuted(wf, 'issueReciept'), app.gd.assertTimedOut(wf, 'issueReciept')]) {
          await expect(attempt).rejects.toThrow(AssertionError);
          await expect(attempt).rejects.toThrow(typo);
        }
        // A step of the class that has not run yet still reads as such.
        await expect(app.gd.assertStepExecuted(wf, 'issueReceipt')).rejects.toThrow('Expected step "issueReceipt" to have a completed execution; found no executions');
      });

      it('AT-65 / SIG-75 assertSignalState reads the most recent signal of the name, with readable failures', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await expect(app.gd.assertSignalState(wf, 'payment_confirmed', 'pending')).rejects.toThrow(/there is none/);
        await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 1 } });
        await app.gd.speedrunWorkflow(wf);
        await app.gd.assertSignalState(wf, 'payment_confirmed', 'consumed');
        const failure = app.gd.assertSignalState(wf, 'payment_confirmed', 'pending');
        await expect(failure).rejects.toThrow(AssertionError);
        await expect(failure).rejects.toThrow('Expected signal "payment_confirmed" to be pending, but it is consumed');
      });

      it('the manual flow of the seed: park, assert, signal, speedrun, assert consumed', async () => {
        const wf = await workflows.start(InvoiceWorkflow, hero);
        await app.gd.performNextStep(wf);
        await app.gd.performNextStep(wf);
        await app.gd.assertWaitingForSignal(wf, 'payment_confirmed');
        await signals.signal(wf, 'payment_confirmed', { payload: { amountCents: 12_500 } });
        await app.gd.speedrunWorkflow(wf);
        await app.gd.assertSignalState(wf, 'payment_confirmed', 'consumed');
        await app.gd.assertWorkflowState(wf, 'finished');
      });
    });
  });

  // ------------------------------------------------------------------ B.12 missing migration

  describe('without the signals migration (SIG-69)', () => {
    let legacy: TestApp;
    let legacyWorkflows: WorkflowService;
    let legacySignals: SignalService;

    beforeAll(async () => {
      // A database that never ran AddGenevaDriveSignals1730000000001 (the next spec re-migrates its own).
      legacy = await createTestApp(kind, [...ALL_INVOICES, PlainTwoStepWorkflow], { withoutSignals: true });
      legacyWorkflows = legacy.moduleRef.get(WorkflowService);
      legacySignals = legacy.moduleRef.get(SignalService);
    });
    afterAll(() => legacy.close());
    beforeEach(async () => {
      await legacy.reset();
      resetSignalFixtures();
      const heroes = legacy.dataSource.getRepository(TestHero);
      hero = await heroes.save(heroes.create({ name: 'legacy' }));
    });

    it('plain workflows run, pause and resume as before; receivedSignal is null', async () => {
      const wf = await legacyWorkflows.start(PlainTwoStepWorkflow, hero);
      await legacy.gd.performNextStep(wf);
      await legacyWorkflows.pause(wf);
      await legacyWorkflows.resume(wf);
      await legacy.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(signalJournal).toEqual(['one:no-signal', 'two']);
      expect((await legacyWorkflows.executionHistory(wf)).map((e) => e.state)).toEqual(['completed', 'completed']);
    });

    it('AT-60 a waitFor step fails loudly before skipIf and whatever its policy: failed, named migration, workflow paused', async () => {
      for (const workflowClass of [InvoiceWorkflow, SkipOnErrorInvoiceWorkflow]) {
        resetSignalFixtures();
        signalControls.skipAwait = true; // not even evaluated
        const wf = await legacyWorkflows.start(workflowClass, hero, { allowMultiple: true });
        await legacy.gd.performNextStep(wf);
        const attempt = legacy.gd.performNextStep(wf);
        await expect(attempt).rejects.toBeInstanceOf(SignalsNotMigratedError);
        await expect(attempt).rejects.toThrow(/AddGenevaDriveSignals1730000000001/);
        const failed = (await legacyWorkflows.executionHistory(wf)).find((e) => e.stepName === 'awaitPayment')!;
        expect(failed).toMatchObject({ state: 'failed', outcome: 'failed' });
        expect(failed.errorMessage).toMatch(/waitFor/);
        expect(failed.errorMessage).toMatch(/AddGenevaDriveSignals1730000000001/);
        expect((await legacy.gd.reload(wf)).state).toBe('paused');
        expect(signalJournal).toEqual(['prepared']);
      }
    });

    it('signal() and signal-with-start throw SignalsNotMigratedError before writing anything; list() is empty', async () => {
      const heroes = legacy.dataSource.getRepository(TestHero);
      const wf = await legacyWorkflows.start(PlainTwoStepWorkflow, hero);
      const attempt = legacySignals.signal(wf, 'x', { payload: { a: 1 } });
      await expect(attempt).rejects.toBeInstanceOf(SignalsNotMigratedError);
      await expect(attempt).rejects.toThrow(/AddGenevaDriveSignals1730000000001/);
      const other = await heroes.save(heroes.create({ name: 'b' }));
      await expect(legacyWorkflows.start(PlainTwoStepWorkflow, other, { signals: [{ name: 'x' }] })).rejects.toBeInstanceOf(SignalsNotMigratedError);
      expect(await legacyWorkflows.findByState('ongoing')).toHaveLength(1);
      expect(await legacySignals.list(wf)).toEqual([]);
      // A start without signals still works.
      expect((await legacyWorkflows.start(PlainTwoStepWorkflow, other)).state).toBe('ready');
    });

    it('housekeeping runs without raising: no gauges, nothing to delete', async () => {
      const wf = await legacyWorkflows.start(PlainTwoStepWorkflow, hero);
      await legacyWorkflows.cancel(wf);
      await legacy.dataSource.getRepository(WorkflowRecord).update({ id: wf.id }, { finishedAt: new Date(Date.now() - 60 * DAY) });
      const summary = await legacy.moduleRef.get(HousekeepingService).run();
      expect(summary).toMatchObject({ workflowsDeleted: 1, signalsDeleted: 0, gauges: null });
    });
  });
});

// -------------------------------------------------------------------- B.13 definition time

describe('signals: definition-time checks (AT-61, SIG-70..73)', () => {
  const define = (options: Record<string, unknown>) => {
    @Workflow()
    class Misdeclared extends GenevaWorkflow {
      @Step(options as never)
      async capture() {}
    }
    return () => buildWorkflowDefinition(Misdeclared);
  };

  it('AT-61 / SIG-70 waitFor given a duration points at wait, echoing the value', () => {
    for (const value of ['2d', 30, 7200, new Date()]) {
      const build = define({ waitFor: value });
      expect(build).toThrow(StepConfigurationError);
      expect(build).toThrow(/Misdeclared\.capture: waitFor .*duration.*use wait/);
    }
    expect(define({ waitFor: '2d' })).toThrow(/"2d"/);
  });

  it('AT-61 / SIG-71 wait given something signal-shaped points at waitFor (any non-duration string, numeric strings, matchers)', () => {
    for (const value of ['payment_confirmed', '7200', 'later', new SignalMatcher('payment_confirmed'), { matches: () => true }]) {
      const build = define({ wait: value });
      expect(build).toThrow(StepConfigurationError);
      expect(build).toThrow(/Misdeclared\.capture: .*waitFor/);
    }
  });

  it('AT-61 / SIG-72 waitFor given anything else lists the accepted kinds', () => {
    for (const value of [{}, '', true, null]) {
      expect(define({ waitFor: value })).toThrow(/waitFor must be a signal name, a SignalMatcher or an object with matches/);
    }
  });

  it('AT-61 / SIG-73 valid declarations: wait + waitFor, a matcher, a matches() object, durations for wait', () => {
    const definition = define({ wait: '2d', waitFor: 'payment_confirmed' })();
    const step = definition.step('capture')!;
    expect(step.waitMs).toBe(2 * DAY);
    expect(step.waitFor?.signalName).toBe('payment_confirmed');
    const matcher = new SignalMatcher('document_signed', () => true);
    expect(define({ waitFor: matcher })().step('capture')!.waitFor).toBe(matcher);
    const custom = { matches: () => true };
    expect(define({ waitFor: custom })().step('capture')!.waitFor).toBe(custom);
    expect(define({ wait: 5000 })().step('capture')!.waitFor).toBeUndefined();
  });

  it('AT-61 / SIG-37 SignalMatcher needs a name', () => {
    expect(() => new SignalMatcher('')).toThrow(TypeError);
    expect(() => new SignalMatcher(null as never)).toThrow(TypeError);
    expect(new SignalMatcher('x').describe()).toBe('x');
  });
});
