/**
 * The executor and the workflow model (upstream executor_test.rb and workflow_test.rb, adapted):
 * completion and scheduling, preconditions, the hero, missing definitions, late and duplicate jobs,
 * exceptions, fresh instances, hooks, ordering, programmatic steps.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { LoggerService } from '@nestjs/common';
import type { Repository } from 'typeorm';
import {
  ExecutorService,
  HeroTypeNotFoundError,
  InvalidHeroError,
  StepExecution,
  StepNotDefinedError,
  WorkflowRecord,
  WorkflowAlreadyOngoingError,
  WorkflowService,
} from 'geneva-drive';
import { WorkflowRegistry } from '../../libs/geneva-drive/src/registry/workflow.registry.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  BoomError,
  CancelIfWorkflow,
  CancelPolicyWorkflow,
  ChildWorkflow,
  coreJournal,
  corePlan,
  CountingWorkflow,
  DefaultPolicyWorkflow,
  EmptyWorkflow,
  HeroOptionalWorkflow,
  HookedWorkflow,
  InstanceWorkflow,
  LadderWorkflow,
  LinearWorkflow,
  LoggingWorkflow,
  OrderedWorkflow,
  ParentWorkflow,
  resetCore,
  SkipIfWorkflow,
  SkipPolicyWorkflow,
} from '../src/core-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero, UuidHero } from '../utils/fixtures.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Collects every line the engine logs. */
const logLines: string[] = [];
const capturingLogger: LoggerService = {
  log: (message) => void logLines.push(String(message)),
  error: (message) => void logLines.push(String(message)),
  warn: (message) => void logLines.push(String(message)),
  debug: () => undefined,
  verbose: () => undefined,
};

