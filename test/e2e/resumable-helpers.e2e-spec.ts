/**
 * The resumable half of upstream's test_helper_test.rb (reference A.14, "test_helper_test" #n),
 * with #20/#21 strengthened: they call assertCursor and check the successor for real. Plus the
 * helpers the port adds for resumable steps: runIterations, and speedrunCurrentStep following the
 * chain of successors ([later]).
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { AssertionError } from 'node:assert';
import { SignalService, WorkflowService, type StepExecution } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { ArrayWalkWorkflow, ChunkedWalkWorkflow, CursorEchoWorkflow, seen, SignalWalkWorkflow, SkipToWorkflow } from '../src/resumable-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

describeEachDatabase('resumable test helpers', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;
  const chain = async (workflowId: string, step: string) =>
    (await workflows.executionHistory(workflowId)).filter((e: StepExecution) => e.stepName === step);

  beforeAll(async () => {
    app = await createTestApp(kind, [ArrayWalkWorkflow, ChunkedWalkWorkflow, CursorEchoWorkflow, SkipToWorkflow, SignalWalkWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    seen.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'h' }));
  });

  it('#1: speedrunCurrentStep runs only the current (plain) step: the workflow stays ready at the resumable one', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    const last = await app.gd.speedrunCurrentStep(wf);
    expect(last).toMatchObject({ stepName: 'before', state: 'completed' });
    expect(seen).toEqual(['before']);
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'ready', nextStepName: 'walk' });
  });

  it('#2/#3 and [later]: speedrunCurrentStep follows the chain of successors to the end of the step and returns its last execution', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    const last = await app.gd.speedrunCurrentStep(wf);
    const walks = await chain(wf.id, 'walk');
    expect(walks.map((e) => [e.state, e.outcome, e.cursor])).toEqual([
      ['completed', 'continued', 2],
      ['completed', 'continued', 4],
      ['completed', 'success', 5],
    ]);
    expect(last).toMatchObject({ id: walks[2].id, stepName: 'walk', state: 'completed', outcome: 'success', continuesFromId: walks[1].id });
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e']);
    // ...and does not go on to the next step.
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'ready', nextStepName: 'after' });
    await app.gd.assertStepExecuted(wf, 'after', { state: 'scheduled' });
  });

  it('speedrunCurrentStep throws once maxExecutions executions of the step ran without it ending', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    await expect(app.gd.speedrunCurrentStep(wf, { maxExecutions: 2 })).rejects.toThrow('speedrunCurrentStep ran 2 executions of "walk" without it ending');
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd']);
  });

  it('#4: speedrunCurrentStep returns null when the workflow has no current execution', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(await app.gd.speedrunCurrentStep(wf)).toBeNull();
  });

  it('#6: speedrunWorkflow runs resumable steps to their end, then the next step, to finished', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e', 'after']);
    expect(wf.state).toBe('finished');
    expect(await chain(wf.id, 'walk')).toHaveLength(3);
  });

  it('#7/#8: performNextStep runs exactly one execution of a resumable chain and returns it', async () => {
    const wf = await workflows.start(ChunkedWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    const executed = await app.gd.performNextStep(wf);
    expect(executed).toMatchObject({ stepName: 'walk', state: 'completed', outcome: 'continued', cursor: 2 });
    expect(seen).toEqual(['before', 'a', 'b']);
    expect(await workflows.currentExecution(wf)).toMatchObject({ stepName: 'walk', state: 'scheduled', continuesFromId: executed!.id });
  });

  it('#13: performStepInline runs a resumable step out of order, from the start, and returns its execution', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    const inline = await app.gd.performStepInline(wf, 'walk');
    expect(inline).toMatchObject({ stepName: 'walk', state: 'completed', outcome: 'success', cursor: 5 });
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('runIterations stops the execution after exactly n checkpoints and leaves a successor', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    const executed = await app.gd.runIterations(wf, 3);
    expect(executed).toMatchObject({ stepName: 'walk', outcome: 'continued', cursor: 3 });
    expect(seen).toEqual(['before', 'a', 'b', 'c']);
    expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 3, continuesFromId: executed!.id });
  });

  it('#20 (strengthened): assertCursor compares the current execution\'s cursor deeply, and fails naming both values', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.performNextStep(wf);
    await app.gd.runIterations(wf, 2);
    await app.gd.assertCursor(wf, 2);
    await app.gd.assertCursor(wf.id, 2);
    const failure = app.gd.assertCursor(wf, 3);
    await expect(failure).rejects.toThrow(AssertionError);
    await expect(failure).rejects.toThrow('Expected the cursor of "walk" to be 3, but it is 2');

    CursorEchoWorkflow.value = { page: 3, ids: [1, 2] };
    const echo = await workflows.start(CursorEchoWorkflow, hero);
    await app.gd.performNextStep(echo);
    await app.gd.assertCursor(echo, { page: 3, ids: [1, 2] });
    await expect(app.gd.assertCursor(echo, { page: 3, ids: [1] })).rejects.toThrow(AssertionError);

    await app.gd.speedrunWorkflow(wf);
    await expect(app.gd.assertCursor(wf, 5)).rejects.toThrow(`Expected workflow ${wf.id} to have a current execution with a cursor, but it has none`);
  });

  it('#21 (strengthened): after skipTo, the completed execution has a scheduled successor carrying the cursor', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    const first = await app.gd.performNextStep(wf);
    expect(first).toMatchObject({ stepName: 'pages', state: 'completed', outcome: 'continued' });
    const successors = (await chain(wf.id, 'pages')).filter((e) => e.continuesFromId === first!.id);
    expect(successors).toHaveLength(1);
    expect(successors[0]).toMatchObject({ state: 'scheduled', cursor: 5 });
    expect((await workflows.currentExecution(wf))!.id).toBe(successors[0].id);
    await app.gd.assertCursor(wf, 5);
    await app.gd.assertStepExecuted(wf, 'pages', { state: 'completed' });
  });

  it('driving helpers refuse to spin on a parked resumable waitFor step, naming the signal', async () => {
    const wf = await workflows.start(SignalWalkWorkflow, hero);
    const parked = await app.gd.performNextStep(wf);
    expect(parked).toMatchObject({ stepName: 'walk', state: 'waiting' });
    await app.gd.assertWaitingForSignal(wf, 'batch_ready');
    for (const drive of [() => app.gd.speedrunCurrentStep(wf), () => app.gd.runIterations(wf, 1), () => app.gd.speedrunWorkflow(wf)]) {
      await expect(drive()).rejects.toThrow(/parked waiting for signal "batch_ready/);
    }
    expect(seen).toEqual([]);
    await app.moduleRef.get(SignalService).signal(wf, 'batch_ready', { payload: { batchId: 'b1' } });
    await app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
  });
});
