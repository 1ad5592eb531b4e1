import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { WorkflowService, type StepExecution } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { ArrayWalkWorkflow, FailingWalkWorkflow, PausingWalkWorkflow, seen, SkipToWorkflow } from '../src/resumable-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

describeEachDatabase('resumable steps', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;
  const chain = async (workflowId: string, step: string) =>
    (await workflows.executionHistory(workflowId)).filter((e: StepExecution) => e.stepName === step);

  beforeAll(async () => {
    app = await createTestApp(kind, [ArrayWalkWorkflow, PausingWalkWorkflow, FailingWalkWorkflow, SkipToWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    seen.length = 0;
    FailingWalkWorkflow.failOn = 'c';
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'r' }));
  });

  it('walks every item once and goes on to the next step', async () => {
    const wf = await workflows.start(ArrayWalkWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['before', 'a', 'b', 'c', 'd', 'e', 'after']);
    expect(wf.state).toBe('finished');
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

  it('pause() keeps the cursor and resume continues from it (the item before the checkpoint runs again: at-least-once)', async () => {
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

  it('an exception under a reattempt policy continues from the cursor: earlier items are not reprocessed', async () => {
    const wf = await workflows.start(FailingWalkWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('failed on c');
    const [failed] = await chain(wf.id, 'walk');
    expect([failed.state, failed.outcome, failed.cursor]).toEqual(['completed', 'reattempted', 2]);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(wf.state).toBe('finished');
  });

  it('skipTo persists the value and always hands on, after its wait', async () => {
    const wf = await workflows.start(SkipToWorkflow, hero);
    const before = Date.now();
    const first = await app.gd.performNextStep(wf);
    expect([first!.outcome, first!.cursor]).toEqual(['continued', 5]);
    const successor = await workflows.currentExecution(wf);
    expect(successor!.cursor).toBe(5);
    expect(successor!.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 3600_000 - 1000);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 5, 6]);
  });
});
