import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  GenevaWorkflow,
  HousekeepingService,
  SignalService,
  Step,
  StepExecution,
  StepNotDefinedError,
  Workflow,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
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

/** A class-level skip policy: a step whose preparation fails is skipped. */
@Workflow({ skipUndefinedSteps: true, onException: [{ action: 'skip' }] })
class SkipOnErrorWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async one() { ran.push('one'); }
  @Step() async two() { ran.push('two'); }
}

@Workflow({ skipUndefinedSteps: true })
class GuardedSignalWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async one() { ran.push('one'); }
  @Step({ waitFor: 'go' }) async two() { ran.push('two'); }
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
    app = await createTestApp(kind, [DeployGuardedWorkflow, SkipOnErrorWorkflow, GuardedSignalWorkflow, StrictWorkflow], {
      stuckInProgressThreshold: '1h',
    });
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

  /**
   * Simulates a deploy that removed the step the workflow is at: the current execution and the
   * workflow's pointers name a step the class no longer has.
   */
  async function removeCurrentStep(workflowId: string) {
    const id = await renameCurrentStep(workflowId, 'removedStep');
    const record = await workflows.find(workflowId);
    await app.dataSource.getRepository(WorkflowRecord).update(workflowId, {
      nextStepName: 'removedStep',
      ...(record.currentStepName === null ? {} : { currentStepName: 'removedStep' }),
    });
    return id;
  }

  const stepsOf = async (workflowId: string) =>
    (await workflows.executionHistory(workflowId)).map((e) => [e.stepName, e.state, e.outcome]);

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

  it('without the flag, a step this code does not define is left to another process: StepNotDefinedError, nothing paused or skipped', async () => {
    const wf = await workflows.start(StrictWorkflow, hero);
    await renameCurrentStep(wf.id, 'removedStep');
    await expect(app.gd.performNextStep(wf)).rejects.toThrow(StepNotDefinedError);
    await app.gd.assertWorkflowState(wf, 'ready');
    expect(await stepsOf(wf.id)).toEqual([['removedStep', 'scheduled', null]]);
    expect(ran).toEqual([]);
  });

  describe('every "step after" a removed step continues after the last step of the history that still exists', () => {
    it('operator skip of a ready workflow scheduled at a removed step', async () => {
      const wf = await workflows.start(DeployGuardedWorkflow, hero);
      await app.gd.performNextStep(wf);
      await removeCurrentStep(wf.id);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'two' });
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(ran).toEqual(['one', 'two', 'three']);
      expect(await stepsOf(wf.id)).toEqual([
        ['one', 'completed', 'success'],
        ['removedStep', 'skipped', 'skipped'],
        ['two', 'completed', 'success'],
        ['three', 'completed', 'success'],
      ]);
    });

    it('operator skip of a paused workflow at a removed step', async () => {
      const wf = await workflows.start(DeployGuardedWorkflow, hero);
      await app.gd.performNextStep(wf);
      await workflows.pause(wf);
      await removeCurrentStep(wf.id);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'two' });
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['one', 'two', 'three']);
    });

    it('operator skip at a removed step when no step of the history exists any more starts from the first step', async () => {
      const wf = await workflows.start(DeployGuardedWorkflow, hero);
      await removeCurrentStep(wf.id);
      await workflows.skip(wf);
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'one' });
    });

    it('a skip exception policy, when preparing a removed step fails', async () => {
      const wf = await workflows.start(SkipOnErrorWorkflow, hero);
      await removeCurrentStep(wf.id);
      // The hero cannot be loaded: preparation fails before the step is looked up, and the class policy skips.
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { heroType: 'MissingEntity' });
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('MissingEntity');
      expect(await workflows.find(wf.id)).toMatchObject({ state: 'ready', nextStepName: 'one' });
      expect((await workflows.currentExecution(wf.id))?.stepName).toBe('one');
    });

    it('resume of a paused workflow parked at a removed waitFor step', async () => {
      const wf = await workflows.start(GuardedSignalWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.performNextStep(wf);
      await app.gd.assertWaitingForSignal(wf, 'go');
      await workflows.pause(wf);
      const removedId = await removeCurrentStep(wf.id);
      await workflows.resume(wf);
      await app.gd.performNextStep(wf);
      const removed = await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: removedId });
      expect([removed.state, removed.outcome]).toEqual(['skipped', 'skipped']);
      expect(await workflows.find(wf.id)).toMatchObject({ state: 'ready', nextStepName: 'two' });
      await app.moduleRef.get(SignalService).signal(wf, 'go');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['one', 'two', 'three']);
    });

    it('stuck recovery of a removed step that was in progress', async () => {
      const wf = await workflows.start(DeployGuardedWorkflow, hero);
      await app.gd.performNextStep(wf);
      const executions = app.dataSource.getRepository(StepExecution);
      const current = await workflows.currentExecution(wf.id);
      // A worker took the step and died two hours ago; the deploy since removed the step.
      const longAgo = new Date(Date.now() - 2 * 3_600_000);
      await executions.update(current!.id, { state: 'in_progress', startedAt: longAgo });
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'performing', currentStepName: 'two' });
      await removeCurrentStep(wf.id);
      expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckInProgressRecovered: 1 });
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(ran).toEqual(['one', 'two', 'three']);
      expect(await stepsOf(wf.id)).toEqual([
        ['one', 'completed', 'success'],
        ['removedStep', 'completed', 'recovered'],
        ['removedStep', 'skipped', 'skipped'],
        ['two', 'completed', 'success'],
        ['three', 'completed', 'success'],
      ]);
    });
  });
});
