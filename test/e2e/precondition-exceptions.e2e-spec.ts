/**
 * A cancelIf or skipIf that throws (upstream precondition_exception_test.rb, adapted): the step's
 * exception policy applies with the execution still `scheduled` (never started), the body never
 * runs, and the original error reaches the caller after the outcome is committed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { WorkflowService, type GenevaWorkflow, type WorkflowRecord } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  CancelIfRaisesCancel,
  CancelIfRaisesPause,
  CancelIfRaisesReattempt,
  CancelIfRaisesSkip,
  coreJournal,
  corePlan,
  PreconditionBoom,
  resetCore,
  SkipIfRaisesCancel,
  SkipIfRaisesPause,
  SkipIfRaisesReattempt,
  SkipIfRaisesSkip,
} from '../src/core-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

type WorkflowClass = new () => GenevaWorkflow<TestHero>;

const BY_CONDITION: Array<[string, Record<'pause' | 'cancel' | 'reattempt' | 'skip', WorkflowClass>]> = [
  ['cancelIf', { pause: CancelIfRaisesPause, cancel: CancelIfRaisesCancel, reattempt: CancelIfRaisesReattempt, skip: CancelIfRaisesSkip }],
  ['skipIf', { pause: SkipIfRaisesPause, cancel: SkipIfRaisesCancel, reattempt: SkipIfRaisesReattempt, skip: SkipIfRaisesSkip }],
];

describeEachDatabase('precondition exceptions', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, BY_CONDITION.flatMap(([, classes]) => Object.values(classes)));
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetCore();
    corePlan.preconditionRaises = true;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);

  /** Starts the workflow and runs its first step, whose precondition throws; returns the error. */
  const runRaising = async (workflowClass: WorkflowClass) => {
    const wf = await workflows.start(workflowClass, hero);
    const error = await app.gd.performNextStep(wf).then(() => null, (e: unknown) => e);
    return { wf, error };
  };

  const expectOriginalError = (error: unknown) => {
    expect(error).toBeInstanceOf(PreconditionBoom);
    expect((error as Error).message).toBe('precondition exploded');
  };

  describe.each(BY_CONDITION)('a raising %s', (_condition, classes) => {
    it("under 'pause': execution failed with the error recorded, workflow paused, body not run", async () => {
      const { wf, error } = await runRaising(classes.pause);
      expectOriginalError(error);
      const rows = await history(wf);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        stepName: 'guarded',
        state: 'failed',
        outcome: 'failed',
        startedAt: null,
        errorClassName: 'PreconditionBoom',
        errorMessage: 'precondition exploded',
      });
      expect(rows[0].failedAt).toBeInstanceOf(Date);
      expect(rows[0].finishedAt).toBeInstanceOf(Date);
      expect(wf).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'guarded' });
      expect(coreJournal).toEqual([]);
    });

    it("under 'cancel': execution failed as canceled, workflow canceled, body not run", async () => {
      const { wf, error } = await runRaising(classes.cancel);
      expectOriginalError(error);
      const rows = await history(wf);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ state: 'failed', outcome: 'canceled', startedAt: null, errorMessage: 'precondition exploded' });
      expect(wf.state).toBe('canceled');
      expect(coreJournal).toEqual([]);
    });

    it("under 'reattempt': execution completed as reattempted (reason precondition), the step scheduled again", async () => {
      const { wf, error } = await runRaising(classes.reattempt);
      expectOriginalError(error);
      const rows = await history(wf);
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatchObject({ stepName: 'guarded', state: 'completed', outcome: 'reattempted', startedAt: null, errorMessage: null });
      expect(rows[0].metadata).toMatchObject({
        reattemptReason: 'precondition',
        exception: { class: 'PreconditionBoom', message: 'precondition exploded' },
      });
      expect(rows[1]).toMatchObject({ stepName: 'guarded', state: 'scheduled' });
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'guarded' });
      expect(coreJournal).toEqual([]);

      // Once the condition stops raising, the reattempt runs the body and the workflow moves on.
      corePlan.preconditionRaises = false;
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([`${wf.type}:guarded`]);
      expect(wf.nextStepName).toBe('following');
    });

    it("under 'skip': execution skipped, workflow ready at the following step, body not run", async () => {
      const { wf, error } = await runRaising(classes.skip);
      expectOriginalError(error);
      const rows = await history(wf);
      expect(rows.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
        ['guarded', 'skipped', 'skipped'],
        ['following', 'scheduled', null],
      ]);
      expect(rows[0].startedAt).toBeNull();
      expect(wf).toMatchObject({ state: 'ready', nextStepName: 'following' });
      expect(coreJournal).toEqual([]);
      corePlan.preconditionRaises = false; // a class-level cancelIf is evaluated before `following` too
      await app.gd.performNextStep(wf);
      expect(coreJournal).toEqual([`${wf.type}:following`]);
    });

    it('a paused workflow resumes and runs the step once the condition no longer raises', async () => {
      const { wf } = await runRaising(classes.pause);
      corePlan.preconditionRaises = false;
      await workflows.resume(wf);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(coreJournal).toEqual([`${wf.type}:guarded`, `${wf.type}:following`]);
    });
  });

  it('does not raise when the condition does not throw (control)', async () => {
    const wf = await workflows.start(CancelIfRaisesPause, hero);
    corePlan.preconditionRaises = false;
    await app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(coreJournal).toEqual(['CancelIfRaisesPause:guarded', 'CancelIfRaisesPause:following']);
  });
});
