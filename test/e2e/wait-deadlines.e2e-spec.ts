/**
 * Wait deadlines (`@Step({ waitFor, timeout, onTimeout })`) and delivery by hero, on every database:
 * each `onTimeout`, the race settled under the workflow lock in both orders, `wait` + `waitFor` +
 * `timeout`, resumable steps, paused workflows, the events, the test helpers, housekeeping's gauges
 * and its recovery of a lost deadline, the local queue firing deadlines (and rebuilding them at boot),
 * the missing-migration mode and the boot-time checks. The Bull queue and the multi-process race are
 * in wait-deadlines-bull.e2e-spec.ts and test/proofs/deadline-race.e2e-spec.ts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { AssertionError } from 'node:assert';
import {
  DeadlinesNotMigratedError,
  HeroTypeNotFoundError,
  GENEVA_DRIVE_CHANNELS,
  GenevaWorkflow,
  HousekeepingService,
  InvalidHeroError,
  InvalidSignalError,
  NoOngoingWorkflowError,
  Signal,
  SignalService,
  Step,
  StepConfigurationError,
  StepExecution,
  Workflow,
  WorkflowService,
  WorkflowRecord,
} from 'geneva-drive';
import { buildWorkflowDefinition } from '../../libs/geneva-drive/src/registry/build-definition.js';
import { WaitDeadline } from '../../libs/geneva-drive/src/execution/wait-deadline.js';
import {
  CancelOnTimeoutWorkflow,
  DEADLINE_WORKFLOWS,
  deadlineJournal,
  deadlinePlan,
  DelayedDeadlineWorkflow,
  FlakyOnTimeoutWorkflow,
  HeroAddressedWorkflow,
  LaterWaiterWorkflow,
  NoDeadlineWorkflow,
  PauseOnTimeoutWorkflow,
  resetDeadlineFixtures,
  ResumableDeadlineWorkflow,
  RunOnTimeoutWorkflow,
  ShortDeadlineWorkflow,
  SkipOnTimeoutWorkflow,
} from '../src/deadline-workflows.js';
import { waitUntil } from '../src/bull-wait.js';
import { createTestApp, warningsLogger, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Collects what is published on a channel while `run` runs. */
async function captured<T>(channel: string, run: () => Promise<unknown>): Promise<T[]> {
  const events: T[] = [];
  const listener = (event: unknown) => events.push(event as T);
  subscribe(channel, listener);
  try {
    await run();
  } finally {
    unsubscribe(channel, listener);
  }
  return events;
}