describeEachDatabase('executor', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let heroes: Repository<TestHero>;
  let executions: Repository<StepExecution>;
  let records: Repository<WorkflowRecord>;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(
      kind,
      [
        LinearWorkflow,
        SkipIfWorkflow,
        CancelIfWorkflow,
        HeroOptionalWorkflow,
        DefaultPolicyWorkflow,
        SkipPolicyWorkflow,
        CancelPolicyWorkflow,
        CountingWorkflow,
        InstanceWorkflow,
        OrderedWorkflow,
        EmptyWorkflow,
        LadderWorkflow,
        HookedWorkflow,
        LoggingWorkflow,
        ParentWorkflow,
        ChildWorkflow,
      ],
      { logger: capturingLogger },
    );
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
    heroes = app.dataSource.getRepository(TestHero);
    executions = app.dataSource.getRepository(StepExecution);
    records = app.dataSource.getRepository(WorkflowRecord);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetCore();
    logLines.length = 0;
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const summary = async (wf: WorkflowRecord) => (await history(wf)).map((e) => [e.stepName, e.state, e.outcome]);
  const jobIds = () => app.gd.enqueuedJobs.map((job) => job.executionId);
  const heroNamed = (name: string, extra: Partial<TestHero> = {}) => heroes.save(heroes.create({ name, ...extra }));

  describe('completion and scheduling', () => {
    it('completes the first step and schedules the second after its wait', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      const [first] = await history(wf);
      const before = Date.now();
      const ran = await app.gd.performNextStep(wf);

      expect(coreJournal).toEqual(['first:Ada']);
      expect(ran).toMatchObject({ id: first.id, state: 'completed', outcome: 'success' });
      expect(wf).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'second' });
      const rows = await history(wf);
      expect(rows).toHaveLength(2);
      expect(rows[1]).toMatchObject({ stepName: 'second', state: 'scheduled', outcome: null, startedAt: null });
      expect(rows[1].scheduledFor.getTime()).toBeGreaterThanOrEqual(before + DAY - 1000);
      expect(rows[1].scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + DAY + 1000);
      expect(jobIds()).toEqual([first.id, rows[1].id]);
      expect(app.gd.enqueuedJobs[1].runAt.getTime()).toBe(rows[1].scheduledFor.getTime());
    });

    it('starts ready, pointing at the first step, which is due about now', async () => {
      const before = Date.now();
      const wf = await workflows.start(LinearWorkflow, hero);
      expect(wf).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'first', startedAt: null, finishedAt: null });
      expect(await app.gd.reload(wf)).toEqual(wf);
      const [first] = await history(wf);
      expect(first.scheduledFor.getTime()).toBeGreaterThanOrEqual(before - 1000);
      expect(first.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    });

    it('stamps startedAt, completedAt and finishedAt on a completed execution', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      const ran = await app.gd.performNextStep(wf);
      expect(ran!.startedAt).toBeInstanceOf(Date);
      expect(ran!.completedAt).toBeInstanceOf(Date);
      expect(ran!.finishedAt).toBeInstanceOf(Date);
      expect(Math.abs(ran!.finishedAt!.getTime() - ran!.completedAt!.getTime())).toBeLessThanOrEqual(100);
      expect(ran!.failedAt).toBeNull();
      expect(wf.startedAt).toBeInstanceOf(Date);
    });

    it('finishes after the last step with both step names cleared', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      await app.gd.speedrunWorkflow(wf);
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(wf.finishedAt).toBeInstanceOf(Date);
      expect(wf.transitionedAt).toBeInstanceOf(Date);
      expect(coreJournal).toEqual(['first:Ada', 'second', 'third']);
      expect(await summary(wf)).toEqual([
        ['first', 'completed', 'success'],
        ['second', 'completed', 'success'],
        ['third', 'completed', 'success'],
      ]);
    });

    it('allows one ongoing workflow of a class per hero, unless allowMultiple', async () => {
      const first = await workflows.start(LinearWorkflow, hero);
      await workflows.pause(first); // a paused workflow holds the slot too
      const error = await workflows.start(LinearWorkflow, hero).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(WorkflowAlreadyOngoingError);
      expect((error as WorkflowAlreadyOngoingError).heroId).toBe(String(hero.id));
      expect(await records.count()).toBe(1);
      expect(await executions.count()).toBe(1);
      expect(app.gd.enqueuedJobs).toHaveLength(1);

      await workflows.start(LinearWorkflow, hero, { allowMultiple: true });
      await workflows.start(CountingWorkflow, hero);
      await workflows.cancel(first);
      await workflows.start(LinearWorkflow, hero);
      expect(await records.count()).toBe(4);
    });

    it('lists workflows by state and finds the ongoing one for a hero', async () => {
      const ready = await workflows.start(LinearWorkflow, hero);
      const done = await workflows.start(LinearWorkflow, hero, { allowMultiple: true });
      await app.gd.speedrunWorkflow(done);
      expect((await workflows.findByState('ready')).map((w) => w.id)).toEqual([ready.id]);
      expect((await workflows.findByState('ongoing')).map((w) => w.id)).toEqual([ready.id]);
      expect((await workflows.findByState('finished')).map((w) => w.id)).toEqual([done.id]);
      expect((await workflows.findOngoing(LinearWorkflow, hero))?.id).toBe(ready.id);
      expect((await workflows.find(done.id)).state).toBe('finished');
    });
  });

  describe('skipIf', () => {
    it('skips a step whose skipIf function is true, without running it, and schedules the next', async () => {
      const wf = await workflows.start(SkipIfWorkflow, await heroNamed('skip-by-function'));
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([]);
      expect(ran).toMatchObject({ stepName: 'byFunction', state: 'skipped', outcome: 'skipped', startedAt: null });
      expect(ran!.skippedAt).toBeInstanceOf(Date);
      expect(ran!.finishedAt).toBeInstanceOf(Date);
      expect(wf).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'byMethod' });
      expect((await workflows.currentExecution(wf))).toMatchObject({ stepName: 'byMethod', state: 'scheduled' });
    });

    it('skips a step whose skipIf method returns true', async () => {
      const wf = await workflows.start(SkipIfWorkflow, await heroNamed('inactive', { active: false }));
      await app.gd.performNextStep(wf);
      const skipped = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['byFunction']);
      expect(skipped).toMatchObject({ stepName: 'byMethod', state: 'skipped', outcome: 'skipped' });
      expect(wf.nextStepName).toBe('always');
    });

    it('skipIf: true always skips, skipIf: false never does, and the next step keeps its own wait', async () => {
      const wf = await workflows.start(SkipIfWorkflow, hero);
      await app.gd.performNextStep(wf); // byFunction
      await app.gd.performNextStep(wf); // byMethod
      const before = Date.now();
      const always = await app.gd.performNextStep(wf);
      expect(always).toMatchObject({ stepName: 'always', state: 'skipped' });
      const never = await workflows.currentExecution(wf);
      expect(never?.stepName).toBe('never');
      expect(never!.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 3 * HOUR - 1000);
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['byFunction', 'byMethod', 'never']);
      expect(wf.nextStepName).toBe('last');
    });

    it('finishes the workflow when the last step is skipped', async () => {
      const wf = await workflows.start(SkipIfWorkflow, await heroNamed('skip-last'));
      await app.gd.speedrunWorkflow(wf);
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(coreJournal).toEqual(['byFunction', 'byMethod', 'never']);
      expect((await summary(wf)).at(-1)).toEqual(['last', 'skipped', 'skipped']);
      expect(await workflows.currentExecution(wf)).toBeNull();
    });
  });

  describe('cancelIf', () => {
    it('cancels the workflow without running the body when a cancelIf function is true', async () => {
      const canceledHero = await heroNamed('gone', { canceled: true });
      const wf = await workflows.start(CancelIfWorkflow, canceledHero);
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([]);
      expect(ran).toMatchObject({ state: 'canceled', outcome: 'canceled', startedAt: null });
      expect(ran!.canceledAt).toBeInstanceOf(Date);
      expect(wf.state).toBe('canceled');
      expect(wf.finishedAt).toBeInstanceOf(Date);
      expect(await history(wf)).toHaveLength(1);
      expect(app.gd.enqueuedJobs).toHaveLength(1);
    });

    it('cancels when a cancelIf method name returns true', async () => {
      const wf = await workflows.start(CancelIfWorkflow, await heroNamed('inactive', { active: false }));
      await app.gd.performNextStep(wf);
      expect(wf.state).toBe('canceled');
      expect(coreJournal).toEqual([]);
    });

    it('evaluates cancelIf again before every step', async () => {
      const wf = await workflows.start(CancelIfWorkflow, hero);
      await app.gd.performNextStep(wf);
      await heroes.update(hero.id, { canceled: true });
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['one']);
      expect(await summary(wf)).toEqual([
        ['one', 'completed', 'success'],
        ['two', 'canceled', 'canceled'],
      ]);
      expect(wf.state).toBe('canceled');
    });
  });

  describe('the hero', () => {
    it('cancels the workflow when the hero row is gone', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      await heroes.delete(hero.id);
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([]);
      expect(ran).toMatchObject({ state: 'canceled', outcome: 'canceled', errorMessage: null });
      expect(wf.state).toBe('canceled');
    });

    it('with mayProceedWithoutHero runs the step with a null hero', async () => {
      const wf = await workflows.start(HeroOptionalWorkflow, hero);
      await heroes.delete(hero.id);
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['hero:null']);
      expect(ran).toMatchObject({ state: 'completed', outcome: 'success' });
      expect(wf.state).toBe('finished');
    });

    it('with mayProceedWithoutHero still loads the hero while it exists', async () => {
      const wf = await workflows.start(HeroOptionalWorkflow, hero);
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['hero:Ada']);
    });
  });

  describe('missing definitions', () => {
    it('a step that is not defined here decides nothing: the execution and the workflow stay as they were, and StepNotDefinedError leaves the job to another process', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      const [first] = await history(wf);
      await executions.update(first.id, { stepName: 'removedStep' });

      const error = await executor.execute(first.id).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(StepNotDefinedError);
      expect(error).toMatchObject({ stepName: 'removedStep', workflowId: wf.id, executionId: first.id, workflowType: 'LinearWorkflow', missing: 'step' });
      expect((error as Error).message).toMatch(/removedStep.*not defined.*left to a process that has the step/);

      const row = await executions.findOneByOrFail({ id: first.id });
      expect(row).toMatchObject({ state: 'scheduled', outcome: null, jobId: null, errorMessage: null, failedAt: null, startedAt: null });
      await app.gd.assertWorkflowState(wf, 'ready');
      expect(coreJournal).toEqual([]);

      // The job's hints (what a queue hands over) are enough to refuse it before any read; the rows stay as they were.
      const hinted = await executor.execute(first.id, { jobId: 'job-1', hints: { workflowId: wf.id, workflowType: 'LinearWorkflow', stepName: 'removedStep' } }).then(() => null, (e: unknown) => e);
      expect(hinted).toBeInstanceOf(StepNotDefinedError);
      expect(await executions.findOneByOrFail({ id: first.id })).toMatchObject({ state: 'scheduled', jobId: null });
    });

    it('a workflow whose type is not registered here is left as it was, with StepNotDefinedError naming the missing class', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      await records.update(wf.id, { type: 'VanishedWorkflow' });
      await expect(app.gd.performNextStep(wf)).rejects.toMatchObject({ name: 'StepNotDefinedError', missing: 'class', workflowType: 'VanishedWorkflow', stepName: 'first' });
      expect(await workflows.find(wf.id)).toMatchObject({ type: 'VanishedWorkflow', state: 'ready' });
      expect(await summary(wf)).toEqual([['first', 'scheduled', null]]);
      expect(coreJournal).toEqual([]);
    });

    it('a job for a paused workflow of a class not registered here does not even cancel the kept execution', async () => {
      const wf = await workflows.start(LinearWorkflow, hero);
      await workflows.pause(wf);
      await records.update(wf.id, { type: 'VanishedWorkflow' });
      const [first] = await history(wf);
      await expect(executor.execute(first.id)).rejects.toThrow(StepNotDefinedError);
      expect(await summary(wf)).toEqual([['first', 'scheduled', null]]);
      expect(await workflows.find(wf.id)).toMatchObject({ state: 'paused' });
    });

    it('a hero type that is no longer an entity fails the execution with the error recorded and pauses', async () => {
      const wf = await workflows.start(DefaultPolicyWorkflow, hero);
      await records.update(wf.id, { heroType: 'MissingEntity' });
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(HeroTypeNotFoundError);
      const [row] = await history(wf);
      expect(row).toMatchObject({ state: 'failed', outcome: 'failed', errorClassName: 'HeroTypeNotFoundError' });
      expect(row.errorMessage).toContain('MissingEntity');
      expect(row.errorBacktrace).toEqual(expect.any(String));
      expect(row.errorBacktrace!.length).toBeGreaterThan(0);
      expect(wf.state).toBe('paused');
      expect(coreJournal).toEqual([]);
    });

    it('... under a skip policy moves on to the next step', async () => {
      const wf = await workflows.start(SkipPolicyWorkflow, hero);
      await records.update(wf.id, { heroType: 'MissingEntity' });
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(HeroTypeNotFoundError);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'after' });
      expect(await summary(wf)).toEqual([
        ['explode', 'failed', 'failed'],
        ['after', 'scheduled', null],
      ]);
    });

    it('... under a cancel policy cancels the workflow', async () => {
      const wf = await workflows.start(CancelPolicyWorkflow, hero);
      await records.update(wf.id, { heroType: 'MissingEntity' });
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(HeroTypeNotFoundError);
      expect(wf.state).toBe('canceled');
      expect(await summary(wf)).toEqual([['explode', 'failed', 'failed']]);
    });
  });

  describe('late and duplicate jobs', () => {
    it('a job for a completed execution is a no-op', async () => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await executor.execute(first.id);
      const before = await executions.findOneByOrFail({ id: first.id });
      await executor.execute(first.id);
      expect(corePlan.bodyRuns).toBe(1);
      expect(await executions.findOneByOrFail({ id: first.id })).toEqual(before);
      expect(await history(wf)).toHaveLength(2);
    });

    it.each(['canceled', 'in_progress'] as const)('a job for a %s execution is a no-op', async (state) => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await executions.update(first.id, { state });
      const before = await executions.findOneByOrFail({ id: first.id });
      const workflowBefore = await app.gd.reload(wf);
      await executor.execute(first.id);
      expect(corePlan.bodyRuns).toBe(0);
      expect(await executions.findOneByOrFail({ id: first.id })).toEqual(before);
      expect(await app.gd.reload(wf)).toEqual(workflowBefore);
    });

    it('a job for an execution that does not exist is ignored', async () => {
      await expect(executor.execute('987654321')).resolves.toBeUndefined();
    });

    it('a job that arrives while the workflow is paused cancels its execution and leaves the workflow paused', async () => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await workflows.pause(wf);
      await executor.execute(first.id);
      expect(corePlan.bodyRuns).toBe(0);
      const row = await executions.findOneByOrFail({ id: first.id });
      expect(row).toMatchObject({ state: 'canceled', outcome: 'canceled', startedAt: null });
      expect(row.canceledAt).toBeInstanceOf(Date);
      expect(row.finishedAt).toBeInstanceOf(Date);
      await app.gd.assertWorkflowState(wf, 'paused');
      expect(await history(wf)).toHaveLength(1);
    });

    it.each(['finished', 'canceled'] as const)('a job for a stray execution of a %s workflow cancels it', async (state) => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await records.update(wf.id, { state });
      await executor.execute(first.id);
      expect(corePlan.bodyRuns).toBe(0);
      expect(await executions.findOneByOrFail({ id: first.id })).toMatchObject({ state: 'canceled', outcome: 'canceled' });
      await app.gd.assertWorkflowState(wf, state);
    });

    it('a job delivered twice runs the body once', async () => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await executor.execute(first.id);
      await executor.execute(first.id);
      expect(corePlan.bodyRuns).toBe(1);
      expect(await summary(wf)).toEqual([
        ['count', 'completed', 'success'],
        ['done', 'scheduled', null],
      ]);
    });

    it('a job delivered twice at the same time runs the body once', async () => {
      const wf = await workflows.start(CountingWorkflow, hero);
      const [first] = await history(wf);
      await Promise.all([executor.execute(first.id), executor.execute(first.id), executor.execute(first.id)]);
      expect(corePlan.bodyRuns).toBe(1);
      expect(await summary(wf)).toEqual([
        ['count', 'completed', 'success'],
        ['done', 'scheduled', null],
      ]);
      await app.gd.assertWorkflowState(wf, 'ready');
    });
  });

  describe('exceptions', () => {
    it('by default pauses the workflow, records the error and rethrows the original error', async () => {
      const wf = await workflows.start(DefaultPolicyWorkflow, hero);
      const [first] = await history(wf);
      const error = await executor.execute(first.id).then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(BoomError);
      expect((error as Error).message).toBe('boom from DefaultPolicyWorkflow');

      const row = await executions.findOneByOrFail({ id: first.id });
      expect(row).toMatchObject({
        state: 'failed',
        outcome: 'failed',
        errorClassName: 'BoomError',
        errorMessage: 'boom from DefaultPolicyWorkflow',
      });
      expect(row.errorBacktrace).toContain('core-workflows');
      expect(row.failedAt).toBeInstanceOf(Date);
      expect(row.finishedAt).toBeInstanceOf(Date);
      expect(row.startedAt).toBeInstanceOf(Date);
      const record = await app.gd.reload(wf);
      expect(record).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'explode' });
      expect(record.transitionedAt).toBeInstanceOf(Date);
      expect(coreJournal).toEqual(['DefaultPolicyWorkflow:explode']);
      expect(await history(wf)).toHaveLength(1);
    });

    it("under 'skip' skips the step without recording the error, moves on, and rethrows", async () => {
      const wf = await workflows.start(SkipPolicyWorkflow, hero);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('boom from SkipPolicyWorkflow');
      const [row] = await history(wf);
      expect(row).toMatchObject({ state: 'skipped', outcome: 'skipped', errorMessage: null });
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'after' });
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual(['SkipPolicyWorkflow:explode', 'SkipPolicyWorkflow:after']);
      expect(wf.state).toBe('finished');
    });

    it("under 'cancel' fails the execution as canceled and cancels the workflow, and rethrows", async () => {
      const wf = await workflows.start(CancelPolicyWorkflow, hero);
      await expect(app.gd.performNextStep(wf)).rejects.toBeInstanceOf(BoomError);
      const [row] = await history(wf);
      expect(row).toMatchObject({ state: 'failed', outcome: 'canceled', errorClassName: 'BoomError' });
      expect(wf.state).toBe('canceled');
      expect(await history(wf)).toHaveLength(1);
    });
  });

  describe('instances, hooks and logging', () => {
    it('runs every execution on a fresh workflow instance', async () => {
      const wf = await workflows.start(InstanceWorkflow, hero);
      await app.gd.speedrunWorkflow(wf);
      expect(coreJournal).toHaveLength(2);
      const [remember, recall] = coreJournal.map((line) => line.split(':'));
      expect(remember).toEqual(['remember', expect.any(String), 'undefined']);
      expect(recall).toEqual(['recall', expect.any(String), 'undefined']);
      expect(recall[1]).not.toBe(remember[1]);
    });

    it('runs the hooks around the body with the execution, and ignores the around hook’s return value', async () => {
      const wf = await workflows.start(HookedWorkflow, hero);
      const [only] = await history(wf);
      const ran = await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([`before:${only.id}`, `around-enter:${only.id}`, 'body', 'around-exit', `after:${only.id}`]);
      expect(ran).toMatchObject({ state: 'completed', outcome: 'success' });
      expect(wf.state).toBe('finished');
    });

    it('gives step code a logger whose lines carry the workflow and execution', async () => {
      const wf = await workflows.start(LoggingWorkflow, hero);
      const [speak] = await history(wf);
      await app.gd.performNextStep(wf);
      const line = logLines.find((l) => l.includes('hello from step code'));
      expect(line).toBeDefined();
      expect(line).toContain(`LoggingWorkflow id=${wf.id}`);
      expect(line).toContain(`hero_type=TestHero hero_id=${hero.id}`);
      expect(line).toContain(`execution_id=${speak.id}`);
      expect(line).toContain('step_name=speak');
    });
  });

  describe('step definitions', () => {
    it('orders positioned steps and starts at the first step of that order', async () => {
      const wf = await workflows.start(OrderedWorkflow, hero);
      expect(wf.nextStepName).toBe('gamma');
      expect((await history(wf))[0].stepName).toBe('gamma');
      await app.gd.speedrunWorkflow(wf);
      expect(coreJournal).toEqual(['gamma', 'alpha', 'epsilon', 'delta', 'zeta', 'beta']);
      expect((await history(wf)).map((e) => e.stepName)).toEqual(coreJournal);
      expect(wf.state).toBe('finished');
    });

    it('finishes a workflow without steps at start', async () => {
      const wf = await workflows.start(EmptyWorkflow, hero);
      expect(wf).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(wf.finishedAt).toBeInstanceOf(Date);
      expect(wf.transitionedAt).toBeInstanceOf(Date);
      expect(await history(wf)).toEqual([]);
      expect(app.gd.enqueuedJobs).toHaveLength(0);
      await app.gd.assertWorkflowState(wf, 'finished');
    });

    it('names anonymous programmatic steps without colliding with explicit names, and runs them in order', async () => {
      const definition = app.moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(LadderWorkflow);
      expect(definition.stepNames).toEqual(['step_2', 'step_3', 'step_5', 'step_6', 'step_4']);
      expect(new Set(definition.stepNames).size).toBe(5);
      expect(definition.steps.map((s) => s.waitMs)).toEqual([undefined, 60_000, 300_000, HOUR, undefined]);

      const wf = await workflows.start(LadderWorkflow, hero);
      await app.gd.speedrunWorkflow(wf);
      expect(coreJournal).toEqual(['kickOff', 'poll:1m', 'poll:5m', 'poll:1h', 'poll:explicit']);
      expect((await history(wf)).map((e) => e.stepName)).toEqual(definition.stepNames);
    });

    it('a child workflow inherits the parent’s steps, cancelIf, job options and hero, without changing the parent', async () => {
      const registry = app.moduleRef.get(WorkflowRegistry, { strict: false });
      expect(registry.getByClass(ChildWorkflow).stepNames).toEqual(['childFirst', 'parentStep', 'childStep']);
      expect(registry.getByClass(ParentWorkflow).stepNames).toEqual(['parentStep']);
      expect(registry.getByClass(ChildWorkflow).cancelIf).toHaveLength(2);
      expect(registry.getByClass(ParentWorkflow).cancelIf).toHaveLength(1);

      const child = await workflows.start(ChildWorkflow, hero);
      const parent = await workflows.start(ParentWorkflow, hero);
      expect(app.gd.enqueuedJobs.map((job) => job.jobOptions)).toEqual([{ priority: 5, lifo: true }, { priority: 5 }]);
      await app.gd.speedrunWorkflow(child);
      expect(coreJournal).toEqual(['childFirst', 'parentStep', 'childStep']);

      // The child's own cancelIf (a method name) cancels the child only; the parent's applies to both.
      const inactive = await heroNamed('inactive', { active: false });
      const inactiveChild = await workflows.start(ChildWorkflow, inactive);
      const inactiveParent = await workflows.start(ParentWorkflow, inactive);
      await app.gd.performNextStep(inactiveChild);
      await app.gd.performNextStep(inactiveParent);
      expect([inactiveChild.state, inactiveParent.state]).toEqual(['canceled', 'finished']);
      await heroes.update(hero.id, { canceled: true });
      await app.gd.performNextStep(parent);
      expect(parent.state).toBe('canceled');

      await expect(workflows.start(ChildWorkflow, new UuidHero())).rejects.toThrow(InvalidHeroError);
    });

    it('records where each step was declared', () => {
      const definition = app.moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(LadderWorkflow);
      const fixturePath = fileURLToPath(new URL('../src/core-workflows.ts', import.meta.url));
      const lines = readFileSync(fixturePath, 'utf8').split('\n');
      const lineOf = (location: string | undefined) => {
        const match = /^(.*):(\d+)$/.exec(location ?? '');
        expect(match).not.toBeNull();
        expect(match![1]).toBe(fixturePath);
        return lines[Number(match![2]) - 1];
      };
      expect(lineOf(definition.step('step_2')!.sourceLocation)).toContain('source-location: ladder method step');
      for (const name of ['step_3', 'step_5', 'step_6']) {
        expect(lineOf(definition.step(name)!.sourceLocation)).toContain('source-location: ladder addStep');
      }
      expect(lineOf(definition.step('step_4')!.sourceLocation)).toContain("addStep(LadderWorkflow, { name: 'step_4'");
    });
  });
});
