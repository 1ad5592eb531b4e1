/**
 * Resumable steps, ported from upstream's resumable_step_test.rb (reference A.14: numbered "A.14 #n"
 * below) plus the port's own rules: outcome `continued` for interrupted executions (SPEC §5),
 * `maxIterations` enforced, only SQL NULL meaning "no cursor".
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  ExecutorService,
  GenevaDriveModule,
  GenevaWorkflow,
  ResumableStep,
  StepConfigurationError,
  StepIteration,
  Workflow,
  WorkflowService,
  type StepExecution,
} from 'geneva-drive';
import { WorkflowRegistry } from '../../libs/geneva-drive/src/registry/workflow.registry.js';
import { createTestApp, engineLogger, type TestApp } from '../src/test-app.js';
import {
  AdvanceMisuseWorkflow,
  AdvanceWorkflow,
  ArrayWalkWorkflow,
  CancelingWalkWorkflow,
  CounterWorkflow,
  CursorEchoWorkflow,
  FailingWalkWorkflow,
  HandOnWorkflow,
  PauseCounterWorkflow,
  PausingWalkWorkflow,
  RewindWorkflow,
  seen,
  SkipToWorkflow,
  StandardOptionsWorkflow,
  TenItemsWorkflow,
} from '../src/resumable-workflows.js';
import { dataSourceOptions, describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const WORKFLOWS = [
  ArrayWalkWorkflow,
  PausingWalkWorkflow,
  FailingWalkWorkflow,
  SkipToWorkflow,
  TenItemsWorkflow,
  CounterWorkflow,
  AdvanceWorkflow,
  AdvanceMisuseWorkflow,
  CancelingWalkWorkflow,
  PauseCounterWorkflow,
  RewindWorkflow,
  HandOnWorkflow,
  CursorEchoWorkflow,
  StandardOptionsWorkflow,
];

describeEachDatabase('resumable steps', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let hero: TestHero;
  const chain = async (workflowId: string, step: string) =>
    (await workflows.executionHistory(workflowId)).filter((e: StepExecution) => e.stepName === step);
  /** Runs executions as the queue would (interruptible), until the workflow has none left. */
  const runAsQueue = async (workflowId: string, limit = 50) => {
    for (let runs = 0; runs < limit; runs++) {
      const current = await workflows.currentExecution(workflowId);
      if (!current) return runs;
      await executor.execute(current.id);
    }
    throw new Error(`still running after ${limit} executions`);
  };

  beforeAll(async () => {
    app = await createTestApp(kind, WORKFLOWS);
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    seen.length = 0;
    FailingWalkWorkflow.failOn = 'c';
    SkipToWorkflow.resumedLog = [];
    CounterWorkflow.resumedLog = [];
    AdvanceMisuseWorkflow.seed = undefined;
    CursorEchoWorkflow.value = null;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'r' }));
  });

  it('A.14 #1: walks every item once and goes on to the next step', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e', 'after']);
    expect(wf.state).toBe('finished');
    await app.gd.assertStepExecuted(wf, 'before');
    await app.gd.assertStepExecuted(wf, 'after');
    const [walk] = await chain(wf.id, 'walk');
    expect([walk.state, walk.outcome, walk.cursor]).toEqual(['completed', 'success', 5]);
  });

  it('A.14 #2: performNextStep runs the setup step, speedrunCurrentStep finishes the resumable one and stops there', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    const last = await app.gd.speedrunCurrentStep(wf);
    expect(last).toMatchObject({ stepName: 'walk', state: 'completed', outcome: 'success' });
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e']);
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'ready', nextStepName: 'after' });
  });

  it('interrupted after N checkpoints, continues in a successor from the persisted cursor', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    const first = await app.gd.runIterations(wf, 2);
    expect([first!.state, first!.outcome, first!.cursor]).toEqual(['completed', 'continued', 2]);
    await app.gd.assertCursor(wf, 2);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ stepName: 'walk', state: 'scheduled', continuesFromId: first!.id });
    expect((await workflows.find(wf.id)).nextStepName).toBe('walk');
    const last = await app.gd.speedrunCurrentStep(wf);
    expect([last!.state, last!.outcome]).toEqual(['completed', 'success']);
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e']);
    expect((await workflows.find(wf.id)).nextStepName).toBe('after');
  });

  it('A.14 #3: a set()-driven counter sees 1..5 and the workflow finishes', async () => {
    const wf = await workflows.start(CounterWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(wf.state).toBe('finished');
    const [count] = await chain(wf.id, 'count');
    expect(count.cursor).toBe(6);
  });

  it('A.14 #4: advance() after set(0) increments the cursor: 0..4', async () => {
    const wf = await workflows.start(AdvanceWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([0, 1, 2, 3, 4]);
    expect(wf.state).toBe('finished');
  });

  it.each([
    ['a string cursor', 'abc', /advance\(\) needs an integer cursor, got "abc"/],
    ['a fractional cursor', 1.5, /advance\(\) needs an integer cursor, got 1\.5/],
    ['no cursor yet (null)', undefined, /advance\(\) needs an integer cursor, got null: seed it with set\(0\)/],
  ])('A.14 #5: advance() refuses %s: the step fails and the workflow pauses', async (_label, seed, message) => {
    AdvanceMisuseWorkflow.seed = seed;
    const wf = await workflows.start(AdvanceMisuseWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow(message);
    expect(seen).toEqual([]);
    const [count] = await chain(wf.id, 'count');
    expect(count).toMatchObject({ state: 'failed', outcome: 'failed' });
    expect(count.errorMessage).toMatch(message);
    expect(wf.state).toBe('paused');
  });

  it('A.14 #6: skipTo persists the value and always hands on, after its wait', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    const before = Date.now();
    const first = await app.gd.performNextStep(wf);
    expect([first!.state, first!.outcome, first!.cursor]).toEqual(['completed', 'continued', 5]);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ state: 'scheduled', cursor: 5, continuesFromId: first!.id });
    expect(successor!.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 3600_000 - 1000);
    expect(seen).toEqual([1, 2]);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 5, 6]);
    expect(wf.state).toBe('finished');
  });

  it('A.14 #7: maxIterations is enforced: 10 items at 3 checkpoints per execution make a chain of 4', async () => {
    const wf = await workflows.start(TenItemsWorkflow, hero);
    await runAsQueue(wf.id);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 'after']);
    const walks = await chain(wf.id, 'walk');
    expect(walks.map((e) => [e.outcome, e.cursor])).toEqual([
      ['continued', 3],
      ['continued', 6],
      ['continued', 9],
      ['success', 10],
    ]);
    expect(walks.map((e) => e.continuesFromId)).toEqual([null, walks[0].id, walks[1].id, walks[2].id]);
    expect((await workflows.find(wf.id)).state).toBe('finished');
  });

  it('A.14 #7 (helpers): speedrunCurrentStep runs the same step to its end without interruptions, in one execution', async () => {
    const wf = await workflows.start(TenItemsWorkflow, hero);
    const last = await app.gd.speedrunCurrentStep(wf);
    expect([last!.outcome, last!.cursor]).toEqual(['success', 10]);
    expect(await chain(wf.id, 'walk')).toHaveLength(1);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('A.14 #8: cancel() inside cancels the workflow after items 1-3; the next step never runs', async () => {
    const wf = await workflows.start(CancelingWalkWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 3]);
    expect(wf.state).toBe('canceled');
    const walks = await chain(wf.id, 'walk');
    expect(walks.map((e) => [e.state, e.outcome])).toEqual([['canceled', 'canceled']]);
    expect(await workflows.currentExecution(wf)).toBeNull();
  });

  it('A.14 #9: pause() after set(4) keeps cursor 4; resume continues from it with no item repeated, then the next step', async () => {
    const wf = await workflows.start(PauseCounterWorkflow, hero);
    await app.gd.performNextStep(wf);
    expect(wf.state).toBe('paused');
    const [paused] = await chain(wf.id, 'count');
    expect([paused.state, paused.outcome, paused.cursor]).toEqual(['completed', 'continued', 4]);
    await workflows.resume(wf);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ stepName: 'count', state: 'scheduled', cursor: 4, continuesFromId: paused.id });
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 3, 4, 5, 'after']);
    expect(wf.state).toBe('finished');
  });

  it('pause() in an array walk keeps the cursor and resume continues from it (the item before the checkpoint runs again: at-least-once)', async () => {
    const wf = await workflows.start(PausingWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    expect(wf.state).toBe('paused');
    const [paused] = await chain(wf.id, 'walk');
    expect([paused.state, paused.outcome, paused.cursor]).toEqual(['completed', 'continued', 2]);
    await workflows.resume(wf);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ continuesFromId: paused.id, state: 'scheduled' });
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['a', 'b', 'c', 'c', 'd', 'e']);
    expect(wf.state).toBe('finished');
  });

  it('A.14 #10: reattempt({ rewind: true }) starts over with no cursor: x y x y z', async () => {
    const wf = await workflows.start(RewindWorkflow, hero);
    const first = await app.gd.performNextStep(wf);
    expect([first!.state, first!.outcome]).toEqual(['completed', 'reattempted']);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ state: 'scheduled', cursor: null, continuesFromId: first!.id });
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['x', 'y', 'x', 'y', 'z']);
    expect(wf.state).toBe('finished');
  });

  it('an exception under a reattempt policy continues from the cursor: earlier items are not reprocessed', async () => {
    const wf = await workflows.start(FailingWalkWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('failed on c');
    const [failed] = await chain(wf.id, 'walk');
    expect([failed.state, failed.outcome, failed.cursor]).toEqual(['completed', 'reattempted', 2]);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(wf.state).toBe('finished');
  });

  it('A.14 #11/#12: resumed is false on the first execution and true on its successor (continuesFromId)', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(SkipToWorkflow.resumedLog).toEqual([false, true]);
    const [first, second] = await chain(wf.id, 'pages');
    expect(first.continuesFromId).toBeNull();
    expect(second.continuesFromId).toBe(first.id);
  });

  it('A.14 #11: a step that finishes in one execution sees resumed false, once', async () => {
    const wf = await workflows.start(CounterWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(CounterWorkflow.resumedLog).toEqual([false]);
    const rows = await chain(wf.id, 'count');
    expect(rows.map((e) => e.continuesFromId)).toEqual([null]);
  });

  it('A.14 #13: suspend() does not exist in the port; skipTo(3) covers set(3) + suspend: [1, 2] then 3..5 in the successor', async () => {
    const wf = await workflows.start(HandOnWorkflow, hero);
    const first = await app.gd.performNextStep(wf);
    expect([first!.state, first!.outcome]).toEqual(['completed', 'continued']);
    expect(seen).toEqual([1, 2]);
    await app.gd.assertCursor(wf, 3);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(wf.state).toBe('finished');
  });

  it.each<[string, unknown]>([
    ['an integer', 42],
    ['a string', 'page-7'],
    ['null', null],
    ['zero', 0],
    ['false', false],
    ['an empty string', ''],
    ['an empty array', []],
    ['an empty object', {}],
    ['an object', { page: 3, ids: [1, 2], nested: { done: true } }],
    ['a Date', new Date('2024-05-06T07:08:09.123Z')],
    ['a bigint', 12345678901234567890n],
  ])('A.14 #14-16: the cursor round-trips %s exactly through the database (only SQL NULL means no cursor)', async (_label, value) => {
    CursorEchoWorkflow.value = value;
    const wf = await workflows.start(CursorEchoWorkflow, hero);
    await app.gd.performNextStep(wf);
    const successor = await workflows.currentExecution(wf);
    expect(successor!.cursor).toEqual(value);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toEqual(value);
    if (value instanceof Date) expect(seen[0]).toBeInstanceOf(Date);
    expect(typeof seen[0]).toBe(typeof value);
  });

  it('A.14 #17: a fresh workflow whose first step is resumable has it scheduled as the current execution, with no cursor', async () => {
    const wf = await workflows.start(CounterWorkflow, hero);
    const current = await workflows.currentExecution(wf);
    expect(current).toMatchObject({ stepName: 'count', state: 'scheduled', cursor: null, continuesFromId: null });
  });

  it('A.14 #18: the chain is a singly linked list: the successor continues from the first row, which has exactly one successor', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    await app.gd.performNextStep(wf);
    const [first] = await chain(wf.id, 'pages');
    const successor = await workflows.currentExecution(wf);
    expect(successor!.continuesFromId).toBe(first.id);
    await app.gd.speedrunWorkflow(wf);
    const rows = await chain(wf.id, 'pages');
    expect(rows.filter((e) => e.continuesFromId === first.id).map((e) => e.id)).toEqual([successor!.id]);
    expect(rows.filter((e) => e.continuesFromId === successor!.id)).toEqual([]);
  });

  // A.14 #19 ("resumable_step requires a block") has no TypeScript counterpart: @ResumableStep
  // decorates a method, which always has a body, and addStep() has no resumable form.

  it('A.14 #22: assertCursor passes after skipTo(5) and fails on another value', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    await app.gd.performNextStep(wf);
    await app.gd.assertCursor(wf, 5);
    await expect(app.gd.assertCursor(wf, 6)).rejects.toThrow('Expected the cursor of "pages" to be 6, but it is 5');
  });

  it('A.14 #23: after skipTo the step has a completed execution whose successor exists and is scheduled', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    await app.gd.performNextStep(wf);
    const rows = await chain(wf.id, 'pages');
    const completed = rows.filter((e) => e.state === 'completed');
    expect(completed).toHaveLength(1);
    const successors = rows.filter((e) => e.continuesFromId === completed[0].id);
    expect(successors.map((e) => e.state)).toEqual(['scheduled']);
  });

  it('A.14 #24: resumable is true for @ResumableStep definitions and false for @Step; only resumable bodies get an iteration', async () => {
    const definition = app.moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(StandardOptionsWorkflow);
    expect(definition.step('slow')!.resumable).toBe(true);
    expect(definition.step('first')!.resumable).toBe(false);
    expect(definition.step('after')!.resumable).toBe(false);
    const wf = await workflows.start(StandardOptionsWorkflow, hero);
    await app.gd.performNextStep(wf);
    expect(seen).toEqual([['first got', 0]]);
  });

  it('A.14 #25: resumable steps take the standard options: wait delays only the first execution, onException: skip skips', async () => {
    const definition = app.moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(StandardOptionsWorkflow);
    expect(definition.step('slow')!.waitMs).toBe(300_000);
    expect(definition.step('slow')!.exceptionPolicy.action).toBe('skip');

    const wf = await workflows.start(StandardOptionsWorkflow, hero);
    await app.gd.performNextStep(wf);
    const scheduled = await workflows.currentExecution(wf);
    expect(scheduled!.stepName).toBe('slow');
    expect(scheduled!.scheduledFor.getTime() - Date.now()).toBeGreaterThan(290_000);

    const handedOn = Date.now();
    await app.gd.performNextStep(wf);
    const successor = await workflows.currentExecution(wf);
    expect(successor).toMatchObject({ stepName: 'slow', cursor: 2 });
    expect(successor!.scheduledFor.getTime()).toBeLessThan(handedOn + 60_000);

    // The error still reaches the job (after the skip is committed), as for plain steps.
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('boom at 3');
    await app.gd.speedrunWorkflow(wf);
    const rows = await chain(wf.id, 'slow');
    expect(rows.map((e) => [e.state, e.outcome])).toEqual([
      ['completed', 'continued'],
      ['skipped', 'skipped'],
    ]);
    expect(seen).toEqual([['first got', 0], 1, 2, 3, 'after']);
    expect(wf.state).toBe('finished');
  });
});

