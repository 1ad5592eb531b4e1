/**
 * HousekeepingService on every database: the port of the upstream housekeeping tests (reference
 * core-engine §11.6), SIG-64..66 and the SPEC §5 fixes (paused workflows are never touched, every run
 * terminates, rows that cannot be recovered are reported).
 *
 * Time is moved by writing timestamp columns into the past, never with fake timers. A row "left
 * in_progress" is what a worker that died mid-step leaves behind: the execution `in_progress` with its
 * `startedAt`, the workflow `performing` on that step.
 *
 * Deliberate design, named in the tests: a stuck `scheduled` row (a lost enqueue) is recovered by
 * enqueuing the SAME execution again (job id = execution id), not by a new row; a stuck
 * `in_progress` row becomes completed/`recovered` and a new execution of the same step is scheduled.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { AfterQueryEvent, EntitySubscriberInterface, Repository } from 'typeorm';
import {
  GENEVA_DRIVE_CHANNELS,
  HousekeepingService,
  QUEUE_PORT,
  Signal,
  SignalService,
  StepExecution,
  WorkflowRecord,
  WorkflowService,
  type HousekeepingSummary,
  type WorkflowState,
} from 'geneva-drive';
import type { ManualQueueAdapter } from '../../libs/geneva-drive/src/queue/manual-queue.adapter.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { ErrorLines } from '../src/error-lines.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  ApprovalWorkflow,
  brittle,
  BrittleWorkflow,
  ChoreWorkflow,
  DeliveryWorkflow,
  HOUSEKEEPING_WORKFLOWS,
  hkJournal,
  SlowWorkflow,
  slowStep,
} from '../src/housekeeping-workflows.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const ago = (ms: number) => new Date(Date.now() - ms);

const EMPTY: Omit<HousekeepingSummary, 'gauges' | 'unrunnableExecutions'> = {
  workflowsDeleted: 0,
  stepExecutionsDeleted: 0,
  signalsDeleted: 0,
  stuckInProgressRecovered: 0,
  stuckScheduledRecovered: 0,
  stuckScheduledStillQueued: 0,
  overdueDeadlinesRecovered: 0,
  flowWaitersWoken: 0,
  pausedAtRecoveryLimit: [],
  unrecoverable: [],
};

/** Nothing paused: neither paused gauge counts anything. */
const NO_RECOVERY_LIMIT_PAUSED = {
  'geneva_drive.recovery_limit_paused': { total: 0, byWorkflow: {} },
  'geneva_drive.paused_workflows': { total: 0, byWorkflow: {} },
};
/** No parked execution has a deadline (`timeout`), and no execution a concurrency key: those gauges read zero. */
const NO_DEADLINES = {
  'geneva_drive.waiting_with_deadline': { total: 0, byWorkflow: {} },
  'geneva_drive.deadlines_overdue': { total: 0, byWorkflow: {} },
  // Nor a concurrency key: the flow-key gauges read zero too.
  'geneva_drive.flow_key_waiting': { total: 0, byWorkflow: {} },
  'geneva_drive.flow_key_holding': { total: 0, byWorkflow: {} },
};

