import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { GenevaWorkflow, Step, StepExecution, StepNotDefinedError, Workflow, WorkflowService } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const ran: string[] = [];

@Workflow({ skipUndefinedSteps: true })
class DeployGuardedWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async one() { ran.push('one'); }
  @Step() async two() { ran.push('two'); }
  @Step() async three() { ran.push('three'); }
}

@Workflow()
class StrictWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async one() { ran.push('one'); }
  @Step() async two() { ran.push('two'); }
}

describeEachDatabase('skipUndefinedSteps', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [DeployGuardedWorkflow, StrictWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    ran.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'h' }));
  });

  /** Simulates a deploy that removed the step the current execution names. */
  async function renameCurrentStep(workflowId: string, to: string) {
    const current = await workflows.currentExecution(workflowId);
    await app.dataSource.getRepository(StepExecution).update(current!.id, { stepName: to });
    return current!.id;
  }

  it('skips a removed step and goes on after the last step that still exists, never re-running it', async () => {
    const wf = await workflows.start(DeployGuardedWorkflow, hero);
    await app.gd.performNextStep(wf);
    const removedId = await renameCurrentStep(wf.id, 'removedStep');
    const finished = await app.gd.speedrunWorkflow(wf);
    expect(finished.state).toBe('finished');
    expect(ran).toEqual(['one', 'two', 'three']);
    const removed = await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: removedId });
    expect([removed.state, removed.outcome]).toEqual(['skipped', 'skipped']);
  });

  it('starts from the first step when no step of the history exists any more', async () => {
    const wf = await workflows.start(DeployGuardedWorkflow, hero);
    await renameCurrentStep(wf.id, 'renamedFirstStep');
    await app.gd.speedrunWorkflow(wf);
    expect(ran).toEqual(['one', 'two', 'three']);
  });

  it('without the flag, a removed step pauses the workflow with StepNotDefinedError', async () => {
    const wf = await workflows.start(StrictWorkflow, hero);
    await renameCurrentStep(wf.id, 'removedStep');
    await expect(app.gd.performNextStep(wf)).rejects.toThrow(StepNotDefinedError);
    await app.gd.assertWorkflowState(wf, 'paused');
    expect(ran).toEqual([]);
  });
});