// ------------------------------------------------------------------ A.14 #20/#21: validation at boot

@Workflow()
class ZeroIterationsWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxIterations: 0 })
  async walk(_iter: StepIteration) {}
}

@Workflow()
class FractionalIterationsWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxIterations: 1.5 })
  async walk(_iter: StepIteration) {}
}

@Workflow()
class ZeroRuntimeWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxRuntime: 0 })
  async walk(_iter: StepIteration) {}
}

@Workflow()
class NegativeRuntimeWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxRuntime: -5000 })
  async walk(_iter: StepIteration) {}
}

@Workflow()
class GibberishRuntimeWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxRuntime: 'soon' as never })
  async walk(_iter: StepIteration) {}
}

@Workflow()
class ValidBudgetsWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxIterations: 2, maxRuntime: '50ms' })
  async walk(_iter: StepIteration) {}
}

describeEachDatabase('resumable step definitions', (kind) => {
  const opened: Array<{ close(): Promise<void> }> = [];
  afterEach(async () => {
    while (opened.length) await opened.pop()!.close();
  });

  const boot = async (workflow: Function) => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false }),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger() }),
      ],
      providers: [workflow as never],
    })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    await moduleRef.init();
    return moduleRef;
  };

  describe('A.14 #20/#21: budgets are validated when the application boots', () => {
    it.each([
      ['maxIterations: 0', ZeroIterationsWorkflow, 'ZeroIterationsWorkflow.walk: maxIterations must be a positive integer'],
      ['maxIterations: 1.5', FractionalIterationsWorkflow, 'FractionalIterationsWorkflow.walk: maxIterations must be a positive integer'],
      ['maxRuntime: 0', ZeroRuntimeWorkflow, 'ZeroRuntimeWorkflow.walk: maxRuntime must be a positive duration'],
      ['maxRuntime: -5000', NegativeRuntimeWorkflow, 'NegativeRuntimeWorkflow.walk: maxRuntime must be a positive duration'],
      ["maxRuntime: 'soon'", GibberishRuntimeWorkflow, 'GibberishRuntimeWorkflow.walk: maxRuntime must be a positive duration'],
    ])('%s is a StepConfigurationError naming the class and step', async (_label, workflow, message) => {
      const booting = boot(workflow);
      await expect(booting).rejects.toThrow(StepConfigurationError);
      await expect(booting).rejects.toThrow(message);
    });

    it('valid budgets boot, and are readable from the definition (a sub-second maxRuntime is allowed, unlike upstream)', async () => {
      const moduleRef = await boot(ValidBudgetsWorkflow);
      const step = moduleRef.get(WorkflowRegistry, { strict: false }).getByClass(ValidBudgetsWorkflow).step('walk')!;
      expect([step.maxIterations, step.maxRuntimeMs]).toEqual([2, 50]);
    });
  });
});
