/**
 * Safe deploys, in the engine: gravestones (`removedSteps`), `resume()` at a gravestone or a step
 * deleted without one, `resumeAt()` and `removedStepsInFlight()`. A deploy is simulated by renaming
 * the step an execution (and the workflow's pointers) name to the step the new code removed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  GenevaWorkflow,
  InvalidOptionError,
  InvalidStateError,
  Signal,
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

/** `sendFax` used to sit between reserveStock and ship; `legacyAudit` before the first step; `archive` after the last. */
@Workflow({
  removedSteps: [
    { name: 'sendFax', after: 'reserveStock' },
    { name: 'legacyAudit', before: 'reserveStock' },
    { name: 'archive', after: 'bill' },
  ],
})
class FulfilmentWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async reserveStock() { ran.push('reserveStock'); }
  @Step() async ship() { ran.push('ship'); }
  @Step() async bill() { ran.push('bill'); }
}

/** A parked step was removed: `awaitFax` waited for 'fax_received' between awaitSignature and file. */
@Workflow({ removedSteps: [{ name: 'awaitFax', after: 'awaitSignature' }] })
class FaxWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async send() { ran.push('send'); }
  @Step({ waitFor: 'fax_received' }) async awaitSignature() { ran.push(`awaitSignature(${this.receivedSignal?.name ?? '-'})`); }
  @Step() async file() { ran.push('file'); }
}

/** A step positioned at a gravestone, and a skip policy on the step before it. */
@Workflow({ removedSteps: [{ name: 'sendFax', after: 'reserveStock' }] })
class PositionedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ onException: 'skip' }) async reserveStock() {
    ran.push('reserveStock');
    throw new Error('out of stock');
  }
  @Step() async bill() { ran.push('bill'); }
  @Step({ after: 'sendFax' }) async ship() { ran.push('ship'); }
}

/** `sendFax` used to sit between reserveStock and ship; a class-level policy skips a step that throws. */
@Workflow({ onException: [{ action: 'skip' }], removedSteps: [{ name: 'sendFax', after: 'reserveStock' }] })
class SkipPolicyWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async reserveStock() {
    ran.push('reserveStock');
    throw new Error('out of stock');
  }
  @Step() async ship() { ran.push('ship'); }
  @Step() async bill() { ran.push('bill'); }
}

