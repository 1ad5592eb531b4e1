/**
 * Instrumentation on node:diagnostics_channel (upstream instrumentation_test.rb, adapted to the
 * channels of SPEC §2.6) and the hooks around a step for every kind of outcome (reference §7.1).
 * Subscribers are the public seam: the tests subscribe to every channel, record each message with
 * its channel, and unsubscribe after each test.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Repository } from 'typeorm';
import {
  ExecutorService,
  GENEVA_DRIVE_CHANNELS,
  GenevaWorkflow,
  HousekeepingService,
  SignalService,
  Step,
  StepExecution,
  Workflow,
  WorkflowNotOngoingError,
  WorkflowService,
  type FinalizeEvent,
  type PreconditionEvent,
  type StepEvent,
  type WorkflowRecord,
} from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  HookOutcomeWorkflow,
  InstrumentedSignalWorkflow,
  InstrumentedWorkflow,
  instrumentPlan,
  policyJournal,
  policyPlan,
  PreconditionError,
  resetPolicies,
  TransientError,
  type Decision,
  type ScriptItem,
} from '../src/policy-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A short body between slow hooks: the step event must tell the two apart. */
@Workflow({ name: 'SlowHooks', hero: () => TestHero })
class SlowHooksWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    await pause(20);
  }

  override async beforeStepExecution() {
    await pause(100);
  }

  override async aroundStepExecution(_execution: StepExecution, run: () => Promise<void>) {
    await pause(100);
    await run();
  }

  override async afterStepExecution() {
    await pause(100);
  }
}

type ChannelName = keyof typeof GENEVA_DRIVE_CHANNELS;
interface Recorded {
  channel: ChannelName;
  message: Record<string, unknown>;
}

const DUE_KEYS = ['scheduledFor', 'woken'];
const EXECUTION_KEYS = ['durationMs', 'executionId', 'stepName', 'workflowClass', 'workflowId'];
const keysOf = (message: object) => Object.keys(message).sort();