describeEachDatabase('wait deadlines', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let deadline: WaitDeadline;
  let hero: TestHero;

  const executions = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const current = async (wf: WorkflowRecord) => (await workflows.currentExecution(wf))!;
  const newHero = async (name = 'ada') => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };
  const setTimeoutAt = (id: string, timeoutAt: Date) => app.dataSource.getRepository(StepExecution).update({ id }, { timeoutAt });
  /** Started and driven to its parked `waitFor` step (the first step `send` ran, unless the class waits first). */
  const parked = async (workflowClass: Function = RunOnTimeoutWorkflow, on = hero) => {
    const wf = await workflows.start(workflowClass as never, on, { allowMultiple: true });
    for (let i = 0; i < 3 && (await current(wf)).state !== 'waiting'; i++) await app.gd.performNextStep(wf);
    expect(await current(wf)).toMatchObject({ state: 'waiting' });
    return wf;
  };

  describe('with the manual queue', () => {
    beforeAll(async () => {
      app = await createTestApp(kind, DEADLINE_WORKFLOWS);
      workflows = app.moduleRef.get(WorkflowService);
      signals = app.moduleRef.get(SignalService);
      deadline = app.moduleRef.get(WaitDeadline);
    });
    afterAll(() => app.close());
    beforeEach(async () => {
      await app.reset();
      resetDeadlineFixtures();
      hero = await newHero();
    });

    it('parking records timeout_at (timeout after the park) and enqueues a deadline job of its own id due then', async () => {
      const wf = await workflows.start(RunOnTimeoutWorkflow, hero);
      await app.gd.performNextStep(wf);
      const before = Date.now();
      const row = (await app.gd.performNextStep(wf))!;
      expect(row).toMatchObject({ state: 'waiting', stepName: 'awaitSignature' });
      expect(row.timeoutAt!.getTime()).toBeGreaterThanOrEqual(before + 14 * DAY - 5);
      expect(row.timeoutAt!.getTime()).toBeLessThanOrEqual(Date.now() + 14 * DAY + 5);
      const job = app.gd.enqueuedJobs.find((j) => j.jobId === `${row.id}-deadline`);
      expect(job).toMatchObject({ executionId: row.id });
      expect(job!.runAt.getTime()).toBe(row.timeoutAt!.getTime());
    });

    it("onTimeout 'run' (default): the body runs with receivedSignal null and timedOut true; a later signal is buffered for a later waiter", async () => {
      const wf = await parked(LaterWaiterWorkflow);
      const expired = await app.gd.expireWait(wf);
      expect(expired).toMatchObject({ state: 'scheduled', stepName: 'first', signalId: null, jobId: `${expired.id}-timeout` });
      expect(expired.metadata).toMatchObject({ timedOut: true });
      await app.gd.performNextStep(wf);
      expect(deadlineJournal).toEqual(['first(timedOut)']);
      await app.gd.assertTimedOut(wf, 'first');
      expect(await executions(wf)).toMatchObject([{ stepName: 'first', state: 'completed', outcome: 'success' }, { stepName: 'second', state: 'scheduled' }]);
      // The signal that lost to the deadline is kept for the next waiter, like any early signal.
      const late = await signals.signal(wf, 'signed');
      expect(late.state).toBe('pending');
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['first(timedOut)', `second(${late.id})`]);
      await app.gd.assertSignalState(wf, 'signed', 'consumed');
      await expect(app.gd.assertTimedOut(wf, 'second')).rejects.toBeInstanceOf(AssertionError);
    });

    it("a step timed out to run whose worker died in its body is run again timed out by stuck recovery, not parked again", async () => {
      const wf = await parked(RunOnTimeoutWorkflow);
      const expired = await app.gd.expireWait(wf);
      // Its start committed, then the worker died before the outcome.
      await app.dataSource.getRepository(StepExecution).update({ id: expired.id }, { state: 'in_progress', startedAt: new Date(Date.now() - 3 * HOUR) });
      expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckInProgressRecovered: 1, unrecoverable: [] });
      const rerun = await current(wf);
      expect(rerun).toMatchObject({ stepName: 'awaitSignature', state: 'scheduled', signalId: null, metadata: { timedOut: true } });
      await app.gd.performNextStep(wf);
      expect(await executions(wf)).toMatchObject([
        { stepName: 'send', state: 'completed' },
        { id: expired.id, state: 'completed', outcome: 'recovered' },
        { id: rerun.id, state: 'completed', outcome: 'success', timeoutAt: null },
        { stepName: 'file', state: 'scheduled' },
      ]);
      expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)']);
    });

    it("a step timed out to run whose body fails is retried timed out: the retry does not wait for the signal again", async () => {
      deadlinePlan.bodyFailures = 1;
      const wf = await parked(FlakyOnTimeoutWorkflow);
      const expired = await app.gd.expireWait(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('the carrier is down');
      const retry = await current(wf);
      expect(retry).toMatchObject({ stepName: 'awaitSignature', state: 'scheduled', signalId: null, metadata: { timedOut: true } });
      await app.gd.performNextStep(wf);
      expect(await executions(wf)).toMatchObject([
        { id: expired.id, state: 'completed', outcome: 'reattempted' },
        { id: retry.id, state: 'completed', outcome: 'success', timeoutAt: null },
      ]);
      expect(deadlineJournal).toEqual(['awaitSignature(timedOut)', 'awaitSignature(timedOut)']);
      await app.gd.assertWorkflowState(wf, 'finished');
    });

    it('a step timed out to run whose phase 1 fails is retried timed out', async () => {
      const wf = await parked(FlakyOnTimeoutWorkflow);
      const expired = await app.gd.expireWait(wf);
      await app.dataSource.getRepository(WorkflowRecord).update({ id: wf.id }, { heroType: 'MissingEntity' });
      await expect(app.gd.performNextStep(wf)).rejects.toBeInstanceOf(HeroTypeNotFoundError);
      await app.dataSource.getRepository(WorkflowRecord).update({ id: wf.id }, { heroType: 'TestHero' });
      expect(await current(wf)).toMatchObject({ stepName: 'awaitSignature', state: 'scheduled', signalId: null, metadata: { timedOut: true } });
      await app.gd.performNextStep(wf);
      expect((await executions(wf)).map((e) => [e.id === expired.id, e.state, e.outcome])).toEqual([
        [true, 'failed', 'failed'],
        [false, 'completed', 'success'],
      ]);
      expect(deadlineJournal).toEqual(['awaitSignature(timedOut)']);
    });

    it('a step timed out to run whose body failed until the workflow paused runs timed out again on resume', async () => {
      deadlinePlan.bodyFailures = 2;
      const wf = await parked(FlakyOnTimeoutWorkflow);
      await app.gd.expireWait(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('the carrier is down');
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('the carrier is down');
      await app.gd.assertWorkflowState(wf, 'paused');
      await workflows.resume(wf);
      expect(await current(wf)).toMatchObject({ stepName: 'awaitSignature', state: 'scheduled', signalId: null, metadata: { timedOut: true } });
      await app.gd.performNextStep(wf);
      expect(deadlineJournal).toEqual(['awaitSignature(timedOut)', 'awaitSignature(timedOut)', 'awaitSignature(timedOut)']);
      await app.gd.assertWorkflowState(wf, 'finished');
    });

    it('a step timed out to run that paused its workflow runs timed out again on resume', async () => {
      deadlinePlan.pauses = 1;
      const wf = await parked(FlakyOnTimeoutWorkflow);
      await app.gd.expireWait(wf);
      await app.gd.performNextStep(wf);
      await app.gd.assertWorkflowState(wf, 'paused');
      await workflows.resume(wf);
      expect(await current(wf)).toMatchObject({ stepName: 'awaitSignature', state: 'scheduled', signalId: null, metadata: { timedOut: true } });
      await app.gd.performNextStep(wf);
      expect(deadlineJournal).toEqual(['awaitSignature(timedOut)', 'awaitSignature(timedOut)']);
      await app.gd.assertWorkflowState(wf, 'finished');
    });

    it("onTimeout 'skip': the step is skipped (timedOut recorded) and the next one scheduled", async () => {
      const wf = await parked(SkipOnTimeoutWorkflow);
      const expired = await app.gd.expireWait(wf);
      expect(expired).toMatchObject({ state: 'skipped', outcome: 'skipped', metadata: { timedOut: true } });
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(deadlineJournal).toEqual(['send', 'file']);
      await app.gd.assertTimedOut(wf, 'awaitSignature');
    });

    it("onTimeout 'cancel': the execution and the workflow are canceled", async () => {
      const wf = await parked(CancelOnTimeoutWorkflow);
      expect(await app.gd.expireWait(wf)).toMatchObject({ state: 'canceled', outcome: 'canceled', metadata: { timedOut: true } });
      await app.gd.assertWorkflowState(wf, 'canceled');
      expect(deadlineJournal).toEqual(['send']);
    });

    it("onTimeout 'pause': the workflow pauses; resume waits again with a fresh deadline, and a signal then wakes it", async () => {
      const wf = await parked(PauseOnTimeoutWorkflow);
      const first = await current(wf);
      expect(await app.gd.expireWait(wf)).toMatchObject({ id: first.id, state: 'canceled', outcome: 'canceled', metadata: { timedOut: true } });
      await app.gd.assertWorkflowState(wf, 'paused');
      await workflows.resume(wf);
      await app.gd.performNextStep(wf);
      const again = await current(wf);
      expect(again).toMatchObject({ stepName: 'awaitSignature', state: 'waiting' });
      expect(again.id).not.toBe(first.id);
      expect(again.timeoutAt!.getTime()).toBeGreaterThan(first.timeoutAt!.getTime());
      const signal = await signals.signal(wf, 'signed');
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['send', `awaitSignature(${signal.id})`, 'file']);
    });

    it('a signal that commits first wins: the deadline job finds nothing parked and changes nothing', async () => {
      const wf = await parked();
      const parkedRow = await current(wf);
      const signal = await signals.signal(wf, 'signed');
      await setTimeoutAt(parkedRow.id, new Date(Date.now() - 1000)); // its deadline has passed too
      expect(await deadline.fire(parkedRow.id)).toBeNull();
      expect(await current(wf)).toMatchObject({ id: parkedRow.id, state: 'scheduled', signalId: signal.id });
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['send', `awaitSignature(${signal.id})`, 'file']);
      await expect(app.gd.assertTimedOut(wf, 'awaitSignature')).rejects.toThrow(/none timed out/);
    });

    it('a deadline job that comes early changes nothing; at its time it times the step out', async () => {
      const wf = await parked();
      const row = await current(wf);
      expect(await deadline.fire(row.id)).toBeNull(); // 14 days early
      expect(await current(wf)).toMatchObject({ id: row.id, state: 'waiting' });
      await setTimeoutAt(row.id, new Date(Date.now() - 1000));
      expect(await deadline.fire(row.id)).toMatchObject({ executionId: row.id, onTimeout: 'run' });
      expect(await deadline.fire(row.id)).toBeNull(); // a duplicate job: nothing parked any more
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
    });

    it('a step that finds a buffered signal at its gate never parks and has no deadline', async () => {
      const wf = await workflows.start(RunOnTimeoutWorkflow, hero);
      const signal = await signals.signal(wf, 'signed');
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['send', `awaitSignature(${signal.id})`, 'file']);
      const awaited = (await executions(wf)).find((e) => e.stepName === 'awaitSignature')!;
      expect(awaited.timeoutAt).toBeNull();
      expect(app.gd.enqueuedJobs.filter((j) => j.jobId?.endsWith('-deadline'))).toEqual([]);
    });

    it('wait + waitFor + timeout: the deadline counts from the park, after the wait', async () => {
      const wf = await workflows.start(DelayedDeadlineWorkflow, hero);
      await app.gd.performNextStep(wf); // send
      const scheduled = await current(wf);
      expect(scheduled.scheduledFor.getTime()).toBeGreaterThan(Date.now() + DAY - 60_000);
      const before = Date.now();
      const row = (await app.gd.performNextStep(wf))!; // run now (the helper ignores scheduledFor): parks
      expect(row.state).toBe('waiting');
      expect(row.timeoutAt!.getTime()).toBeGreaterThanOrEqual(before + 2 * HOUR - 5);
      expect(row.timeoutAt!.getTime()).toBeLessThan(Date.now() + 2 * HOUR + 5);
      await app.gd.expireWait(wf);
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
    });

    it('a resumable step that timed out knows it in every continuation of its chain', async () => {
      const wf = await parked(ResumableDeadlineWorkflow);
      await app.gd.expireWait(wf);
      await app.gd.runIterations(wf, 1);
      await app.gd.runIterations(wf, 1);
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual(['sweep(1, timedOut)', 'sweep(2, timedOut)', 'sweep(3, timedOut)']);
      const rows = await executions(wf);
      expect(rows.map((e) => [e.state, e.outcome, e.metadata?.timedOut])).toEqual([
        ['completed', 'continued', true],
        ['completed', 'continued', true],
        ['completed', 'success', true],
      ]);
    });

    it('a resumable step woken by a signal is not timed out in its continuations', async () => {
      const wf = await parked(ResumableDeadlineWorkflow);
      const signal = await signals.signal(wf, 'signed');
      await app.gd.runIterations(wf, 1);
      await app.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual([`sweep(1, ${signal.id})`, `sweep(2, ${signal.id})`, `sweep(3, ${signal.id})`]);
    });

    it('a deadline that passes while the workflow is paused is a no-op then, and applies on resume', async () => {
      const wf = await parked(SkipOnTimeoutWorkflow);
      const row = await current(wf);
      await workflows.pause(wf);
      await setTimeoutAt(row.id, new Date(Date.now() - 1000));
      expect(await deadline.fire(row.id)).toBeNull();
      expect(await current(wf)).toMatchObject({ id: row.id, state: 'waiting' });
      await expect(app.gd.expireWait(wf)).rejects.toThrow(/could not be expired \(workflow paused\)/);
      await workflows.resume(wf);
      expect(await executions(wf)).toMatchObject([{ stepName: 'send' }, { id: row.id, state: 'skipped', metadata: { timedOut: true } }, { stepName: 'file', state: 'scheduled' }]);
    });

    it('resume before the deadline re-arms it (and a signal buffered meanwhile still wins)', async () => {
      const wf = await parked();
      const row = await current(wf);
      await workflows.pause(wf);
      const signal = await signals.signal(wf, 'signed');
      const jobsBefore = app.gd.enqueuedJobs.length;
      await workflows.resume(wf);
      const added = app.gd.enqueuedJobs.slice(jobsBefore).map((j) => j.jobId);
      expect(added).toEqual([`${row.id}-deadline`, `${row.id}-wake-${signal.id}`]);
      expect(await current(wf)).toMatchObject({ id: row.id, state: 'scheduled', signalId: signal.id });
    });

    it('the geneva-drive:signal event tells a timeout, and the step event carries timedOut', async () => {
      const wf = await parked(LaterWaiterWorkflow);
      const row = await current(wf);
      const signalEvents = await captured<Record<string, unknown>>(GENEVA_DRIVE_CHANNELS.signal, () => app.gd.expireWait(wf));
      expect(signalEvents).toEqual([{ timedOut: true, workflowId: wf.id, executionId: row.id, stepName: 'first', onTimeout: 'run' }]);
      const stepEvents = await captured<Record<string, unknown>>(GENEVA_DRIVE_CHANNELS.step, () => app.gd.performNextStep(wf));
      expect(stepEvents).toMatchObject([{ stepName: 'first', outcome: 'completed', timedOut: true }]);
      const plain = await captured<Record<string, unknown>>(GENEVA_DRIVE_CHANNELS.step, async () => {
        await signals.signal(wf, 'signed');
        await app.gd.performNextStep(wf);
      });
      expect(plain).toHaveLength(1);
      expect(plain[0]).not.toHaveProperty('timedOut');
    });

    it('expireWait refuses a workflow not parked on a step with a timeout', async () => {
      const noDeadline = await parked(NoDeadlineWorkflow);
      await expect(app.gd.expireWait(noDeadline)).rejects.toThrow(/not parked on a step with a timeout/);
      const running = await workflows.start(RunOnTimeoutWorkflow, hero, { allowMultiple: true });
      await expect(app.gd.expireWait(running)).rejects.toThrow(/not parked on a step with a timeout/);
    });

    it('housekeeping: gauges of parked deadlines and overdue ones; a lost deadline job is recovered by the sweep', async () => {
      const housekeeping = app.moduleRef.get(HousekeepingService);
      const onTime = await parked(RunOnTimeoutWorkflow);
      const lost = await parked(SkipOnTimeoutWorkflow);
      const pausedWf = await parked(CancelOnTimeoutWorkflow);
      await parked(NoDeadlineWorkflow);
      const lostRow = await current(lost);
      const pausedRow = await current(pausedWf);
      // Past its deadline by more than stuckScheduledThreshold (15m): its job was lost.
      await setTimeoutAt(lostRow.id, new Date(Date.now() - 20 * 60_000));
      await workflows.pause(pausedWf);
      await setTimeoutAt(pausedRow.id, new Date(Date.now() - 20 * 60_000)); // paused: left alone
      const summary = await housekeeping.run();
      expect(summary.overdueDeadlinesRecovered).toBe(1);
      expect(summary.unrecoverable).toEqual([]);
      expect(await current(lost)).toMatchObject({ stepName: 'file', state: 'scheduled' });
      await app.gd.assertTimedOut(lost, 'awaitSignature');
      expect(await current(pausedWf)).toMatchObject({ id: pausedRow.id, state: 'waiting' });
      expect(await current(onTime)).toMatchObject({ state: 'waiting' });
      // The gauges are read after the sweep: the recovered one is no longer parked.
      expect(summary.gauges!['geneva_drive.waiting_with_deadline']).toEqual({ total: 2, byWorkflow: { RunOnTimeoutWorkflow: 1, CancelOnTimeoutWorkflow: 1 } });
      expect(summary.gauges!['geneva_drive.deadlines_overdue']).toEqual({ total: 0, byWorkflow: { RunOnTimeoutWorkflow: 0, CancelOnTimeoutWorkflow: 0 } });
      expect(summary.gauges!['geneva_drive.waiting_step_executions'].total).toBe(3);
    });

    it('the overdue gauge counts a lost deadline of a runnable workflow that the sweep could not recover yet', async () => {
      const wf = await parked(RunOnTimeoutWorkflow);
      const row = await current(wf);
      await setTimeoutAt(row.id, new Date(Date.now() - 20 * 60_000));
      expect(await deadline.readGauges()).toEqual({ withDeadline: { RunOnTimeoutWorkflow: 1 }, overdue: { RunOnTimeoutWorkflow: 1 } });
      await setTimeoutAt(row.id, new Date(Date.now() - 60_000)); // overdue, but within the threshold: its job may be running
      expect(await deadline.readGauges()).toEqual({ withDeadline: { RunOnTimeoutWorkflow: 1 }, overdue: { RunOnTimeoutWorkflow: 0 } });
    });

    describe('signalHero', () => {
      it('delivers to the ongoing workflow of the class for the hero, given the entity or its id', async () => {
        const wf = await parked(HeroAddressedWorkflow);
        const [byEntity] = await signals.signalHero(HeroAddressedWorkflow, hero, 'signed', { payload: { n: 1 }, idempotencyKey: 'evt-1' });
        expect(byEntity).toMatchObject({ workflowId: wf.id, name: 'signed', state: 'claimed', duplicateDelivery: false, payload: { n: 1 } });
        const [again] = await signals.signalHero(HeroAddressedWorkflow, String(hero.id), 'signed', { idempotencyKey: 'evt-1' });
        expect(again).toMatchObject({ id: byEntity.id, duplicateDelivery: true });
        await app.gd.speedrunWorkflow(wf);
        expect(deadlineJournal).toEqual([`awaitSignature(${byEntity.id})`]);
      });

      it('NoOngoingWorkflowError when the hero has no ongoing workflow of the class; nothing is written', async () => {
        const other = await newHero('grace');
        await parked(NoDeadlineWorkflow, other); // another class
        const finished = await parked(HeroAddressedWorkflow, other);
        await signals.signal(finished, 'signed');
        await app.gd.speedrunWorkflow(finished);
        const before = await app.dataSource.getRepository(Signal).count();
        const attempt = signals.signalHero(HeroAddressedWorkflow, other, 'signed');
        await expect(attempt).rejects.toBeInstanceOf(NoOngoingWorkflowError);
        await expect(attempt).rejects.toThrow(`no ongoing HeroAddressedWorkflow workflow for TestHero ${other.id}`);
        await expect(signals.signalHero(HeroAddressedWorkflow, 987_654, 'signed')).rejects.toBeInstanceOf(NoOngoingWorkflowError);
        expect(await app.dataSource.getRepository(Signal).count()).toBe(before);
      });

      it('with allowMultiple, delivers to each ongoing workflow (every row returned), deduplicated per workflow by the key', async () => {
        const first = await parked(HeroAddressedWorkflow);
        const second = await parked(HeroAddressedWorkflow);
        const rows = await signals.signalHero(HeroAddressedWorkflow, hero, 'signed', { idempotencyKey: 'evt-7' });
        expect(rows.map((r) => [r.workflowId, r.duplicateDelivery])).toEqual([
          [first.id, false],
          [second.id, false],
        ]);
        const again = await signals.signalHero(HeroAddressedWorkflow, hero, 'signed', { idempotencyKey: 'evt-7' });
        expect(again.map((r) => [r.id, r.duplicateDelivery])).toEqual(rows.map((r) => [r.id, true]));
        expect(await app.dataSource.getRepository(Signal).count()).toBe(2);
      });

      it('refuses a bare id when the workflow declares no hero class, and a missing hero', async () => {
        @Workflow({ name: 'UndeclaredHeroWorkflow' })
        class UndeclaredHeroWorkflow extends GenevaWorkflow<TestHero> {
          @Step({ waitFor: 'signed' })
          async awaitSignature() {}
        }
        const local = await createTestApp(kind, [UndeclaredHeroWorkflow], { prepare: false });
        try {
          const localSignals = local.moduleRef.get(SignalService);
          await expect(localSignals.signalHero(UndeclaredHeroWorkflow, '1', 'signed')).rejects.toThrow(/declares no hero class/);
          await expect(localSignals.signalHero(UndeclaredHeroWorkflow, undefined as never, 'signed')).rejects.toBeInstanceOf(InvalidSignalError);
          // An entity that cannot be a hero: the error names the delivery, not a start.
          const unsaved = localSignals.signalHero(UndeclaredHeroWorkflow, local.dataSource.getRepository(TestHero).create({ name: 'nobody' }), 'signed');
          await expect(unsaved).rejects.toBeInstanceOf(InvalidHeroError);
          await expect(unsaved).rejects.toThrow('Cannot signal UndeclaredHeroWorkflow by its hero: the TestHero has no id yet: save it first');
        } finally {
          await local.close();
        }
      });
    });
  });

  describe('with the local queue', () => {
    let local: TestApp;
    const boot = () => createTestApp(kind, DEADLINE_WORKFLOWS, { queue: { adapter: 'local' }, prepare: false });

    beforeAll(async () => {
      app = await createTestApp(kind, DEADLINE_WORKFLOWS); // prepares the schema; the local apps share it
    });
    afterAll(async () => {
      await local?.close();
      await app.close();
    });
    beforeEach(async () => {
      await app.reset();
      resetDeadlineFixtures();
      hero = await newHero();
    });

    it('the deadline fires by itself and the body runs timed out', async () => {
      local = await boot();
      const wf = await local.moduleRef.get(WorkflowService).start(ShortDeadlineWorkflow, hero);
      await waitUntil('the workflow to finish', async () => (await local.gd.reload(wf)).state === 'finished', { timeoutMs: 15_000 });
      expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
      await local.gd.assertTimedOut(wf, 'awaitSignature');
      await local.close();
    });

    it('a deadline survives a restart: the local queue rebuilds its timer at boot', async () => {
      local = await boot();
      const localWorkflows = local.moduleRef.get(WorkflowService);
      const wf = await localWorkflows.start(RunOnTimeoutWorkflow, hero);
      await waitUntil('the step to park', async () => (await localWorkflows.currentExecution(wf))?.state === 'waiting', { timeoutMs: 15_000 });
      const row = (await localWorkflows.currentExecution(wf))!;
      await local.close();
      // While the process was down the deadline passed.
      await app.dataSource.getRepository(StepExecution).update({ id: row.id }, { timeoutAt: new Date(Date.now() - 1000) });
      local = await boot();
      await waitUntil('the workflow to finish', async () => (await local.gd.reload(wf)).state === 'finished', { timeoutMs: 15_000 });
      expect(deadlineJournal).toEqual(['send', 'awaitSignature(timedOut)', 'file']);
      await local.close();
    });

    it('a signal before the deadline wins; the deadline timer then changes nothing', async () => {
      local = await boot();
      const localWorkflows = local.moduleRef.get(WorkflowService);
      const wf = await localWorkflows.start(ShortDeadlineWorkflow, hero);
      await waitUntil('the step to park', async () => (await localWorkflows.currentExecution(wf))?.state === 'waiting', { timeoutMs: 15_000 });
      const signal = await local.moduleRef.get(SignalService).signal(wf, 'signed');
      await waitUntil('the workflow to finish', async () => (await local.gd.reload(wf)).state === 'finished', { timeoutMs: 15_000 });
      const row = (await localWorkflows.executionHistory(wf)).find((e) => e.stepName === 'awaitSignature')!;
      await waitUntil('the deadline to pass', () => Date.now() > row.timeoutAt!.getTime() + 200, { timeoutMs: 5_000 });
      expect(deadlineJournal).toEqual(['send', `awaitSignature(${signal.id})`, 'file']);
      expect((await localWorkflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.metadata?.timedOut ?? false])).toEqual([
        ['send', 'completed', false],
        ['awaitSignature', 'completed', false],
        ['file', 'completed', false],
      ]);
      await local.close();
    });
  });

  describe('without the wait-deadlines migration', () => {
    let legacy: TestApp;
    beforeAll(async () => {
      legacy = await createTestApp(kind, DEADLINE_WORKFLOWS, { withoutDeadlines: true });
      workflows = legacy.moduleRef.get(WorkflowService);
      signals = legacy.moduleRef.get(SignalService);
    });
    afterAll(() => legacy.close());
    beforeEach(async () => {
      await legacy.reset();
      resetDeadlineFixtures();
      const heroes = legacy.dataSource.getRepository(TestHero);
      hero = await heroes.save(heroes.create({ name: 'legacy' }));
    });

    it('warns at boot of the steps with a timeout, naming the migration', async () => {
      const booted = warningsLogger();
      await (await createTestApp(kind, [SkipOnTimeoutWorkflow, NoDeadlineWorkflow], { prepare: false, logger: booted.logger })).close();
      expect(booted.warnings).toEqual([
        'The wait-deadlines migration (AddGenevaDriveWaitDeadlines1730000000004) has not run: steps with a timeout (SkipOnTimeoutWorkflow.awaitSignature) will fail at their gate until it does',
      ]);
    });

    it('a step with a timeout fails loudly at its gate, naming the migration, and pauses the workflow', async () => {
      const wf = await workflows.start(SkipOnTimeoutWorkflow, hero);
      await legacy.gd.performNextStep(wf);
      const attempt = legacy.gd.performNextStep(wf);
      await expect(attempt).rejects.toBeInstanceOf(DeadlinesNotMigratedError);
      await expect(attempt).rejects.toThrow(/AddGenevaDriveWaitDeadlines1730000000004/);
      expect((await workflows.executionHistory(wf)).at(-1)).toMatchObject({ stepName: 'awaitSignature', state: 'failed' });
      await legacy.gd.assertWorkflowState(wf, 'paused');
    });

    it('waitFor steps without a timeout, housekeeping and its gauges work as before', async () => {
      const wf = await workflows.start(NoDeadlineWorkflow, hero);
      await legacy.gd.performNextStep(wf);
      const signal = await signals.signal(wf, 'signed');
      await legacy.gd.speedrunWorkflow(wf);
      expect(deadlineJournal).toEqual([`awaitSignature(${signal.id})`]);
      const summary = await legacy.moduleRef.get(HousekeepingService).run();
      expect(summary.overdueDeadlinesRecovered).toBe(0);
      expect(summary.gauges).not.toHaveProperty(['geneva_drive.waiting_with_deadline']);
    });
  });
});

