import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { Greeter, journal, ThreeStepWorkflow } from '../src/workflows.js';

describeEachDatabase('workflow lifecycle', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [Greeter, ThreeStepWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    journal.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  it('starts ready with the first step scheduled and one job enqueued', async () => {
    const wf = await workflows.start(ThreeStepWorkflow, hero);
    expect(wf.state).toBe('ready');
    expect(wf.nextStepName).toBe('stepOne');
    const history = await workflows.executionHistory(wf);
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ stepName: 'stepOne', state: 'scheduled', outcome: null });
    expect(app.gd.enqueuedJobs.map((job) => job.executionId)).toEqual([history[0].id]);
  });

  it('runs every step in order to finished, with DI in steps', async () => {
    const wf: WorkflowRecord = await workflows.start(ThreeStepWorkflow, hero);
    await app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(wf.finishedAt).toBeInstanceOf(Date);
    expect(wf.startedAt).toBeInstanceOf(Date);
    expect(wf.currentStepName).toBeNull();
    expect(wf.nextStepName).toBeNull();
    expect(journal).toEqual(['hello Ada', 'two', 'three']);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['stepOne', 'completed', 'success'],
      ['stepTwo', 'completed', 'success'],
      ['stepThree', 'completed', 'success'],
    ]);
    expect(history.every((e) => e.finishedAt instanceof Date && e.startedAt instanceof Date)).toBe(true);
  });

  it('schedules the next step after its wait', async () => {
    const wf = await workflows.start(ThreeStepWorkflow, hero);
    const before = Date.now();
    await app.gd.performNextStep(wf);
    const current = await workflows.currentExecution(wf);
    expect(current?.stepName).toBe('stepTwo');
    expect(current!.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + 2 * 3600_000 - 1000);
    expect(current!.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 2 * 3600_000 + 1000);
  });
});