/** Counts successful `DELETE FROM <table>` statements on the DataSource (a TypeORM query subscriber). */
class DeleteCounter implements EntitySubscriberInterface {
  readonly counts: Record<string, number> = {};
  afterQuery(event: AfterQueryEvent): void {
    const match = /^\s*DELETE\s+FROM\s+["`]?(\w+)["`]?/i.exec(event.query);
    if (match && event.success) this.counts[match[1]] = (this.counts[match[1]] ?? 0) + 1;
  }
}

/** A deterministic PRNG (mulberry32), for the seeded mixes. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The booted app plus the handles every block uses. */
function useApp(kind: DatabaseKind, options: Parameters<typeof createTestApp>[2]) {
  const ctx = {} as {
    app: TestApp;
    workflows: WorkflowService;
    signals: SignalService;
    housekeeping: HousekeepingService;
    queue: ManualQueueAdapter;
    workflowRows: Repository<WorkflowRecord>;
    executionRows: Repository<StepExecution>;
    signalRows: Repository<Signal>;
    hero: TestHero;
    heroes: Repository<TestHero>;
  };
  beforeAll(async () => {
    ctx.app = await createTestApp(kind, HOUSEKEEPING_WORKFLOWS, options);
    ctx.workflows = ctx.app.moduleRef.get(WorkflowService);
    ctx.signals = ctx.app.moduleRef.get(SignalService);
    ctx.housekeeping = ctx.app.moduleRef.get(HousekeepingService);
    ctx.queue = ctx.app.moduleRef.get(QUEUE_PORT);
    ctx.workflowRows = ctx.app.dataSource.getRepository(WorkflowRecord);
    ctx.executionRows = ctx.app.dataSource.getRepository(StepExecution);
    ctx.signalRows = ctx.app.dataSource.getRepository(Signal);
    ctx.heroes = ctx.app.dataSource.getRepository(TestHero);
  });
  afterAll(() => ctx.app.close());
  beforeEach(async () => {
    await ctx.app.reset();
    hkJournal.length = 0;
    slowStep.release = Promise.resolve();
    ctx.hero = await ctx.heroes.save(ctx.heroes.create({ name: 'Ada' }));
  });
  return ctx;
}

type Ctx = ReturnType<typeof useApp>;

function helpers(ctx: Ctx) {
  const h = {
    /** A new hero and a workflow of `type` about it. */
    async start(
      type: typeof ChoreWorkflow | typeof DeliveryWorkflow | typeof ApprovalWorkflow | typeof SlowWorkflow | typeof BrittleWorkflow,
      name = 'Ada',
    ): Promise<WorkflowRecord> {
      const hero = await ctx.heroes.save(ctx.heroes.create({ name }));
      return ctx.workflows.start(type, hero);
    },
    history: (wf: WorkflowRecord | string) => ctx.workflows.executionHistory(wf as WorkflowRecord),
    reload: (wf: WorkflowRecord | string) => ctx.app.gd.reload(wf),
    async current(wf: WorkflowRecord): Promise<StepExecution> {
      const history = await h.history(wf);
      return history[history.length - 1];
    },
    /** A workflow run to the end, then its finish moved `ageMs` into the past. */
    async finishedAgo(ageMs: number, name = 'Ada'): Promise<WorkflowRecord> {
      const wf = await h.start(ChoreWorkflow, name);
      await ctx.app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      await ctx.workflowRows.update(wf.id, { finishedAt: ago(ageMs), transitionedAt: ago(ageMs) });
      return wf;
    },
    /** What a worker that died mid-step leaves behind, `startedAgoMs` ago. */
    async leaveInProgress(wf: WorkflowRecord, startedAgoMs: number): Promise<StepExecution> {
      const execution = await h.current(wf);
      expect(execution.state).toBe('scheduled');
      await ctx.executionRows.update(execution.id, { state: 'in_progress', startedAt: ago(startedAgoMs) });
      await ctx.workflowRows.update(wf.id, { state: 'performing', currentStepName: execution.stepName, startedAt: ago(startedAgoMs) });
      return ctx.executionRows.findOneByOrFail({ id: execution.id });
    },
    /** The current scheduled execution made overdue by `lateMs`. */
    async makeOverdue(wf: WorkflowRecord, lateMs: number): Promise<StepExecution> {
      const execution = await h.current(wf);
      expect(execution.state).toBe('scheduled');
      await ctx.executionRows.update(execution.id, { scheduledFor: ago(lateMs) });
      return execution;
    },
    /** A workflow parked on its waitFor step, parked since `sinceMs` ago. */
    async parked(type: typeof DeliveryWorkflow | typeof ApprovalWorkflow, sinceMs = 0): Promise<WorkflowRecord> {
      const wf = await h.start(type);
      await ctx.app.gd.performNextStep(wf);
      await ctx.app.gd.assertWaitingForSignal(wf);
      if (sinceMs > 0) {
        const execution = await h.current(wf);
        await ctx.executionRows.update(execution.id, { waitingSince: ago(sinceMs) });
      }
      return wf;
    },
    jobIds: () => ctx.queue.jobs.map((job) => job.executionId),
    async run(): Promise<HousekeepingSummary> {
      ctx.queue.clear();
      return ctx.housekeeping.run();
    },
    async counts() {
      return { workflows: await ctx.workflowRows.count(), executions: await ctx.executionRows.count(), signals: await ctx.signalRows.count() };
    },
  };
  return h;
}

// ------------------------------------------------------------------------------------------------

describeEachDatabase('housekeeping: cleanup disabled (deleteCompletedWorkflowsAfter: null)', (kind) => {
  const ctx = useApp(kind, { deleteCompletedWorkflowsAfter: null });
  const h = helpers(ctx);

  it('keeps a year-old finished workflow and its rows; every summary key is present with zero counts', async () => {
    const wf = await h.finishedAgo(365 * DAY);
    const before = await h.counts();
    const summary = await h.run();
    expect(summary).toEqual({
      ...EMPTY,
      unrunnableExecutions: { total: 0, byWorkflow: {} },
      gauges: {
        'geneva_drive.waiting_step_executions': { total: 0, byWorkflow: {} },
        'geneva_drive.waiting_overdue': { total: 0, byWorkflow: {} },
        ...NO_RECOVERY_LIMIT_PAUSED,
        ...NO_DEADLINES,
      },
    });
    expect(await h.reload(wf)).toMatchObject({ state: 'finished' });
    expect(await h.counts()).toEqual(before);
  });
});

describeEachDatabase('housekeeping: retention (30d, batch size 2)', (kind) => {
  const ctx = useApp(kind, { deleteCompletedWorkflowsAfter: '30d', housekeepingBatchSize: 2 });
  const h = helpers(ctx);

  it('deletes a finished workflow older than 30 days with its executions and signals (signals first), and keeps a 1-day-old one with its rows', async () => {
    // Old: parked, woken by a signal, finished; a second signal stays buffered (unclaimed).
    const old = await h.parked(DeliveryWorkflow);
    await ctx.signals.signal(old, 'delivered', { payload: { parcel: 'P-1' } });
    await ctx.signals.signal(old, 'unrelated', { allowUnknownName: true, payload: {} });
    await ctx.app.gd.speedrunWorkflow(old);
    expect(old.state).toBe('finished');
    expect(hkJournal).toEqual(['delivered P-1', 'archived']);
    await ctx.workflowRows.update(old.id, { finishedAt: ago(31 * DAY), transitionedAt: ago(31 * DAY) });
    const oldExecutions = (await h.history(old)).length;
    expect(oldExecutions).toBe(2);

    // Recent: same shape, finished yesterday.
    const recent = await h.parked(DeliveryWorkflow);
    await ctx.signals.signal(recent, 'delivered', { payload: { parcel: 'P-2' } });
    await ctx.app.gd.speedrunWorkflow(recent);
    await ctx.workflowRows.update(recent.id, { finishedAt: ago(DAY), transitionedAt: ago(DAY) });

    const deletes = new DeleteCounter();
    ctx.app.dataSource.subscribers.push(deletes);
    let summary: HousekeepingSummary;
    try {
      summary = await h.run();
    } finally {
      ctx.app.dataSource.subscribers.splice(ctx.app.dataSource.subscribers.indexOf(deletes), 1);
    }
    expect(summary).toMatchObject({ ...EMPTY, workflowsDeleted: 1, stepExecutionsDeleted: oldExecutions, signalsDeleted: 2 });
    expect(deletes.counts).toEqual({ geneva_drive_signals: 1, geneva_drive_step_executions: 1, geneva_drive_workflows: 1 });

    expect(await ctx.workflowRows.findOneBy({ id: old.id })).toBeNull();
    expect(await ctx.executionRows.countBy({ workflowId: old.id })).toBe(0);
    expect(await ctx.signalRows.countBy({ workflowId: old.id })).toBe(0);

    expect(await h.reload(recent)).toMatchObject({ state: 'finished' });
    expect(await ctx.executionRows.countBy({ workflowId: recent.id })).toBe(2);
    expect(await ctx.signalRows.countBy({ workflowId: recent.id })).toBe(1);
  });

  it('deletes a canceled workflow older than the cutoff', async () => {
    const wf = await h.start(ChoreWorkflow);
    await ctx.workflows.cancel(wf);
    await ctx.workflowRows.update(wf.id, { finishedAt: ago(31 * DAY), transitionedAt: ago(31 * DAY) });
    const recent = await h.start(ChoreWorkflow, 'Bo');
    await ctx.workflows.cancel(recent);

    const summary = await h.run();
    expect(summary).toMatchObject({ workflowsDeleted: 1, stepExecutionsDeleted: 1, signalsDeleted: 0 });
    expect(await ctx.workflowRows.findOneBy({ id: wf.id })).toBeNull();
    expect(await h.reload(recent)).toMatchObject({ state: 'canceled' });
  });

  it('keeps ready and paused workflows whatever the age of their timestamps', async () => {
    const yearAgo = ago(365 * DAY);
    const ready = await h.start(ChoreWorkflow, 'Ready');
    await ctx.workflowRows.update(ready.id, { createdAt: yearAgo, updatedAt: yearAgo, finishedAt: yearAgo, transitionedAt: yearAgo });
    const paused = await h.start(ChoreWorkflow, 'Paused');
    await ctx.workflows.pause(paused);
    // Even a (never legitimate) finishedAt in the past does not make an ongoing workflow deletable.
    await ctx.workflowRows.update(paused.id, { createdAt: yearAgo, updatedAt: yearAgo, finishedAt: yearAgo, transitionedAt: yearAgo });
    const before = await h.counts();

    const summary = await h.run();
    expect(summary).toMatchObject({ workflowsDeleted: 0, stepExecutionsDeleted: 0, signalsDeleted: 0 });
    expect(await h.reload(ready)).toMatchObject({ state: 'ready' });
    expect(await h.reload(paused)).toMatchObject({ state: 'paused' });
    expect(await h.counts()).toEqual(before);
  });

  it('deletes all five old workflows with a batch size of 2, in ceil(5/2) = 3 delete batches', async () => {
    const old: WorkflowRecord[] = [];
    for (let i = 0; i < 5; i++) old.push(await h.finishedAgo(40 * DAY, `Old ${i}`));
    const recent = await h.finishedAgo(2 * DAY, 'Recent');

    const deletes = new DeleteCounter();
    ctx.app.dataSource.subscribers.push(deletes);
    let summary: HousekeepingSummary;
    try {
      summary = await h.run();
    } finally {
      ctx.app.dataSource.subscribers.splice(ctx.app.dataSource.subscribers.indexOf(deletes), 1);
    }
    expect(summary).toMatchObject({ workflowsDeleted: 5, stepExecutionsDeleted: 10, signalsDeleted: 0 });
    expect(deletes.counts.geneva_drive_workflows).toBe(3);
    expect(await ctx.workflowRows.find({ select: { id: true } })).toEqual([expect.objectContaining({ id: recent.id })]);
    expect(await ctx.executionRows.countBy({ workflowId: recent.id })).toBe(2);
    for (const wf of old) expect(await ctx.executionRows.countBy({ workflowId: wf.id })).toBe(0);
  });

  it('one run deletes an old finished workflow and recovers a stuck in_progress one', async () => {
    const old = await h.finishedAgo(31 * DAY);
    const stuck = await h.start(ChoreWorkflow, 'Stuck');
    const row = await h.leaveInProgress(stuck, 2 * HOUR);

    const summary = await h.run();
    expect(summary).toMatchObject({ workflowsDeleted: 1, stepExecutionsDeleted: 2, stuckInProgressRecovered: 1, unrecoverable: [] });
    expect(await ctx.workflowRows.findOneBy({ id: old.id })).toBeNull();
    expect(await h.reload(stuck)).toMatchObject({ state: 'ready', nextStepName: row.stepName });
    expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'completed', outcome: 'recovered' });
  });

  it('seeded mix of 150 finished/canceled workflows of different ages: exactly the older than 30 days are deleted, twice with the same result', async () => {
    const seedAndRun = async () => {
      await ctx.app.reset();
      const random = seeded(42);
      const rows: Partial<WorkflowRecord>[] = [];
      let expectedOld = 0;
      for (let i = 0; i < 150; i++) {
        const ageDays = Math.floor(random() * 60); // 0..59 days
        const finishedAt = ago(ageDays * DAY + HOUR); // never on the cutoff itself
        if (ageDays >= 30) expectedOld++;
        rows.push({
          type: 'ChoreWorkflow',
          heroType: 'TestHero',
          heroId: String(i + 1),
          state: random() < 0.5 ? 'finished' : 'canceled',
          allowMultiple: false,
          startedAt: finishedAt,
          transitionedAt: finishedAt,
          finishedAt,
          createdAt: finishedAt,
          updatedAt: finishedAt,
        });
      }
      await ctx.workflowRows.insert(rows);
      const summary = await h.run();
      const remaining = await ctx.workflowRows.find();
      return { summary, expectedOld, remaining };
    };
    const first = await seedAndRun();
    expect(first.expectedOld).toBeGreaterThan(30);
    expect(first.expectedOld).toBeLessThan(120);
    expect(first.summary.workflowsDeleted).toBe(first.expectedOld);
    expect(first.remaining).toHaveLength(150 - first.expectedOld);
    const cutoff = Date.now() - 30 * DAY;
    for (const wf of first.remaining) expect(wf.finishedAt!.getTime()).toBeGreaterThan(cutoff);

    const second = await seedAndRun();
    expect(second.summary.workflowsDeleted).toBe(first.summary.workflowsDeleted);
  });
});

// ------------------------------------------------------------------------------------------------

describeEachDatabase('housekeeping: stuck recovery, reattempt (thresholds 1h, batch size 3)', (kind) => {
  const ctx = useApp(kind, { stuckInProgressThreshold: '1h', stuckScheduledThreshold: '1h', housekeepingBatchSize: 3 });
  const h = helpers(ctx);

  it('in_progress for 2h: the row becomes completed/recovered, the workflow ready, and a NEW execution of the same step is scheduled and enqueued', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.leaveInProgress(wf, 2 * HOUR);

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });

    const history = await h.history(wf);
    expect(history.map((e) => [e.id, e.stepName, e.state, e.outcome])).toEqual([
      [row.id, 'sweep', 'completed', 'recovered'],
      [expect.any(String), 'sweep', 'scheduled', null],
    ]);
    expect(history[0].completedAt).toBeInstanceOf(Date);
    expect(history[0].finishedAt).toBeInstanceOf(Date);
    expect(history[1].id).not.toBe(row.id);
    expect(history[1].scheduledFor.getTime()).toBeGreaterThan(Date.now() - MINUTE);
    expect(await h.reload(wf)).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'sweep' });
    expect(h.jobIds()).toEqual([history[1].id]);

    await ctx.app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(hkJournal).toEqual(['sweep Ada', 'mop Ada']);
  });

  it('in_progress for only 30 min: untouched', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.leaveInProgress(wf, 30 * MINUTE);
    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'in_progress', outcome: null });
    expect(await h.reload(wf)).toMatchObject({ state: 'performing' });
    expect(h.jobIds()).toEqual([]);
  });

  it('scheduled and 2h overdue (a lost enqueue): the SAME execution is enqueued again (job id = execution id), no new row is created', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.makeOverdue(wf, 2 * HOUR);

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckScheduledRecovered: 1 });
    expect(h.jobIds()).toEqual([row.id]);
    const history = await h.history(wf);
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ id: row.id, state: 'scheduled', outcome: null });
    expect(await h.reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'sweep' });

    // The job runs the very row that was stuck.
    await ctx.app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect((await h.history(wf)).map((e) => [e.id === row.id, e.stepName, e.outcome])).toEqual([
      [true, 'sweep', 'success'],
      [false, 'mop', 'success'],
    ]);
  });

  it('a row due in the future and one due 30 min ago are untouched', async () => {
    const future = await h.start(ChoreWorkflow, 'Future');
    const futureRow = await h.current(future);
    await ctx.executionRows.update(futureRow.id, { scheduledFor: new Date(Date.now() + 2 * HOUR) });
    const recent = await h.start(ChoreWorkflow, 'Recent');
    const recentRow = await h.makeOverdue(recent, 30 * MINUTE);

    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(h.jobIds()).toEqual([]);
    expect(await ctx.executionRows.findOneByOrFail({ id: futureRow.id })).toMatchObject({ state: 'scheduled' });
    expect(await ctx.executionRows.findOneByOrFail({ id: recentRow.id })).toMatchObject({ state: 'scheduled' });
    expect(await ctx.executionRows.count()).toBe(2);
  });

  it('seven stuck in_progress and seven stuck scheduled rows, batch size 3: all fourteen recovered in one run', async () => {
    const inProgress: StepExecution[] = [];
    const scheduled: StepExecution[] = [];
    for (let i = 0; i < 7; i++) {
      inProgress.push(await h.leaveInProgress(await h.start(ChoreWorkflow, `IP ${i}`), 3 * HOUR));
      scheduled.push(await h.makeOverdue(await h.start(ChoreWorkflow, `S ${i}`), 3 * HOUR));
    }
    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 7, stuckScheduledRecovered: 7 });
    expect(await ctx.executionRows.countBy({ state: 'in_progress' })).toBe(0);
    for (const row of inProgress) expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'completed', outcome: 'recovered' });
    // Every scheduled row enqueued again once; every recovered in_progress row has one new execution enqueued.
    const jobs = h.jobIds();
    expect(jobs).toHaveLength(14);
    expect(new Set(jobs).size).toBe(14);
    for (const row of scheduled) expect(jobs).toContain(row.id);
    expect(await ctx.executionRows.count()).toBe(21);
  });

  it('never recovers a waiting (parked) execution, whatever its age (SIG-64)', async () => {
    const wf = await h.parked(DeliveryWorkflow);
    const row = await h.current(wf);
    const yearAgo = ago(365 * DAY);
    await ctx.executionRows.update(row.id, { waitingSince: yearAgo, scheduledFor: yearAgo, createdAt: yearAgo, startedAt: yearAgo });

    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(h.jobIds()).toEqual([]);
    expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'waiting', outcome: null });
    expect(await ctx.executionRows.count()).toBe(1);
    await ctx.app.gd.assertWaitingForSignal(wf, 'delivered');
  });

  it('never touches a paused workflow: its preserved overdue scheduled execution (and even a forced old in_progress row) stay as they are (SPEC §5)', async () => {
    const paused = await h.start(ChoreWorkflow, 'Paused');
    await ctx.workflows.pause(paused);
    const kept = await h.makeOverdue(paused, 365 * DAY);

    const forced = await h.start(ChoreWorkflow, 'Forced');
    const forcedRow = await h.leaveInProgress(forced, 365 * DAY);
    await ctx.workflowRows.update(forced.id, { state: 'paused' });

    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(h.jobIds()).toEqual([]);
    expect(await ctx.executionRows.findOneByOrFail({ id: kept.id })).toMatchObject({ state: 'scheduled', outcome: null });
    expect(await ctx.executionRows.findOneByOrFail({ id: forcedRow.id })).toMatchObject({ state: 'in_progress', outcome: null });
    expect(await h.reload(paused)).toMatchObject({ state: 'paused' });
    expect(await h.reload(forced)).toMatchObject({ state: 'paused' });
    expect(await ctx.executionRows.count()).toBe(2);

    // Resuming hands the kept execution back to the queue, and it runs.
    await ctx.workflows.resume(paused);
    await ctx.app.gd.speedrunWorkflow(paused);
    expect(paused.state).toBe('finished');
  });

  it('leaves alone (and does not raise on) a stuck row whose workflow was force-set to canceled', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.leaveInProgress(wf, 3 * HOUR);
    await ctx.workflowRows.update(wf.id, { state: 'canceled', finishedAt: new Date() });
    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'in_progress' });
  });

  it('recovery does not need the current code: a row of a step and hero type that no longer exist is still recovered', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.leaveInProgress(wf, 2 * HOUR);
    await ctx.executionRows.update(row.id, { stepName: 'removedStep' });
    await ctx.workflowRows.update(wf.id, { heroType: 'RemovedHero', currentStepName: 'removedStep' });

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });
    const history = await h.history(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['removedStep', 'completed', 'recovered'],
      ['removedStep', 'scheduled', null],
    ]);
  });

  it('a worker still running when its row is recovered: its late outcome is discarded, and the step runs again', async () => {
    const gate = slowStep.arm();
    const wf = await h.start(SlowWorkflow);
    const running = ctx.app.gd.performNextStep(wf);
    await gate.started;
    const row = await h.current(wf);
    expect(row.state).toBe('in_progress');
    await ctx.executionRows.update(row.id, { startedAt: ago(2 * HOUR) });

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });

    gate.finish();
    const finished = await running;
    expect(finished).toMatchObject({ id: row.id, state: 'completed', outcome: 'recovered' });
    expect(await h.reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'crunch' });

    slowStep.release = Promise.resolve();
    await ctx.app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(hkJournal).toEqual(['crunch started', 'crunch finished', 'crunch started', 'crunch finished', 'report']);
    expect((await h.history(wf)).map((e) => [e.stepName, e.outcome])).toEqual([
      ['crunch', 'recovered'],
      ['crunch', 'success'],
      ['report', 'success'],
    ]);
  });

  it('a woken execution that crashed mid-step: the new execution keeps the signal pin, sees the same payload, and the signal is consumed once (SIG-67)', async () => {
    const wf = await h.parked(DeliveryWorkflow);
    const signal = await ctx.signals.signal(wf, 'delivered', { payload: { parcel: 'P-9' } });
    const woken = await h.current(wf);
    expect(woken).toMatchObject({ state: 'scheduled', signalId: signal.id });
    await h.leaveInProgress(wf, 2 * HOUR);

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });
    const successor = await h.current(wf);
    expect(successor).toMatchObject({ stepName: 'awaitDelivery', state: 'scheduled', signalId: signal.id });
    expect(successor.id).not.toBe(woken.id);
    expect(await ctx.signalRows.findOneByOrFail({ id: signal.id })).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });

    await ctx.app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(hkJournal).toEqual(['delivered P-9', 'archived']);
    expect(await ctx.signalRows.findOneByOrFail({ id: signal.id })).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
    expect(await ctx.signalRows.countBy({ workflowId: wf.id })).toBe(1);
  });

  it('reports rows whose recovery throws in unrecoverable, still recovers the others across batches, terminates, and retries them next run', async () => {
    // Five stuck rows over two batches of 3; the workflows of three of them have no step left to run
    // again (both step names NULL), so their recovery throws and rolls back.
    const rows: StepExecution[] = [];
    for (let i = 0; i < 5; i++) rows.push(await h.leaveInProgress(await h.start(ChoreWorkflow, `W ${i}`), 2 * HOUR));
    const broken = [rows[0], rows[2], rows[4]];
    for (const row of broken) await ctx.workflowRows.update(row.workflowId, { currentStepName: null, nextStepName: null });

    const first = await h.run();
    expect(first).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 2, unrecoverable: broken.map((row) => row.id) });
    for (const row of broken) {
      expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'in_progress', outcome: null });
      expect(await ctx.executionRows.countBy({ workflowId: row.workflowId })).toBe(1);
      expect(await h.reload(row.workflowId)).toMatchObject({ state: 'performing' });
    }
    for (const row of [rows[1], rows[3]]) expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ outcome: 'recovered' });

    const second = await h.run();
    expect(second).toMatchObject({ ...EMPTY, unrecoverable: broken.map((row) => row.id) });

    // Repaired, one is recovered by the next run.
    await ctx.workflowRows.update(rows[2].workflowId, { nextStepName: 'sweep' });
    const third = await h.run();
    expect(third).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1, unrecoverable: [rows[0].id, rows[4].id] });
    expect(await ctx.executionRows.findOneByOrFail({ id: rows[2].id })).toMatchObject({ state: 'completed', outcome: 'recovered' });
  });

  it('seeded mix of 40 workflows (stuck/recent in_progress, stuck/recent/future scheduled, parked, paused, finished): every counter matches', async () => {
    const random = seeded(7);
    const expected = { inProgress: 0, scheduled: 0 };
    const untouched: string[] = [];
    for (let i = 0; i < 40; i++) {
      const pick = Math.floor(random() * 7);
      if (pick === 0) {
        await h.leaveInProgress(await h.start(ChoreWorkflow, `W${i}`), 2 * HOUR);
        expected.inProgress++;
      } else if (pick === 1) {
        untouched.push((await h.leaveInProgress(await h.start(ChoreWorkflow, `W${i}`), 10 * MINUTE)).id);
      } else if (pick === 2) {
        await h.makeOverdue(await h.start(ChoreWorkflow, `W${i}`), 5 * HOUR);
        expected.scheduled++;
      } else if (pick === 3) {
        untouched.push((await h.makeOverdue(await h.start(ChoreWorkflow, `W${i}`), 20 * MINUTE)).id);
      } else if (pick === 4) {
        untouched.push((await h.current(await h.parked(DeliveryWorkflow, 90 * DAY))).id);
      } else if (pick === 5) {
        const wf = await h.start(ChoreWorkflow, `W${i}`);
        await ctx.workflows.pause(wf);
        untouched.push((await h.makeOverdue(wf, 90 * DAY)).id);
      } else {
        await h.finishedAgo(DAY, `W${i}`);
      }
    }
    expect(expected.inProgress).toBeGreaterThan(0);
    expect(expected.scheduled).toBeGreaterThan(0);
    const before = await Promise.all(untouched.map((id) => ctx.executionRows.findOneByOrFail({ id })));

    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: expected.inProgress, stuckScheduledRecovered: expected.scheduled });
    const after = await Promise.all(untouched.map((id) => ctx.executionRows.findOneByOrFail({ id })));
    expect(after.map((e) => [e.id, e.state, e.updatedAt.getTime()])).toEqual(before.map((e) => [e.id, e.state, e.updatedAt.getTime()]));
  });
});

// ------------------------------------------------------------------------------------------------

for (const primaryKey of ['bigint', 'uuid'] as const) describeEachDatabase(`housekeeping: recovery limit (maxRecoveries 2, thresholds 1h, ${primaryKey} keys)`, (kind) => {
  const logger = new ErrorLines();
  const ctx = useApp(kind, { stuckInProgressThreshold: '1h', maxRecoveries: 2, logger, primaryKey });
  const h = helpers(ctx);
  const events: HousekeepingSummary[] = [];
  const onHousekeeping = (message: unknown) => events.push(message as HousekeepingSummary);
  beforeAll(() => diagnostics.subscribe(GENEVA_DRIVE_CHANNELS.housekeeping, onHousekeeping));
  afterAll(() => {
    diagnostics.unsubscribe(GENEVA_DRIVE_CHANNELS.housekeeping, onHousekeeping);
  });
  beforeEach(() => {
    logger.errors.length = 0;
    events.length = 0;
    brittle.throwNext = false;
  });

  /** Leaves the current execution in progress, as a worker killed inside the body would, and runs housekeeping. */
  const crashAndSweep = async (wf: WorkflowRecord) => {
    const row = await h.leaveInProgress(wf, 2 * HOUR);
    return { row, summary: await h.run() };
  };

  it('a step whose worker keeps dying is run again twice, then its workflow is paused with the reason on the execution, an error line, the event and the gauge', async () => {
    const wf = await h.start(ChoreWorkflow);
    for (let recovery = 1; recovery <= 2; recovery++) {
      const { summary } = await crashAndSweep(wf);
      expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });
    }
    const { row, summary } = await crashAndSweep(wf);

    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 0, pausedAtRecoveryLimit: [wf.id] });
    expect(summary.gauges?.['geneva_drive.recovery_limit_paused']).toEqual({ total: 1, byWorkflow: { ChoreWorkflow: 1 } });
    expect(summary.gauges?.['geneva_drive.paused_workflows']).toEqual({ total: 1, byWorkflow: { ChoreWorkflow: 1 } });
    expect(h.jobIds()).toEqual([]);
    const history = await h.history(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['sweep', 'completed', 'recovered'],
      ['sweep', 'completed', 'recovered'],
      ['sweep', 'failed', 'failed'],
    ]);
    const parked = history[2];
    expect(parked.id).toBe(row.id);
    expect(parked).toMatchObject({ errorClassName: 'StepRecoveryLimitError', failedAt: expect.any(Date) });
    expect(parked.errorMessage).toMatch(/^Step "sweep" of workflow \S+ is stuck in_progress again .* after 2 recoveries in a row \(maxRecoveries 2\)/);
    expect(parked.metadata).toMatchObject({ recoveryLimit: { recoveries: 2, maxRecoveries: 2 }, exception: { class: 'StepRecoveryLimitError' } });
    expect(await h.reload(wf)).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'sweep' });
    expect(logger.errors).toEqual([expect.stringContaining(`Step "sweep" of workflow ${wf.id} is stuck in_progress again`)]);
    expect(events.at(-1)).toMatchObject({ pausedAtRecoveryLimit: [wf.id] });
    expect(hkJournal).toEqual([]);

    // Paused, so later runs leave it alone and keep counting it in the gauge.
    expect(await h.run()).toMatchObject({ ...EMPTY, gauges: { 'geneva_drive.recovery_limit_paused': { total: 1 } } });

    // Resumed once the cause is fixed: the step runs again, the gauge drops, and the count starts over.
    await ctx.workflows.resume(wf);
    expect((await h.run()).gauges?.['geneva_drive.recovery_limit_paused']).toEqual({ total: 0, byWorkflow: {} });
    expect(await crashAndSweep(wf)).toMatchObject({ summary: { stuckInProgressRecovered: 1, pausedAtRecoveryLimit: [] } });
    await ctx.app.gd.speedrunWorkflow(wf);
    expect(wf.state).toBe('finished');
    expect(hkJournal).toEqual(['sweep Ada', 'mop Ada']);
  });

  it("the step's own maxRecoveries (1) overrides the module's, and a reattempt after an exception between two crashes does not reset the count", async () => {
    const wf = await h.start(BrittleWorkflow);
    expect((await crashAndSweep(wf)).summary).toMatchObject({ stuckInProgressRecovered: 1 });
    brittle.throwNext = true;
    await expect(ctx.app.gd.performNextStep(wf)).rejects.toThrow('brew failed');

    const { summary } = await crashAndSweep(wf);
    expect(summary).toMatchObject({ stuckInProgressRecovered: 0, pausedAtRecoveryLimit: [wf.id] });
    const history = await h.history(wf);
    expect(history.map((e) => [e.state, e.outcome])).toEqual([
      ['completed', 'recovered'],
      ['completed', 'reattempted'],
      ['failed', 'failed'],
    ]);
    expect(history[2].metadata).toMatchObject({ recoveryLimit: { recoveries: 1, maxRecoveries: 1 } });
    expect(summary.gauges?.['geneva_drive.recovery_limit_paused']).toEqual({ total: 1, byWorkflow: { BrittleWorkflow: 1 } });
  });

  it('counts per workflow and per step: recoveries of one workflow, or of an earlier step that then succeeded, do not count for another', async () => {
    const first = await h.start(ChoreWorkflow, 'First');
    const second = await h.start(ChoreWorkflow, 'Second');
    for (let recovery = 1; recovery <= 2; recovery++) await crashAndSweep(first);
    // sweep of `second` was recovered twice, then succeeded; its next step mop may still be recovered twice.
    for (let recovery = 1; recovery <= 2; recovery++) await crashAndSweep(second);
    await ctx.app.gd.performNextStep(second);
    expect(await h.current(second)).toMatchObject({ stepName: 'mop', state: 'scheduled' });
    for (let recovery = 1; recovery <= 2; recovery++) {
      expect((await crashAndSweep(second)).summary).toMatchObject({ stuckInProgressRecovered: 1, pausedAtRecoveryLimit: [] });
    }
    expect((await crashAndSweep(first)).summary).toMatchObject({ pausedAtRecoveryLimit: [first.id] });
    expect(await h.reload(second)).toMatchObject({ state: 'ready', nextStepName: 'mop' });
  });
});

describeEachDatabase('housekeeping: stuck recovery, cancel (thresholds 1h, batch size 3)', (kind) => {
  const ctx = useApp(kind, { stuckRecoveryAction: 'cancel', stuckInProgressThreshold: '1h', stuckScheduledThreshold: '1h', housekeepingBatchSize: 3 });
  const h = helpers(ctx);

  it('a stuck in_progress row becomes canceled/recovered and its workflow canceled; nothing is scheduled', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.leaveInProgress(wf, 2 * HOUR);
    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckInProgressRecovered: 1 });
    const history = await h.history(wf);
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({ id: row.id, state: 'canceled', outcome: 'recovered' });
    expect(history[0].canceledAt).toBeInstanceOf(Date);
    expect(await h.reload(wf)).toMatchObject({ state: 'canceled', currentStepName: null });
    expect((await h.reload(wf)).finishedAt).toBeInstanceOf(Date);
    expect(h.jobIds()).toEqual([]);
  });

  it('a stuck scheduled row becomes canceled/recovered and its workflow canceled', async () => {
    const wf = await h.start(ChoreWorkflow);
    const row = await h.makeOverdue(wf, 2 * HOUR);
    const summary = await h.run();
    expect(summary).toMatchObject({ ...EMPTY, stuckScheduledRecovered: 1 });
    expect(await ctx.executionRows.findOneByOrFail({ id: row.id })).toMatchObject({ state: 'canceled', outcome: 'recovered' });
    expect(await h.reload(wf)).toMatchObject({ state: 'canceled' });
    expect(h.jobIds()).toEqual([]);
  });

  it('never cancels a paused workflow or a parked execution, whatever their age', async () => {
    const paused = await h.start(ChoreWorkflow, 'Paused');
    await ctx.workflows.pause(paused);
    const kept = await h.makeOverdue(paused, 365 * DAY);
    const parked = await h.parked(ApprovalWorkflow, 365 * DAY);
    const parkedRow = await h.current(parked);
    await ctx.executionRows.update(parkedRow.id, { scheduledFor: ago(365 * DAY) });

    const summary = await h.run();
    expect(summary).toMatchObject(EMPTY);
    expect(await h.reload(paused)).toMatchObject({ state: 'paused' });
    expect(await ctx.executionRows.findOneByOrFail({ id: kept.id })).toMatchObject({ state: 'scheduled' });
    expect(await h.reload(parked)).toMatchObject({ state: 'ready' });
    expect(await ctx.executionRows.findOneByOrFail({ id: parkedRow.id })).toMatchObject({ state: 'waiting' });
  });

  it('seeded mix of 150 in_progress and scheduled rows (stuck, recent, future): exactly the stuck ones are canceled', async () => {
    const random = seeded(1234);
    const stuck = new Set<string>();
    const fresh = new Set<string>();
    for (let i = 0; i < 150; i++) {
      const wf = await h.start(ChoreWorkflow, `W${i}`);
      const roll = random();
      if (roll < 0.25) stuck.add((await h.leaveInProgress(wf, (61 + Math.floor(random() * 600)) * MINUTE)).id);
      else if (roll < 0.45) fresh.add((await h.leaveInProgress(wf, Math.floor(random() * 59) * MINUTE)).id);
      else if (roll < 0.7) stuck.add((await h.makeOverdue(wf, (61 + Math.floor(random() * 600)) * MINUTE)).id);
      else if (roll < 0.85) fresh.add((await h.makeOverdue(wf, Math.floor(random() * 59) * MINUTE)).id);
      else {
        const row = await h.current(wf);
        await ctx.executionRows.update(row.id, { scheduledFor: new Date(Date.now() + Math.floor(random() * 600) * MINUTE) });
        fresh.add(row.id);
      }
    }
    const summary = await h.run();
    expect(summary.stuckInProgressRecovered + summary.stuckScheduledRecovered).toBe(stuck.size);
    expect(summary.unrecoverable).toEqual([]);
    const canceled = await ctx.executionRows.find({ where: { state: 'canceled' } });
    expect(new Set(canceled.map((e) => e.id))).toEqual(stuck);
    for (const e of canceled) expect(e.outcome).toBe('recovered');
    const active = await ctx.executionRows.find({ where: [{ state: 'scheduled' }, { state: 'in_progress' }] });
    expect(new Set(active.map((e) => e.id))).toEqual(fresh);
    const states = (await ctx.workflowRows.find()).map((w) => w.state);
    expect(states.filter((s: WorkflowState) => s === 'canceled')).toHaveLength(stuck.size);
  });
});

// ------------------------------------------------------------------------------------------------

describeEachDatabase('housekeeping: waiting gauges (waitingVisibilityThreshold 7d)', (kind) => {
  const ctx = useApp(kind, { waitingVisibilityThreshold: '7d' });
  const h = helpers(ctx);

  it('counts waiting executions per workflow type, and those parked longer than the threshold as overdue (SIG-65)', async () => {
    await h.parked(DeliveryWorkflow, 8 * DAY);
    await h.parked(DeliveryWorkflow, 30 * DAY);
    await h.parked(DeliveryWorkflow, 6 * DAY);
    await h.parked(ApprovalWorkflow, 365 * DAY);
    await h.parked(ApprovalWorkflow);
    // Not waiting: a woken one, a scheduled plain step, a finished workflow.
    const woken = await h.parked(DeliveryWorkflow, 90 * DAY);
    await ctx.signals.signal(woken, 'delivered', { payload: { parcel: 'X' } });
    await h.start(ChoreWorkflow);
    await h.finishedAgo(DAY);

    const summary = await h.run();
    expect(summary.gauges).toEqual({
      'geneva_drive.waiting_step_executions': { total: 5, byWorkflow: { DeliveryWorkflow: 3, ApprovalWorkflow: 2 } },
      'geneva_drive.waiting_overdue': { total: 3, byWorkflow: { DeliveryWorkflow: 2, ApprovalWorkflow: 1 } },
      ...NO_RECOVERY_LIMIT_PAUSED,
      ...NO_DEADLINES,
    });
  });

  it('counts every paused workflow per type, whatever paused it', async () => {
    const byOperator = await h.start(ChoreWorkflow);
    await ctx.workflows.pause(byOperator);
    await ctx.workflows.pause(await h.parked(DeliveryWorkflow));
    await h.start(ChoreWorkflow); // running, not paused
    const summary = await h.run();
    expect(summary.gauges?.['geneva_drive.paused_workflows']).toEqual({ total: 2, byWorkflow: { ChoreWorkflow: 1, DeliveryWorkflow: 1 } });
    // Neither was paused by the recovery limit.
    expect(summary.gauges?.['geneva_drive.recovery_limit_paused']).toEqual({ total: 0, byWorkflow: {} });
  });

  it('reads zero gauges when nothing waits', async () => {
    await h.start(ChoreWorkflow);
    const summary = await h.run();
    expect(summary.gauges).toEqual({
      'geneva_drive.waiting_step_executions': { total: 0, byWorkflow: {} },
      'geneva_drive.waiting_overdue': { total: 0, byWorkflow: {} },
      ...NO_RECOVERY_LIMIT_PAUSED,
      ...NO_DEADLINES,
    });
  });
});

describeEachDatabase('housekeeping: overdue gauge turned off (waitingVisibilityThreshold null)', (kind) => {
  const ctx = useApp(kind, { waitingVisibilityThreshold: null });
  const h = helpers(ctx);

  it('reports only the waiting gauge (SIG-65)', async () => {
    await h.parked(DeliveryWorkflow, 365 * DAY);
    const summary = await h.run();
    expect(summary.gauges).toEqual({
      'geneva_drive.waiting_step_executions': { total: 1, byWorkflow: { DeliveryWorkflow: 1 } },
      ...NO_RECOVERY_LIMIT_PAUSED,
      ...NO_DEADLINES,
    });
  });
});

describeEachDatabase('housekeeping: database without the signals migration', (kind) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp(kind, [ChoreWorkflow], { withoutSignals: true, stuckInProgressThreshold: '1h' });
  });
  afterAll(async () => {
    await app.close();
  });
  afterEach(() => app.reset());

  it('gauges are null and old workflows are still deleted (signalsDeleted 0) and stuck rows recovered, without raising', async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const old = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Old' })));
    await app.gd.speedrunWorkflow(old);
    await app.dataSource.getRepository(WorkflowRecord).update(old.id, { finishedAt: ago(31 * DAY) });
    const stuck = await workflows.start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Stuck' })));
    const [row] = await workflows.executionHistory(stuck);
    await app.dataSource.getRepository(StepExecution).update(row.id, { state: 'in_progress', startedAt: ago(2 * HOUR) });
    await app.dataSource.getRepository(WorkflowRecord).update(stuck.id, { state: 'performing', currentStepName: 'sweep' });

    const summary = await app.moduleRef.get(HousekeepingService).run();
    // The recovered step is due, and this manual-queue process runs no step jobs: reported unrunnable (see process-table.e2e-spec.ts).
    const unrunnableExecutions = { total: 1, byWorkflow: { ChoreWorkflow: { sweep: 1 } } };
    expect(summary).toEqual({ ...EMPTY, workflowsDeleted: 1, stepExecutionsDeleted: 2, stuckInProgressRecovered: 1, unrunnableExecutions, gauges: null });
    expect(await app.dataSource.getRepository(WorkflowRecord).findOneBy({ id: old.id })).toBeNull();
    await app.gd.speedrunWorkflow(stuck);
    expect(stuck.state).toBe('finished');
  });
});
