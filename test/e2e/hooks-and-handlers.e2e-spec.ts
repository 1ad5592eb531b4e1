import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { ExceptionPolicy, GenevaWorkflow, Step, StepExecution, Workflow, WorkflowService } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const calls: string[] = [];

@Workflow()
class HookedWorkflow extends GenevaWorkflow<TestHero> {
  static mode: 'throw' | 'skip' | 'ok' = 'ok';

  override afterStepExecution(execution: StepExecution) {
    calls.push(`after:${execution.stepName}`);
  }

  @Step()
  async work() {
    calls.push('body');
    if (HookedWorkflow.mode === 'throw') throw new Error('body failed');
    if (HookedWorkflow.mode === 'skip') this.skip();
  }

  @Step() async next() {}
}

@Workflow({
  onException: [
    {
      handler: () => {
        throw new Error('handler is broken');
      },
    },
  ],
})
class BrokenHandlerWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async work() {
    throw new Error('original failure');
  }
}

@Workflow()
class BrokenBackoffWorkflow extends GenevaWorkflow<TestHero> {
  @Step({
    onException: new ExceptionPolicy('reattempt', {
      wait: () => {
        throw new Error('wait function is broken');
      },
    }),
  })
  async work() {
    throw new Error('original failure');
  }
}

describeEachDatabase('hooks and exception handlers', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [HookedWorkflow, BrokenHandlerWorkflow, BrokenBackoffWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    calls.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'h' }));
  });

  it.each(['ok', 'skip', 'throw'] as const)('runs afterStepExecution when the body ends with %s', async (mode) => {
    HookedWorkflow.mode = mode;
    const wf = await workflows.start(HookedWorkflow, hero);
    await app.gd.performNextStep(wf).catch(() => undefined);
    expect(calls).toEqual(['body', 'after:work']);
  });

  it('a handler that throws pauses the workflow with the original error recorded, instead of stranding the step', async () => {
    const wf = await workflows.start(BrokenHandlerWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('original failure');
    const [execution] = await workflows.executionHistory(wf);
    expect([execution.state, execution.outcome, execution.errorMessage]).toEqual(['failed', 'failed', 'original failure']);
    await app.gd.assertWorkflowState(wf, 'paused');
  });

  it('a reattempt wait function that throws pauses the workflow instead of stranding the step', async () => {
    const wf = await workflows.start(BrokenBackoffWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('original failure');
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.state, e.outcome, e.errorMessage])).toEqual([['failed', 'failed', 'original failure']]);
    await app.gd.assertWorkflowState(wf, 'paused');
  });
});