describeEachDatabase('instrumentation and hooks', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let executions: Repository<StepExecution>;
  let hero: TestHero;
  const recorded: Recorded[] = [];
  const listeners = (Object.keys(GENEVA_DRIVE_CHANNELS) as ChannelName[]).map((channel) => ({
    channel,
    name: GENEVA_DRIVE_CHANNELS[channel],
    listener: (message: unknown) => void recorded.push({ channel, message: message as Record<string, unknown> }),
  }));

  beforeAll(async () => {
    app = await createTestApp(kind, [InstrumentedWorkflow, InstrumentedSignalWorkflow, HookOutcomeWorkflow, SlowHooksWorkflow], { stuckInProgressThreshold: '1h' });
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
    executions = app.dataSource.getRepository(StepExecution);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetPolicies();
    instrumentPlan.cancel = false;
    instrumentPlan.skip = false;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
    for (const { name, listener } of listeners) subscribe(name, listener);
    recorded.length = 0;
  });
  afterEach(() => {
    for (const { name, listener } of listeners) unsubscribe(name, listener);
  });

  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const rejection = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error);
  const channels = () => recorded.map((event) => event.channel);
  const only = <T>(channel: ChannelName) => {
    const events = recorded.filter((event) => event.channel === channel);
    expect(events).toHaveLength(1);
    return events[0].message as unknown as T;
  };
  /** Starts InstrumentedWorkflow, then runs its first execution with the body doing `item`. */
  const runFirst = async (item: ScriptItem = 'ok') => {
    policyPlan.script = [item];
    const wf = await workflows.start(InstrumentedWorkflow, hero);
    const [first] = await history(wf);
    recorded.length = 0;
    const error = await rejection(executor.execute(first.id));
    return { wf, first, error };
  };
  const expectIdentity = (message: object, wf: WorkflowRecord, executionId: string, stepName = 'work', workflowClass = 'Instrumented') => {
    expect(message).toMatchObject({ executionId, workflowId: wf.id, workflowClass, stepName });
    const { durationMs } = message as { durationMs: number };
    expect(typeof durationMs).toBe('number');
    expect(Number.isFinite(durationMs)).toBe(true);
    expect(durationMs).toBeGreaterThanOrEqual(0);
  };

  describe('diagnostics channels', () => {
    it('a successful step publishes precondition → step → finalize, with identical ids and exactly the documented keys', async () => {
      const { wf, first } = await runFirst('ok');
      expect(channels()).toEqual(['precondition', 'step', 'finalize']);
      const [precondition, step, finalize] = recorded.map((event) => event.message);

      for (const message of [precondition, step, finalize]) expectIdentity(message, wf, first.id);
      expect(keysOf(precondition)).toEqual([...EXECUTION_KEYS, ...DUE_KEYS, 'outcome'].sort());
      expect(keysOf(step)).toEqual([...EXECUTION_KEYS, 'hooksDurationMs', 'outcome'].sort());
      expect(keysOf(finalize)).toEqual([...EXECUTION_KEYS, 'stepState', 'workflowState'].sort());
      expect(precondition).toMatchObject({ outcome: 'passed', scheduledFor: first.scheduledFor, woken: false });
      expect((step as unknown as StepEvent).outcome).toBe('completed');
      expect(finalize).toMatchObject({ workflowState: 'ready', stepState: 'completed' });
    });

    it('the step event times the body alone (durationMs) and the hooks around it apart (hooksDurationMs)', async () => {
      const wf = await workflows.start(SlowHooksWorkflow, hero);
      recorded.length = 0;
      await app.gd.performNextStep(wf);
      const step = only<StepEvent>('step');
      expect(step.outcome).toBe('completed');
      // Body 20 ms; hooks 3 × 100 ms. Timers never fire early by more than a millisecond.
      expect(step.durationMs).toBeGreaterThanOrEqual(19);
      expect(step.durationMs).toBeLessThan(step.hooksDurationMs);
      expect(step.hooksDurationMs).toBeGreaterThanOrEqual(297);
    });

    it('a failing step: step outcome exception with the error object; finalize carries the committed states and the error', async () => {
      const thrown = new TransientError('instrumented failure');
      const { wf, first, error } = await runFirst(thrown);
      expect(error).toBe(thrown);
      expect(channels()).toEqual(['precondition', 'step', 'finalize']);
      const precondition = only<PreconditionEvent>('precondition');
      const step = only<StepEvent>('step');
      const finalize = only<FinalizeEvent>('finalize');
      expect(precondition.outcome).toBe('passed');
      expect(step.outcome).toBe('exception');
      expect(step.exception).toBe(thrown);
      expect(keysOf(step)).toEqual([...EXECUTION_KEYS, 'exception', 'hooksDurationMs', 'outcome'].sort());
      expect(finalize).toMatchObject({ workflowState: 'paused', stepState: 'failed' });
      expect(finalize.exception).toBe(thrown);
      for (const message of [precondition, step, finalize]) expectIdentity(message, wf, first.id);
      // The states in the event are the committed ones.
      expect((await executions.findOneByOrFail({ id: first.id })).state).toBe(finalize.stepState);
      expect((await app.gd.reload(wf)).state).toBe(finalize.workflowState);
    });

    it('a skipIf abort publishes only the precondition event, outcome skipped', async () => {
      instrumentPlan.skip = true;
      const { wf, first } = await runFirst();
      expect(channels()).toEqual(['precondition']);
      const precondition = only<PreconditionEvent>('precondition');
      expect(precondition.outcome).toBe('skipped');
      expect(keysOf(precondition)).toEqual([...EXECUTION_KEYS, ...DUE_KEYS, 'outcome'].sort());
      expectIdentity(precondition, wf, first.id);
      expect(policyJournal).toEqual([]);
    });

    it('a cancelIf abort publishes only the precondition event, outcome canceled', async () => {
      instrumentPlan.cancel = true;
      const { wf, first } = await runFirst();
      expect(channels()).toEqual(['precondition']);
      expect(only<PreconditionEvent>('precondition').outcome).toBe('canceled');
      expect((await app.gd.reload(wf)).state).toBe('canceled');
      expect(first.stepName).toBe('work');
    });

    it('a raising precondition publishes only the precondition event, outcome exception with the error object', async () => {
      policyPlan.preconditionErrors = 1;
      const { wf, first, error } = await runFirst();
      expect(error).toBeInstanceOf(PreconditionError);
      expect(channels()).toEqual(['precondition']);
      const precondition = only<PreconditionEvent>('precondition');
      expect(precondition.outcome).toBe('exception');
      expect(precondition.exception).toBe(error);
      expect(keysOf(precondition)).toEqual([...EXECUTION_KEYS, ...DUE_KEYS, 'exception', 'outcome'].sort());
      expectIdentity(precondition, wf, first.id);
    });

    it.each([
      ['flow:pause', 'pause', 'paused', 'canceled'],
      ['flow:cancel', 'cancel', 'canceled', 'canceled'],
      ['flow:skip', 'skip', 'ready', 'skipped'],
      ['flow:finished', 'finished', 'finished', 'completed'],
      ['flow-reattempt', 'reattempt', 'ready', 'completed'],
      ['flow:reattempt:30s', 'reattempt', 'ready', 'completed'],
    ] as const)('body flow control %s: step outcome %s, finalize %s / %s', async (item, outcome, workflowState, stepState) => {
      const { wf, first, error } = await runFirst(item);
      expect(error).toBeNull();
      expect(channels()).toEqual(['precondition', 'step', 'finalize']);
      const step = only<StepEvent>('step');
      expect(step.outcome).toBe(outcome);
      expect(keysOf(step)).toEqual([...EXECUTION_KEYS, 'hooksDurationMs', 'outcome'].sort());
      expect(only<FinalizeEvent>('finalize')).toMatchObject({ workflowState, stepState });
      for (const event of recorded) expectIdentity(event.message, wf, first.id);
    });

    it.each([
      ['pause', 'pause', 'paused', 'canceled'],
      ['cancel', 'cancel', 'canceled', 'canceled'],
      ['skip', 'skip', 'ready', 'skipped'],
      ['finished', 'finished', 'finished', 'completed'],
      ['reattempt:30s', 'reattempt', 'ready', 'completed'],
    ] as const)('a handler deciding %s: the step event says exception, the finalize event what was committed', async (decision, _kind, workflowState, stepState) => {
      policyPlan.script = [new TransientError('decided by the handler')];
      policyPlan.decision = decision;
      const wf = await workflows.start(HookOutcomeWorkflow, hero);
      recorded.length = 0;
      await rejection(app.gd.performNextStep(wf));
      expect(channels()).toEqual(['precondition', 'step', 'finalize']);
      expect(only<StepEvent>('step').outcome).toBe('exception');
      expect(only<FinalizeEvent>('finalize')).toMatchObject({ workflowState, stepState, workflowClass: 'HookOutcomeWorkflow' });
    });

    it('a full run publishes precondition, step, finalize per step, in order, each triple with its own execution', async () => {
      const wf = await workflows.start(InstrumentedWorkflow, hero);
      recorded.length = 0;
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(channels()).toEqual(['precondition', 'step', 'finalize', 'precondition', 'step', 'finalize']);
      const rows = await history(wf);
      recorded.slice(0, 3).forEach((event) => expectIdentity(event.message, wf, rows[0].id, 'work'));
      recorded.slice(3).forEach((event) => expectIdentity(event.message, wf, rows[1].id, 'next'));
      expect(recorded[5].message).toMatchObject({ workflowState: 'finished', stepState: 'completed' });
    });

    it('aborts before the preconditions publish nothing: a duplicate job, a job for a paused workflow, a vanished hero', async () => {
      const { first } = await runFirst('ok');
      recorded.length = 0;
      await executor.execute(first.id); // duplicate
      expect(recorded).toEqual([]);

      const paused = await workflows.start(InstrumentedWorkflow, hero, { allowMultiple: true });
      await workflows.pause(paused);
      await executor.execute((await history(paused))[0].id);
      expect(recorded).toEqual([]);

      const heroes = app.dataSource.getRepository(TestHero);
      const doomed = await heroes.save(heroes.create({ name: 'gone' }));
      const orphan = await workflows.start(InstrumentedWorkflow, doomed);
      await heroes.delete(doomed.id);
      await executor.execute((await history(orphan))[0].id);
      expect(recorded).toEqual([]);
      expect((await app.gd.reload(orphan)).state).toBe('canceled');
    });

    it('a waitFor step: precondition outcome waiting; the signal event reports the wake; then the step runs', async () => {
      const wf = await workflows.start(InstrumentedSignalWorkflow, hero);
      const [first] = await history(wf);
      recorded.length = 0;
      await executor.execute(first.id);
      expect(channels()).toEqual(['precondition']);
      expect(only<PreconditionEvent>('precondition')).toMatchObject({ outcome: 'waiting', executionId: first.id, stepName: 'awaitGo', workflowClass: 'InstrumentedSignal', scheduledFor: first.scheduledFor, woken: false });

      recorded.length = 0;
      const signals = app.moduleRef.get(SignalService);
      const signal = await signals.signal(wf, 'go', { idempotencyKey: 'evt-1' });
      expect(channels()).toEqual(['signal']);
      expect(recorded[0].message).toEqual({ workflowId: wf.id, workflowClass: 'InstrumentedSignal', signalId: signal.id, name: 'go', duplicate: false, woken: 1, disposition: 'woke' });

      recorded.length = 0;
      await signals.signal(wf, 'go', { idempotencyKey: 'evt-1' });
      expect(recorded.map((event) => event.message)).toEqual([{ workflowId: wf.id, workflowClass: 'InstrumentedSignal', signalId: signal.id, name: 'go', duplicate: true, woken: 0, disposition: 'duplicate' }]);

      recorded.length = 0;
      await signals.signal(wf, 'later', { allowUnknownName: true, idempotencyKey: 'evt-2' }); // no step waits for it
      expect(recorded.map((event) => event.message)).toEqual([expect.objectContaining({ name: 'later', duplicate: false, woken: 0, disposition: 'buffered' })]);

      recorded.length = 0;
      await app.gd.speedrunWorkflow(wf);
      expect(channels()).toEqual(['precondition', 'step', 'finalize']);
      // Woken: due from the delivery on, which set scheduledFor.
      const woken = await executions.findOneByOrFail({ id: first.id });
      expect(only<PreconditionEvent>('precondition')).toMatchObject({ outcome: 'passed', executionId: first.id, scheduledFor: woken.scheduledFor, woken: true });
      expect(woken.scheduledFor.getTime()).toBeGreaterThan(first.scheduledFor.getTime());
      expect(policyJournal).toEqual(['awaitGo:go']);

      recorded.length = 0;
      await expect(signals.signal(wf, 'go')).rejects.toThrow(WorkflowNotOngoingError);
      expect(recorded.map((event) => event.message)).toEqual([{ workflowId: wf.id, workflowClass: 'InstrumentedSignal', signalId: null, name: 'go', duplicate: false, woken: 0, disposition: 'rejected' }]);
    });

    it('housekeeping publishes its summary', async () => {
      const wf = await workflows.start(InstrumentedWorkflow, hero);
      const [first] = await history(wf);
      await executions.update(first.id, { scheduledFor: new Date(Date.now() - 3 * 3_600_000) }); // stuck scheduled
      recorded.length = 0;
      const summary = await app.moduleRef.get(HousekeepingService).run();
      expect(channels()).toEqual(['housekeeping']);
      expect(recorded[0].message).toEqual(summary);
      expect(summary.stuckScheduledRecovered).toBe(1);
      expect(Object.keys(recorded[0].message)).toEqual(expect.arrayContaining(['workflowsDeleted', 'stepExecutionsDeleted', 'stuckInProgressRecovered', 'stuckScheduledRecovered']));
    });

    it('after unsubscribing nothing is delivered', async () => {
      for (const { name, listener } of listeners) unsubscribe(name, listener);
      await runFirst('ok');
      expect(recorded).toEqual([]);
    });
  });

  describe('hooks', () => {
    const hooked = async (script: ScriptItem[], decision: Decision = 'nothing') => {
      policyPlan.script = script;
      policyPlan.decision = decision;
      const wf = await workflows.start(HookOutcomeWorkflow, hero);
      const error = await rejection(app.gd.performNextStep(wf));
      return { wf, error };
    };
    const AROUND = ['before:work', 'around-enter:work', 'body', 'around-exit:work', 'after:work'];

    it('success: before → around → body → around → after; the around hook’s return value is ignored', async () => {
      const { wf, error } = await hooked(['ok']);
      expect(error).toBeNull();
      expect(policyJournal).toEqual(AROUND);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'next' });
      expect((await history(wf))[0]).toMatchObject({ state: 'completed', outcome: 'success' });
    });

    it('flow control: the after hook runs too, and the intent survives it', async () => {
      const { wf } = await hooked(['flow-reattempt']);
      expect(policyJournal).toEqual(AROUND);
      expect((await history(wf))[0]).toMatchObject({ state: 'completed', outcome: 'reattempted' });
    });

    it('an exception: the after hook runs before the policy is applied (here a handler deciding nothing: paused)', async () => {
      const thrown = new TransientError('hooked failure');
      const { wf, error } = await hooked([thrown], 'nothing');
      expect(error).toBe(thrown);
      expect(policyJournal).toEqual(AROUND);
      expect(wf.state).toBe('paused');
    });

    it('no hook runs when the step does not start: a duplicate job, a job for a paused workflow', async () => {
      const wf = await workflows.start(HookOutcomeWorkflow, hero);
      const [first] = await history(wf);
      await executor.execute(first.id);
      policyJournal.length = 0;
      await executor.execute(first.id);
      await workflows.pause(wf);
      await executor.execute((await history(wf))[1].id);
      expect(policyJournal).toEqual([]);
      expect((await history(wf))[1]).toMatchObject({ state: 'canceled', outcome: 'canceled' });
    });
  });
});
