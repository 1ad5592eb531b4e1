/**
 * Flow control inside steps and operator actions (upstream flow_control_test.rb,
 * external_cancel_test.rb, pause_resume_test.rb and resume_and_skip_test.rb, adapted), plus the
 * port's own guarantees: flow control survives a swallowing try/catch, and operator actions in a
 * wrong state — performing included (SPEC §5) — throw InvalidStateError and change nothing.
 *
 * "Time passes" by moving `scheduled_for` into the past with an UPDATE.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { Repository } from 'typeorm';
import { ExecutorService, InvalidStateError, StepExecution, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { BoomError, coreJournal, corePlan, FlakyWorkflow, FlowWorkflow, resetCore, type PlannedFlow } from '../src/core-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const HOUR = 3_600_000;
type OperatorAction = 'pause' | 'resume' | 'skip' | 'cancel';
const OPERATOR_ACTIONS: OperatorAction[] = ['pause', 'resume', 'skip', 'cancel'];

describeEachDatabase('flow control and operator actions', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let executions: Repository<StepExecution>;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [FlowWorkflow, FlakyWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
    executions = app.dataSource.getRepository(StepExecution);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetCore();
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const history = (wf: WorkflowRecord | string) => workflows.executionHistory(wf);
  const summary = async (wf: WorkflowRecord) => (await history(wf)).map((e) => [e.stepName, e.state, e.outcome]);
  const current = async (wf: WorkflowRecord) => (await workflows.currentExecution(wf))!;
  const startFlow = () => workflows.start(FlowWorkflow, hero);
  const plan = (step: string, action: PlannedFlow) => {
    corePlan.flow[step] = action;
  };
  /** Starts FlowWorkflow and runs `first`, so `second` is scheduled two hours ahead. */
  const startAtSecond = async () => {
    const wf = await startFlow();
    await app.gd.performNextStep(wf);
    return wf;
  };
  /** Moves the execution's due time `ms` into the past. */
  const makeOverdue = async (execution: StepExecution, ms = HOUR) => {
    const scheduledFor = new Date(Date.now() - ms);
    await executions.update(execution.id, { scheduledFor });
    return executions.findOneByOrFail({ id: execution.id });
  };
  /** Everything the database says about a workflow, plus the jobs enqueued so far. */
  const snapshot = async (wf: WorkflowRecord | string) => ({
    workflow: await app.gd.reload(wf),
    executions: await history(wf),
    jobs: app.gd.enqueuedJobs.length,
  });
  const operate = (action: OperatorAction, wf: WorkflowRecord | string) => workflows[action](wf);
  const rejection = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error);

  describe('flow control inside a step', () => {
    it('pause(): code after the call does not run; the execution is canceled and the workflow paused', async () => {
      plan('first', 'pause');
      const wf = await startFlow();
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before']);
      expect(ran).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      expect(ran!.canceledAt).toBeInstanceOf(Date);
      expect(ran!.finishedAt).toBeInstanceOf(Date);
      expect(wf).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'first' });
      expect(wf.transitionedAt).toBeInstanceOf(Date);
      expect(await workflows.currentExecution(wf)).toBeNull();
    });

    it('skip(): code after the call does not run; the step is skipped and the next one scheduled', async () => {
      plan('first', 'skip');
      const wf = await startFlow();
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before']);
      expect(ran).toMatchObject({ state: 'skipped', outcome: 'skipped' });
      expect(wf).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'second' });
      expect(await summary(wf)).toEqual([
        ['first', 'skipped', 'skipped'],
        ['second', 'scheduled', null],
      ]);
    });

    it('cancel(): code after the call does not run; the execution and the workflow are canceled', async () => {
      plan('first', 'cancel');
      const wf = await startFlow();
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before']);
      expect(ran).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      expect(ran!.canceledAt).toBeInstanceOf(Date);
      expect(ran!.finishedAt).toBeInstanceOf(Date);
      expect(wf.state).toBe('canceled');
      expect(wf.finishedAt).toBeInstanceOf(Date);
      expect(await history(wf)).toHaveLength(1);
    });

    it('skip() inside the last step finishes the workflow', async () => {
      plan('lastStep', 'skip');
      const wf = await startAtSecond();
      await app.gd.performNextStep(wf);
      expect(wf.nextStepName).toBe('lastStep');
      await app.gd.performNextStep(wf);
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(coreJournal).toEqual(['first:before', 'first:after', 'second:before', 'second:after', 'lastStep:before']);
      expect((await summary(wf)).at(-1)).toEqual(['lastStep', 'skipped', 'skipped']);
    });

    it('finished(): completes the step and the workflow, keeping nextStepName', async () => {
      plan('first', 'finished');
      const wf = await startFlow();
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before']);
      expect(ran).toMatchObject({ state: 'completed', outcome: 'success' });
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: 'first' });
      expect(wf.finishedAt).toBeInstanceOf(Date);
      expect(await history(wf)).toHaveLength(1);
      expect(app.gd.enqueuedJobs).toHaveLength(1);
    });

    it('reattempt(): the same step is scheduled again at once, the execution completed as reattempted', async () => {
      plan('first', 'reattempt');
      const wf = await startFlow();
      const before = Date.now();
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before']);
      expect(ran).toMatchObject({ state: 'completed', outcome: 'reattempted', errorMessage: null });
      expect(ran!.metadata).toMatchObject({ reattemptReason: 'flow_control' });
      expect(wf).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'first' });
      const next = await current(wf);
      expect(next).toMatchObject({ stepName: 'first', state: 'scheduled' });
      expect(next.id).not.toBe(ran!.id);
      expect(next.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      expect(next.scheduledFor.getTime()).toBeGreaterThanOrEqual(before - 1000);
    });

    it('reattempt({ wait }): the same step is scheduled again after the wait', async () => {
      plan('first', 'reattempt:2h');
      const wf = await startFlow();
      const before = Date.now();
      const ran = await app.gd.performNextStep(wf);
      expect(ran).toMatchObject({ state: 'completed', outcome: 'reattempted' });
      const next = await current(wf);
      expect(next).toMatchObject({ stepName: 'first', state: 'scheduled' });
      expect(next.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 2 * HOUR - 1000);
      expect(next.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 2 * HOUR + 1000);
      expect(app.gd.enqueuedJobs.at(-1)).toMatchObject({ executionId: next.id, runAt: next.scheduledFor });

      corePlan.flow = {};
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before', 'first:before', 'first:after']);
      expect(wf.nextStepName).toBe('second');
    });

    it.each([
      ['pause', 'paused', ['canceled', 'canceled']],
      ['skip', 'ready', ['skipped', 'skipped']],
      ['cancel', 'canceled', ['canceled', 'canceled']],
      ['finished', 'finished', ['completed', 'success']],
      ['reattempt', 'ready', ['completed', 'reattempted']],
    ] as const)('%s() takes effect even when user code swallows it in a try/catch', async (action, workflowState, [state, outcome]) => {
      plan('first', `swallow:${action}`);
      const wf = await startFlow();
      const ran = await app.gd.performNextStep(wf);
      // The call unwound the try block, the catch swallowed the marker, the body ran to its end...
      expect(coreJournal).toEqual(['first:before', 'first:swallowed', 'first:after']);
      // ...and the recorded intent still decided the outcome.
      expect(ran).toMatchObject({ state, outcome });
      expect(wf.state).toBe(workflowState);
    });

    it('a swallowed skip() moves the workflow on to the next step', async () => {
      plan('first', 'swallow:skip');
      const wf = await startFlow();
      await app.gd.performNextStep(wf);
      expect(wf.nextStepName).toBe('second');
      expect((await current(wf)).stepName).toBe('second');
    });
  });

  describe('external pause', () => {
    it('pauses a ready workflow and stamps transitionedAt', async () => {
      const wf = await startFlow();
      await workflows.pause(wf);
      expect(wf.state).toBe('paused');
      expect(wf.transitionedAt).toBeInstanceOf(Date);
      await app.gd.assertWorkflowState(wf, 'paused');
    });

    it('keeps the scheduled execution of a fresh workflow scheduled, with no outcome', async () => {
      const wf = await startFlow();
      const [first] = await history(wf);
      await workflows.pause(wf);
      expect(await history(wf)).toEqual([first]);
      expect(first).toMatchObject({ state: 'scheduled', outcome: null });
    });

    it('keeps a delayed execution as it is: same row, same scheduledFor, nothing canceled', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      expect(second.scheduledFor.getTime()).toBeGreaterThan(Date.now() + HOUR);
      await workflows.pause(wf);
      const after = await history(wf);
      expect(after.filter((e) => e.stepName === 'second')).toEqual([second]);
      expect(after.every((e) => e.outcome === null || e.outcome === 'success')).toBe(true);
    });

    it('keeps an overdue execution scheduled', async () => {
      const wf = await startAtSecond();
      const overdue = await makeOverdue(await current(wf));
      await workflows.pause(wf);
      expect(await current(wf)).toEqual(overdue);
    });

    it('keeps an immediate next step scheduled', async () => {
      const wf = await startAtSecond();
      await app.gd.performNextStep(wf);
      const last = await current(wf);
      expect(last.stepName).toBe('lastStep');
      await workflows.pause(wf);
      expect(await current(wf)).toEqual(last);
    });

    it('pauses after a step ran', async () => {
      const wf = await startAtSecond();
      await workflows.pause(wf);
      await app.gd.assertWorkflowState(wf, 'paused');
      expect(await summary(wf)).toEqual([
        ['first', 'completed', 'success'],
        ['second', 'scheduled', null],
      ]);
    });
  });

  describe('resume', () => {
    it('resumes an externally paused workflow and the next step then runs', async () => {
      const wf = await startFlow();
      await workflows.pause(wf);
      await workflows.resume(wf);
      expect(wf.state).toBe('ready');
      expect(wf.transitionedAt).toBeNull();
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before', 'first:after']);
      expect(wf.nextStepName).toBe('second');
    });

    it('keeps the preserved row and its time when resumed before it is due, and enqueues it again for that time', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      await workflows.pause(wf);
      await workflows.resume(wf);
      const after = await current(wf);
      expect(after).toMatchObject({ id: second.id, state: 'scheduled', scheduledFor: second.scheduledFor });
      expect(await history(wf)).toHaveLength(2);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'second' });
      expect(app.gd.enqueuedJobs.at(-1)).toMatchObject({ executionId: second.id, runAt: second.scheduledFor });
    });

    it('keeps the preserved row when resumed after it became due, and enqueues it to run now', async () => {
      const wf = await startAtSecond();
      await workflows.pause(wf);
      const overdue = await makeOverdue(await current(wf), 2 * HOUR);
      await workflows.resume(wf);
      expect(wf.state).toBe('ready');
      expect(await current(wf)).toEqual(overdue);
      const job = app.gd.enqueuedJobs.at(-1)!;
      expect(job.executionId).toBe(overdue.id);
      expect(job.runAt.getTime()).toBeLessThanOrEqual(Date.now());
    });

    it('runs the overdue step after a late resume and schedules the next one', async () => {
      const wf = await startAtSecond();
      await workflows.pause(wf);
      const overdue = await makeOverdue(await current(wf), 2 * HOUR);
      await workflows.resume(wf);
      await executor.execute(overdue.id);
      expect(coreJournal).toEqual(['first:before', 'first:after', 'second:before', 'second:after']);
      const reloaded = await app.gd.reload(wf);
      expect(reloaded.nextStepName).toBe('lastStep');
      expect((await current(wf)).stepName).toBe('lastStep');
    });

    it('creates a new execution of the same step when the preserved row was canceled by hand', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      await workflows.pause(wf);
      await executions.update(second.id, { state: 'canceled', outcome: 'canceled', canceledAt: new Date() });
      await workflows.resume(wf);
      const fresh = await current(wf);
      expect(fresh).toMatchObject({ stepName: 'second', state: 'scheduled' });
      expect(fresh.id).not.toBe(second.id);
    });

    it('creates a new execution due now (the step’s own wait ignored) when the timer canceled the preserved row', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      await workflows.pause(wf);
      await executor.execute(second.id); // the job fires during the pause
      expect(await executions.findOneByOrFail({ id: second.id })).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      await workflows.resume(wf);
      const fresh = await current(wf);
      expect(fresh).toMatchObject({ stepName: 'second', state: 'scheduled' });
      expect(fresh.id).not.toBe(second.id);
      expect(fresh.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      expect(app.gd.enqueuedJobs.at(-1)?.executionId).toBe(fresh.id);
    });

    it('three pause/resume cycles leave exactly one execution of the step', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      for (let i = 0; i < 3; i++) {
        await workflows.pause(wf);
        await workflows.resume(wf);
      }
      const rows = (await history(wf)).filter((e) => e.stepName === 'second');
      expect(rows).toEqual([second]);
    });

    it('runs the remaining steps to finished after a pause and resume', async () => {
      const wf = await startAtSecond();
      await workflows.pause(wf);
      await workflows.resume(wf);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(coreJournal.filter((line) => line.endsWith(':after'))).toEqual(['first:after', 'second:after', 'lastStep:after']);
    });

    it('resumes a workflow paused by pause() in a step by running that step again', async () => {
      plan('first', 'pause');
      const wf = await startFlow();
      await app.gd.performNextStep(wf);
      corePlan.flow = {};
      await workflows.resume(wf);
      expect((await current(wf)).stepName).toBe('first');
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['first:before', 'first:before', 'first:after']);
      expect(wf.nextStepName).toBe('second');
    });

    it('two concurrent resumes: one wins, the other throws, and one execution is scheduled', async () => {
      plan('first', 'pause');
      const wf = await startFlow();
      await app.gd.performNextStep(wf);
      const results = await Promise.allSettled([workflows.resume(wf.id), workflows.resume(wf.id)]);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      expect(rejected?.reason).toBeInstanceOf(InvalidStateError);
      expect(await summary(wf)).toEqual([
        ['first', 'canceled', 'canceled'],
        ['first', 'scheduled', null],
      ]);
    });
  });

  describe('a failed step: resume and skip', () => {
    it('resume retries the failed step, which then succeeds', async () => {
      corePlan.failures.stepTwo = 1;
      const wf = await workflows.start(FlakyWorkflow, hero);
      await app.gd.performNextStep(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toBeInstanceOf(BoomError);
      expect(wf).toMatchObject({ state: 'paused', nextStepName: 'stepTwo' });
      const failed = (await history(wf)).at(-1)!;
      expect(failed).toMatchObject({ stepName: 'stepTwo', state: 'failed', outcome: 'failed' });
      expect(await workflows.currentExecution(wf)).toBeNull();

      await workflows.resume(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'stepTwo' });
      const retry = await current(wf);
      expect(retry).toMatchObject({ stepName: 'stepTwo', state: 'scheduled' });
      expect(retry.id).not.toBe(failed.id);

      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['stepOne', 'stepTwo', 'stepTwo']);
      expect((await history(wf)).filter((e) => e.stepName === 'stepTwo')).toHaveLength(2);
      expect(wf.nextStepName).toBe('stepThree');
    });

    it('skip on a failure-paused workflow moves on to the next step, which finishes it', async () => {
      corePlan.failures.stepTwo = 1;
      const wf = await workflows.start(FlakyWorkflow, hero);
      await app.gd.performNextStep(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('stepTwo failed');
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'stepThree' });
      expect(wf.transitionedAt).toBeNull();
      expect(await current(wf)).toMatchObject({ stepName: 'stepThree', state: 'scheduled' });
      await app.gd.performNextStep(wf);
      expect(wf.state).toBe('finished');
      expect(await summary(wf)).toEqual([
        ['stepOne', 'completed', 'success'],
        ['stepTwo', 'failed', 'failed'],
        ['stepThree', 'completed', 'success'],
      ]);
    });

    it('three failures with a resume between the first two, then skip: ready at stepThree, then finished', async () => {
      corePlan.failures.stepTwo = 3;
      const wf = await workflows.start(FlakyWorkflow, hero);
      await app.gd.performNextStep(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(BoomError);
      await workflows.resume(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(BoomError);
      await workflows.resume(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(BoomError);
      expect(wf.state).toBe('paused');
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'stepThree' });
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(coreJournal).toEqual(['stepOne', 'stepTwo', 'stepTwo', 'stepTwo', 'stepThree']);
    });
  });

  describe('external skip', () => {
    it('skips the scheduled step of a fresh workflow and schedules the next', async () => {
      const wf = await startFlow();
      const [first] = await history(wf);
      const before = Date.now();
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'second' });
      const skipped = await executions.findOneByOrFail({ id: first.id });
      expect(skipped).toMatchObject({ state: 'skipped', outcome: 'skipped' });
      expect(skipped.skippedAt).toBeInstanceOf(Date);
      expect(skipped.finishedAt).toBeInstanceOf(Date);
      const second = await current(wf);
      expect(second.stepName).toBe('second');
      expect(second.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 2 * HOUR - 1000);
      expect(app.gd.enqueuedJobs.at(-1)?.executionId).toBe(second.id);
      expect(coreJournal).toEqual([]);
    });

    it('finishes the workflow when the last step is skipped', async () => {
      const wf = await startAtSecond();
      await app.gd.performNextStep(wf);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(await workflows.currentExecution(wf)).toBeNull();
    });

    it('three skips walk two steps and then finish', async () => {
      const wf = await startFlow();
      await workflows.skip(wf);
      expect(wf.nextStepName).toBe('second');
      await workflows.skip(wf);
      expect(wf.nextStepName).toBe('lastStep');
      await workflows.skip(wf);
      expect(wf.state).toBe('finished');
      expect(await summary(wf)).toEqual([
        ['first', 'skipped', 'skipped'],
        ['second', 'skipped', 'skipped'],
        ['lastStep', 'skipped', 'skipped'],
      ]);
      expect(coreJournal).toEqual([]);
    });

    it('on an externally paused workflow: ready at the following step, the preserved row canceled', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      await workflows.pause(wf);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'lastStep' });
      expect(wf.transitionedAt).toBeNull();
      expect(await executions.findOneByOrFail({ id: second.id })).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      expect(await current(wf)).toMatchObject({ stepName: 'lastStep', state: 'scheduled' });
    });

    it('on a paused workflow whose preserved step is the last: finishes cleanly, no row left scheduled', async () => {
      const wf = await startAtSecond();
      await app.gd.performNextStep(wf);
      const last = await current(wf);
      await workflows.pause(wf);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'finished', nextStepName: null });
      expect(await workflows.currentExecution(wf)).toBeNull();
      expect(await executions.findOneByOrFail({ id: last.id })).toMatchObject({ state: 'canceled', outcome: 'canceled' });
    });
  });

  describe('external cancel', () => {
    it('cancels a fresh workflow and its immediate first execution', async () => {
      const wf = await startFlow();
      const [first] = await history(wf);
      await workflows.cancel(wf);
      expect(wf.state).toBe('canceled');
      expect(wf.transitionedAt).toBeInstanceOf(Date);
      expect(wf.finishedAt).toBeInstanceOf(Date);
      const row = await executions.findOneByOrFail({ id: first.id });
      expect(row).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      expect(row.canceledAt).toBeInstanceOf(Date);
      expect(row.finishedAt).toBeInstanceOf(Date); // SPEC §5: set on every terminal transition
    });

    it('cancels a delayed execution that is due in the future', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      expect(second.scheduledFor.getTime()).toBeGreaterThan(Date.now());
      await workflows.cancel(wf);
      await app.gd.assertWorkflowState(wf, 'canceled');
      const row = await executions.findOneByOrFail({ id: second.id });
      expect(row).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      expect(row.canceledAt).toBeInstanceOf(Date);
      expect(await workflows.currentExecution(wf)).toBeNull();
    });

    it('cancels an externally paused workflow and its preserved execution', async () => {
      const wf = await startAtSecond();
      const second = await current(wf);
      await workflows.pause(wf);
      const pausedAt = wf.transitionedAt!;
      await workflows.cancel(wf);
      expect(wf.state).toBe('canceled');
      expect(wf.transitionedAt!.getTime()).toBeGreaterThanOrEqual(pausedAt.getTime());
      expect(await executions.findOneByOrFail({ id: second.id })).toMatchObject({ state: 'canceled', outcome: 'canceled' });
    });

    it('cancels a workflow paused by a step failure', async () => {
      corePlan.failures.stepTwo = 1;
      const wf = await workflows.start(FlakyWorkflow, hero);
      await app.gd.performNextStep(wf);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(BoomError);
      await workflows.cancel(wf);
      expect(wf.state).toBe('canceled');
      expect((await history(wf)).at(-1)).toMatchObject({ stepName: 'stepTwo', state: 'failed' });
    });

    it('frees the slot: a new workflow for the same hero can start', async () => {
      const wf = await startFlow();
      await workflows.cancel(wf);
      const again = await startFlow();
      expect(again.id).not.toBe(wf.id);
      expect((await workflows.findOngoing(FlowWorkflow, hero))?.id).toBe(again.id);
    });
  });

  describe('operator actions in a state that does not allow them', () => {
    /** Workflows in each state, built the way the engine gets there. */
    const inState = {
      ready: () => startFlow(),
      paused: async () => {
        const wf = await startFlow();
        await workflows.pause(wf);
        return wf;
      },
      finished: async () => {
        const wf = await startFlow();
        await app.gd.speedrunWorkflow(wf);
        return wf;
      },
      canceled: async () => {
        const wf = await startFlow();
        await workflows.cancel(wf);
        return wf;
      },
    };
    const refused: Array<[OperatorAction, keyof typeof inState]> = [
      ['pause', 'paused'],
      ['pause', 'finished'],
      ['pause', 'canceled'],
      ['resume', 'ready'],
      ['resume', 'finished'],
      ['resume', 'canceled'],
      ['skip', 'finished'],
      ['skip', 'canceled'],
      ['cancel', 'finished'],
      ['cancel', 'canceled'],
    ];

    it.each(refused)('%s on a %s workflow throws InvalidStateError and changes nothing', async (action, state) => {
      const wf = await inState[state]();
      expect(wf.state).toBe(state);
      const before = await snapshot(wf);
      const error = await rejection(operate(action, wf.id));
      expect(error).toBeInstanceOf(InvalidStateError);
      expect(error).toMatchObject({ action, state, workflowId: wf.id });
      expect((error as Error).message).toBe(`Cannot ${action} a ${state} workflow (workflow ${wf.id})`);
      expect(await snapshot(wf)).toEqual(before);
    });

    it('pause, resume, skip and cancel on a performing workflow throw and change nothing; the step then completes', async () => {
      const wf = await startFlow();
      const errors: unknown[] = [];
      let during: { before: unknown; after: unknown } | undefined;
      corePlan.duringBody = async (instance) => {
        const id = instance.record.id;
        const before = await snapshot(id);
        for (const action of OPERATOR_ACTIONS) errors.push(await rejection(operate(action, id)));
        during = { before, after: await snapshot(id) };
      };
      await app.gd.performNextStep(wf);

      expect(errors).toHaveLength(4);
      errors.forEach((error, i) => {
        expect(error).toBeInstanceOf(InvalidStateError);
        expect(error).toMatchObject({ action: OPERATOR_ACTIONS[i], state: 'performing' });
      });
      expect(during!.after).toEqual(during!.before);
      expect((during!.before as { workflow: WorkflowRecord }).workflow.state).toBe('performing');
      expect(coreJournal).toEqual(['first:before', 'first:after']);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'second' });
      expect(await summary(wf)).toEqual([
        ['first', 'completed', 'success'],
        ['second', 'scheduled', null],
      ]);
    });

    it('flow control outside a step is refused', () => {
      const wf = new FlowWorkflow();
      expect(() => wf.pause()).toThrow(/only available while a step runs/);
      expect(() => wf.finished()).toThrow(/only available while a step runs/);
    });
  });
});
