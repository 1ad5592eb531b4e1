/**
 * Jobs are enqueued only after the outermost commit (upstream after_commit_scheduling_test.rb,
 * adapted): a caller's transaction passed to `start` co-commits the workflow with the caller's own
 * writes, a rollback leaves nothing behind, and the job carries the execution's id and due time.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { EntityManager, Repository } from 'typeorm';
import { Signal, SignalService, StepExecution, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import { FirstStepWaitsWorkflow } from '../src/signal-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { coreJournal, DelayedStartWorkflow, LinearWorkflow, resetCore, SingleStepWorkflow } from '../src/core-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const HOUR = 3_600_000;
const WORKFLOW_CLASSES = [SingleStepWorkflow, DelayedStartWorkflow, LinearWorkflow, FirstStepWaitsWorkflow];

/** Lets any callback queued by a commit run, so "no job" really means none is coming. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));

describeEachDatabase('after-commit scheduling', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let heroes: Repository<TestHero>;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, WORKFLOW_CLASSES);
    workflows = app.moduleRef.get(WorkflowService);
    heroes = app.dataSource.getRepository(TestHero);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetCore();
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const countRows = async () => ({
    workflows: await app.dataSource.getRepository(WorkflowRecord).count(),
    executions: await app.dataSource.getRepository(StepExecution).count(),
  });
  /** Whether rows written inside an open transaction can be seen from another connection (not on SQLite: one shared connection). */
  const hasSeparateConnections = kind !== 'sqlite';

  it('start leaves one scheduled execution and exactly one job, for that execution and its due time', async () => {
    const wf = await workflows.start(SingleStepWorkflow, hero);
    const rows = await workflows.executionHistory(wf);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ state: 'scheduled', stepName: 'only' });
    expect(app.gd.enqueuedJobs).toHaveLength(1);
    const [job] = app.gd.enqueuedJobs;
    expect(job.executionId).toBe(rows[0].id);
    expect(job.runAt).toBeInstanceOf(Date);
    expect(job.runAt.getTime()).toBe(rows[0].scheduledFor.getTime());
  });

  it('a two-hour first step is enqueued for two hours from now', async () => {
    const before = Date.now();
    const wf = await workflows.start(DelayedStartWorkflow, hero);
    const [row] = await workflows.executionHistory(wf);
    const [job] = app.gd.enqueuedJobs;
    expect(job.executionId).toBe(row.id);
    expect(job.runAt.getTime()).toBe(row.scheduledFor.getTime());
    expect(job.runAt.getTime()).toBeGreaterThanOrEqual(before + 2 * HOUR);
    expect(job.runAt.getTime()).toBeLessThanOrEqual(Date.now() + 2 * HOUR);
  });

  it('completing the only step enqueues nothing more: the workflow finishes', async () => {
    const wf = await workflows.start(SingleStepWorkflow, hero);
    await app.gd.performNextStep(wf);
    await settle();
    expect(wf.state).toBe('finished');
    expect(coreJournal).toEqual(['only']);
    expect(app.gd.enqueuedJobs).toHaveLength(1);
  });

  it("each step's job is enqueued once its execution row exists", async () => {
    const wf = await workflows.start(LinearWorkflow, hero);
    await app.gd.performNextStep(wf);
    const rows = await workflows.executionHistory(wf);
    expect(app.gd.enqueuedJobs.map((job) => job.executionId)).toEqual(rows.map((row) => row.id));
    expect(app.gd.enqueuedJobs.map((job) => job.runAt.getTime())).toEqual(rows.map((row) => row.scheduledFor.getTime()));
  });

  describe("inside the caller's transaction", () => {
    it('enqueues exactly one job, only after the commit, and the rows commit with the caller’s writes', async () => {
      let inside: { jobs: number; visibleOutside?: { workflows: number; executions: number } } | undefined;
      const wf = await app.dataSource.transaction(async (manager: EntityManager) => {
        const newHero = await manager.save(manager.create(TestHero, { name: 'created in the same transaction' }));
        const started = await workflows.start(SingleStepWorkflow, newHero, { manager });
        inside = { jobs: app.gd.enqueuedJobs.length };
        if (hasSeparateConnections) inside.visibleOutside = await countRows();
        return started;
      });
      expect(inside!.jobs).toBe(0);
      if (hasSeparateConnections) expect(inside!.visibleOutside).toEqual({ workflows: 0, executions: 0 });

      await settle();
      const rows = await workflows.executionHistory(wf);
      expect(rows).toHaveLength(1);
      expect(app.gd.enqueuedJobs).toHaveLength(1);
      expect(app.gd.enqueuedJobs[0].executionId).toBe(rows[0].id);
      expect(app.gd.enqueuedJobs[0].runAt.getTime()).toBe(rows[0].scheduledFor.getTime());
      expect(await heroes.countBy({ name: 'created in the same transaction' })).toBe(1);

      // The committed workflow runs normally.
      await app.gd.performNextStep(wf);
      expect(wf.state).toBe('finished');
    });

    it('a rollback leaves no rows and enqueues no job', async () => {
      const failure = new Error('caller rolls back');
      await expect(
        app.dataSource.transaction(async (manager: EntityManager) => {
          await workflows.start(SingleStepWorkflow, hero, { manager });
          throw failure;
        }),
      ).rejects.toBe(failure);
      await settle();
      expect(await countRows()).toEqual({ workflows: 0, executions: 0 });
      expect(app.gd.enqueuedJobs).toHaveLength(0);
      // The hero's slot is free: nothing of the rolled-back workflow survived.
      expect(await workflows.findOngoing(SingleStepWorkflow, hero)).toBeNull();
      await workflows.start(SingleStepWorkflow, hero);
      expect(app.gd.enqueuedJobs).toHaveLength(1);
    });

    it('a rolled-back savepoint drops its job; the outer commit enqueues only the surviving one', async () => {
      const other = await heroes.save(heroes.create({ name: 'Grace' }));
      const kept = await app.dataSource.transaction(async (manager: EntityManager) => {
        const survivor = await workflows.start(SingleStepWorkflow, hero, { manager });
        await manager
          .transaction(async (nested: EntityManager) => {
            await workflows.start(SingleStepWorkflow, other, { manager: nested });
            throw new Error('inner rollback');
          })
          .catch(() => undefined);
        expect(app.gd.enqueuedJobs).toHaveLength(0);
        return survivor;
      });
      await settle();
      const [row] = await workflows.executionHistory(kept);
      expect(await countRows()).toEqual({ workflows: 1, executions: 1 });
      expect(app.gd.enqueuedJobs.map((job) => job.executionId)).toEqual([row.id]);
      expect(await workflows.findOngoing(SingleStepWorkflow, other)).toBeNull();
    });
  });

  describe('with enqueueAfterCommit: false', () => {
    let inline: TestApp;

    beforeAll(async () => {
      inline = await createTestApp(kind, WORKFLOW_CLASSES, { enqueueAfterCommit: false, prepare: false });
    });
    afterAll(() => inline.close());

    it("enqueues at once, inside the caller's transaction", async () => {
      const inlineWorkflows = inline.moduleRef.get(WorkflowService);
      (inline.gd.enqueuedJobs as unknown[]).length = 0;
      let jobsInside = -1;
      await inline.dataSource.transaction(async (manager: EntityManager) => {
        await inlineWorkflows.start(SingleStepWorkflow, hero, { manager });
        jobsInside = inline.gd.enqueuedJobs.length;
      });
      expect(jobsInside).toBe(1);
      expect(inline.gd.enqueuedJobs).toHaveLength(1);
      expect(app.gd.enqueuedJobs).toHaveLength(0);
    });

    // Sent inside the transaction, a wake-up that fails rolls its signal back, so signal() keeps the
    // transaction here (PostgreSQL's one message would have committed before the enqueue).
    it("a signal whose wake-up cannot be enqueued writes nothing", async () => {
      const workflow = await inline.moduleRef.get(WorkflowService).start(FirstStepWaitsWorkflow, hero);
      await inline.gd.performNextStep(workflow); // parks
      const store = inline.moduleRef.get(WorkflowStore, { strict: false });
      const enqueue = store.enqueue.bind(store);
      store.enqueue = () => Promise.reject(new Error('the queue is gone'));
      try {
        await expect(inline.moduleRef.get(SignalService).signal(workflow, 'go')).rejects.toThrow('the queue is gone');
      } finally {
        store.enqueue = enqueue;
      }
      expect(await inline.dataSource.getRepository(Signal).countBy({ workflowId: workflow.id })).toBe(0);
      expect(await inline.dataSource.getRepository(StepExecution).findOneByOrFail({ workflowId: workflow.id })).toMatchObject({ state: 'waiting', signalId: null });
    });
  });
});