describeEachDatabase('removed steps and resumeAt', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [FulfilmentWorkflow, FaxWorkflow, PositionedWorkflow, SkipPolicyWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
    signals = app.moduleRef.get(SignalService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    ran.length = 0;
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'h' }));
  });

  /** A deploy removed the step the workflow stands at: its kept execution and pointers name `to`. */
  async function renameCurrentStep(workflowId: string, to: string): Promise<string> {
    const current = (await workflows.currentExecution(workflowId))!;
    await app.dataSource.getRepository(StepExecution).update(current.id, { stepName: to });
    const record = await workflows.find(workflowId);
    await app.dataSource.getRepository(WorkflowRecord).update(workflowId, { nextStepName: to, ...(record.currentStepName === null ? {} : { currentStepName: to }) });
    return current.id;
  }
  const execution = (id: string) => app.dataSource.getRepository(StepExecution).findOneByOrFail({ id });
  const history = async (wf: WorkflowRecord) => (await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state]);
  /** The step and state of the workflow's current execution. */
  const current = async (wf: WorkflowRecord) => {
    const e = await workflows.currentExecution(wf);
    return e && [e.stepName, e.state];
  };
  const signalRow = (id: string) => app.dataSource.getRepository(Signal).findOneByOrFail({ id });

  describe('an execution scheduled on a gravestone before the deploy', () => {
    it('is skipped, marked removedStep, and the workflow continues after the gravestone, re-running nothing', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await app.gd.performNextStep(wf); // reserveStock
      const removedId = await renameCurrentStep(wf.id, 'sendFax');
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([{ stepName: 'sendFax', workflows: 1 }]);
      expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
      expect(ran).toEqual(['reserveStock', 'ship', 'bill']);
      const removed = await execution(removedId);
      expect([removed.state, removed.outcome, removed.metadata?.removedStep]).toEqual(['skipped', 'skipped', true]);
      expect(await history(wf)).toEqual([
        ['reserveStock', 'completed'],
        ['sendFax', 'skipped'],
        ['ship', 'completed'],
        ['bill', 'completed'],
      ]);
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([]);
    });

    it('at the first position (before: the first step) continues with the first step', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await renameCurrentStep(wf.id, 'legacyAudit');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['reserveStock', 'ship', 'bill']);
    });

    it('at the last position finishes the workflow', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.performNextStep(wf);
      await renameCurrentStep(wf.id, 'archive'); // was bill
      expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
      expect(ran).toEqual(['reserveStock', 'ship']);
    });

    it('woken by a signal before the deploy: skipped, and the signal it was given is settled', async () => {
      const wf = await workflows.start(FaxWorkflow, hero);
      await app.gd.performNextStep(wf); // send
      await app.gd.performNextStep(wf); // parks
      const signal = await signals.signal(wf, 'fax_received');
      expect((await workflows.currentExecution(wf))!.state).toBe('scheduled');
      await renameCurrentStep(wf.id, 'awaitFax');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['send', 'file']);
      expect((await signalRow(signal.id)).state).toBe('consumed');
    });
  });

  describe('nothing schedules a gravestone', () => {
    it.each([
      ['a step-level skip policy, the next step positioned at the gravestone', PositionedWorkflow],
      ['a class-level skip policy', SkipPolicyWorkflow],
    ])('%s: the step right before a gravestone fails and is skipped, the workflow goes on with the step after its position', async (_, workflowClass) => {
      const wf = await workflows.start(workflowClass, hero);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow('out of stock'); // recorded as skipped, then re-thrown to the queue
      expect(await current(wf)).toEqual(['ship', 'scheduled']);
      expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
      expect(ran).toEqual(['reserveStock', 'ship', 'bill']);
      expect(await history(wf)).toEqual([
        ['reserveStock', 'skipped'],
        ['ship', 'completed'],
        ['bill', 'completed'],
      ]);
    });

    it('an operator skip of the step right before a gravestone schedules the step after its position; of the last step, finishes', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      expect((await workflows.skip(wf)).state).toBe('ready'); // reserveStock, before sendFax
      expect(await current(wf)).toEqual(['ship', 'scheduled']);
      await app.gd.performNextStep(wf); // ship
      expect((await workflows.skip(wf)).state).toBe('finished'); // bill, before archive
      expect(ran).toEqual(['ship']);
      expect(await history(wf)).toEqual([
        ['reserveStock', 'skipped'],
        ['ship', 'completed'],
        ['bill', 'skipped'],
      ]);
    });

    it('an operator skip of a workflow paused right before a gravestone resumes it at the step after its position', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await workflows.pause(wf);
      expect((await workflows.skip(wf)).state).toBe('ready');
      expect(await current(wf)).toEqual(['ship', 'scheduled']);
      expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
      expect(ran).toEqual(['ship', 'bill']);
      expect(await history(wf)).toEqual([
        ['reserveStock', 'canceled'],
        ['ship', 'completed'],
        ['bill', 'completed'],
      ]);
    });
  });

  describe('removedStepsInFlight', () => {
    /** An ongoing FulfilmentWorkflow whose scheduled execution names `gravestone` (sendFax after reserveStock ran, legacyAudit before it). */
    async function atGravestone(gravestone: 'sendFax' | 'legacyAudit'): Promise<WorkflowRecord> {
      const wf = await workflows.start(FulfilmentWorkflow, hero, { allowMultiple: true });
      if (gravestone === 'sendFax') await app.gd.performNextStep(wf);
      await renameCurrentStep(wf.id, gravestone);
      return wf;
    }

    it('counts the ongoing workflows at each gravestone, not the finished or canceled ones, and empties as they move on', async () => {
      // Finished after its execution at sendFax was skipped.
      const finished = await atGravestone('sendFax');
      expect((await app.gd.speedrunWorkflow(finished)).state).toBe('finished');
      expect(await history(finished)).toContainEqual(['sendFax', 'skipped']);
      // Canceled with its execution at sendFax kept.
      const canceled = await atGravestone('sendFax');
      await workflows.cancel(canceled);
      expect(await history(canceled)).toEqual([
        ['reserveStock', 'completed'],
        ['sendFax', 'canceled'],
      ]);
      // Canceled while paused by a failed attempt at sendFax: no execution left, nextStepName names it.
      const failed = await atGravestone('sendFax');
      const attempt = (await workflows.currentExecution(failed))!;
      await app.dataSource.getRepository(StepExecution).update(attempt.id, { state: 'failed', outcome: 'failed' });
      await app.dataSource.getRepository(WorkflowRecord).update(failed.id, { state: 'paused' });
      await workflows.cancel(failed);
      expect(await workflows.find(failed.id)).toMatchObject({ state: 'canceled', nextStepName: 'sendFax' });
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([]);

      const [first, second] = [await atGravestone('sendFax'), await atGravestone('sendFax')];
      const paused = await atGravestone('sendFax');
      await workflows.pause(paused);
      const beforeFirst = await atGravestone('legacyAudit');
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([
        { stepName: 'legacyAudit', workflows: 1 },
        { stepName: 'sendFax', workflows: 3 },
      ]);

      await app.gd.performNextStep(first); // its sendFax execution skipped, ship scheduled
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([
        { stepName: 'legacyAudit', workflows: 1 },
        { stepName: 'sendFax', workflows: 2 },
      ]);
      await workflows.resume(paused); // released: skipped, ship scheduled
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([
        { stepName: 'legacyAudit', workflows: 1 },
        { stepName: 'sendFax', workflows: 1 },
      ]);
      await app.gd.performNextStep(beforeFirst); // its legacyAudit execution skipped, reserveStock scheduled
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([{ stepName: 'sendFax', workflows: 1 }]);
      expect((await app.gd.speedrunWorkflow(second)).state).toBe('finished');
      expect(await workflows.removedStepsInFlight(FulfilmentWorkflow)).toEqual([]);
      // The three that moved on stand at live steps, still ongoing.
      expect(await Promise.all([first, paused, beforeFirst].map(current))).toEqual([
        ['ship', 'scheduled'],
        ['ship', 'scheduled'],
        ['reserveStock', 'scheduled'],
      ]);
    });
  });

  describe('an execution parked on a gravestone', () => {
    async function parkedOnGravestone(): Promise<{ wf: WorkflowRecord; parkedId: string }> {
      const wf = await workflows.start(FaxWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.performNextStep(wf);
      await app.gd.assertWaitingForSignal(wf, 'fax_received');
      return { wf, parkedId: await renameCurrentStep(wf.id, 'awaitFax') };
    }

    it('is not woken by a signal: the signal stays buffered', async () => {
      const { wf, parkedId } = await parkedOnGravestone();
      const signal = await signals.signal(wf, 'fax_received', { allowUnknownName: true });
      expect((await execution(parkedId)).state).toBe('waiting');
      expect((await signalRow(signal.id)).state).toBe('pending');
      expect(await workflows.removedStepsInFlight(FaxWorkflow)).toEqual([{ stepName: 'awaitFax', workflows: 1 }]);
    });

    it('is released on resume: skipped, the next step scheduled; a buffered signal stays for the steps that wait for it', async () => {
      const { wf, parkedId } = await parkedOnGravestone();
      const signal = await signals.signal(wf, 'fax_received', { allowUnknownName: true });
      await workflows.pause(wf);
      await workflows.resume(wf);
      const released = await execution(parkedId);
      expect([released.state, released.metadata?.removedStep]).toEqual(['skipped', true]);
      expect((await workflows.currentExecution(wf))!.stepName).toBe('file');
      expect((await signalRow(signal.id)).state).toBe('pending');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['send', 'file']);
      expect(await workflows.removedStepsInFlight(FaxWorkflow)).toEqual([]);
    });

    it('released without a signal', async () => {
      const { wf } = await parkedOnGravestone();
      await workflows.pause(wf);
      await workflows.resume(wf);
      expect((await app.gd.speedrunWorkflow(wf)).state).toBe('finished');
      expect(ran).toEqual(['send', 'file']);
    });
  });

  it('resume of a workflow paused by a failure at a step that became a gravestone settles its claim and goes on', async () => {
    const wf = await workflows.start(FaxWorkflow, hero);
    await app.gd.performNextStep(wf);
    await app.gd.performNextStep(wf);
    const signal = await signals.signal(wf, 'fax_received');
    const woken = (await workflows.currentExecution(wf))!;
    // Paused by the failed attempt: nothing kept, nextStepName names the step, the signal claimed by the failed execution.
    await app.dataSource.getRepository(StepExecution).update(woken.id, { state: 'failed', outcome: 'failed', stepName: 'awaitFax' });
    await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'paused', nextStepName: 'awaitFax' });
    expect(await workflows.removedStepsInFlight(FaxWorkflow)).toEqual([{ stepName: 'awaitFax', workflows: 1 }]);
    await workflows.resume(wf);
    expect((await signalRow(signal.id)).state).toBe('consumed');
    await app.gd.speedrunWorkflow(wf);
    expect(ran).toEqual(['send', 'file']);
  });

  describe('a step deleted without a gravestone', () => {
    async function stranded(): Promise<WorkflowRecord> {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await app.gd.performNextStep(wf);
      await workflows.pause(wf);
      await renameCurrentStep(wf.id, 'giftWrap');
      return wf;
    }

    it('resume refuses it with StepNotDefinedError naming the step, the defined steps and resumeAt, changing nothing', async () => {
      const wf = await stranded();
      const error = await workflows.resume(wf).then(
        () => null,
        (raised: unknown) => raised,
      );
      expect(error).toBeInstanceOf(StepNotDefinedError);
      expect(error).toMatchObject({ stepName: 'giftWrap', definedSteps: ['reserveStock', 'ship', 'bill'] });
      expect((error as Error).message).toContain('resumeAt');
      expect((await workflows.find(wf.id)).state).toBe('paused');
      expect((await workflows.currentExecution(wf))!.stepName).toBe('giftWrap');
    });

    it('resumeAt moves it to a defined step in one transaction: the kept execution canceled, the step scheduled now', async () => {
      const wf = await stranded();
      const kept = (await workflows.currentExecution(wf))!;
      const moved = await workflows.resumeAt(wf, 'bill');
      expect(moved.state).toBe('ready');
      expect((await execution(kept.id)).state).toBe('canceled');
      const current = (await workflows.currentExecution(wf))!;
      expect([current.stepName, current.state]).toEqual(['bill', 'scheduled']);
      expect(current.scheduledFor.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['reserveStock', 'bill']);
    });
  });

  describe('resumeAt', () => {
    it('refuses a step the class does not define, a gravestone, and a bad name, changing nothing', async () => {
      const wf = await workflows.start(FulfilmentWorkflow, hero);
      await workflows.pause(wf);
      const refusal = (step: unknown) => workflows.resumeAt(wf, step as string).then(() => null, (error: unknown) => error);
      expect(await refusal('shipp')).toMatchObject({ name: 'StepNotDefinedError', stepName: 'shipp', definedSteps: ['reserveStock', 'ship', 'bill'] });
      expect(await refusal('sendFax')).toBeInstanceOf(StepNotDefinedError);
      expect(await refusal('')).toBeInstanceOf(InvalidOptionError);
      expect(await refusal(42)).toBeInstanceOf(InvalidOptionError);
      expect((await workflows.find(wf.id)).state).toBe('paused');
      expect(await history(wf)).toEqual([['reserveStock', 'scheduled']]);
    });

    it('refuses a finished or canceled workflow with InvalidStateError', async () => {
      const done = await workflows.start(FulfilmentWorkflow, hero);
      await app.gd.speedrunWorkflow(done);
      await expect(workflows.resumeAt(done, 'ship')).rejects.toThrow(InvalidStateError);
      const canceled = await workflows.start(FulfilmentWorkflow, hero, { allowMultiple: true });
      await workflows.cancel(canceled);
      await expect(workflows.resumeAt(canceled, 'ship')).rejects.toThrow(InvalidStateError);
    });

    it('moves a ready workflow parked on a step; moving away settles the signal the step was given', async () => {
      const wf = await workflows.start(FaxWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.performNextStep(wf);
      const signal = await signals.signal(wf, 'fax_received'); // woken, not yet run
      await workflows.resumeAt(wf, 'file');
      expect((await signalRow(signal.id)).state).toBe('consumed');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['send', 'file']);
      expect(await history(wf)).toEqual([
        ['send', 'completed'],
        ['awaitSignature', 'canceled'],
        ['file', 'completed'],
      ]);
    });

    it('moving to the same step runs it again on the same event', async () => {
      const wf = await workflows.start(FaxWorkflow, hero);
      await app.gd.performNextStep(wf);
      await app.gd.performNextStep(wf);
      await signals.signal(wf, 'fax_received');
      await workflows.resumeAt(wf, 'awaitSignature');
      await app.gd.speedrunWorkflow(wf);
      expect(ran).toEqual(['send', 'awaitSignature(fax_received)', 'file']);
      await app.gd.assertSignalState(wf, 'fax_received', 'consumed');
    });
  });
});