describe('wait deadlines: boot-time checks', () => {
  const define = (options: Record<string, unknown>) => {
    @Workflow({ name: 'BadDeadlineWorkflow' })
    class BadDeadlineWorkflow extends GenevaWorkflow {
      @Step(options as never)
      async awaitSignature() {}
    }
    return () => buildWorkflowDefinition(BadDeadlineWorkflow);
  };

  it.each([
    [{ timeout: '1d' }, /BadDeadlineWorkflow\.awaitSignature: timeout needs waitFor/],
    [{ wait: '1d', timeout: '1d' }, /timeout needs waitFor/],
    [{ waitFor: 'signed', timeout: 'soon' }, /timeout must be a positive duration .* got "soon"/],
    [{ waitFor: 'signed', timeout: 0 }, /timeout must be a positive duration/],
    [{ waitFor: 'signed', timeout: '1d', onTimeout: 'explode' }, /onTimeout must be one of 'run', 'skip', 'cancel', 'pause', got "explode"/],
    [{ waitFor: 'signed', onTimeout: 'skip' }, /onTimeout needs a timeout/],
  ])('%j throws StepConfigurationError', (options, message) => {
    const build = define(options);
    expect(build).toThrow(StepConfigurationError);
    expect(build).toThrow(message);
  });

  it('a valid declaration records the timeout and defaults onTimeout to run', () => {
    const definition = define({ waitFor: 'signed', timeout: '14d' })();
    expect(definition.step('awaitSignature')).toMatchObject({ timeoutMs: 14 * DAY, onTimeout: 'run' });
  });
});
