/**
 * Resumable steps inside the engine: upstream's supplementary [later] tests (cursor size limit,
 * exception policies, job options of successors, resume after a failure, out-of-band pause, skipIf
 * on continuations, housekeeping recovery), the interrupt triggers (maxRuntime, shutdown), keyset
 * iteration over a real table, and resumable `waitFor` steps (SIG-49).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  CursorTooLargeError,
  ExecutorService,
  HousekeepingService,
  InvalidStateError,
  SignalService,
  StepExecution,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import { waitFor } from '../src/resumable-app.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  BatchesWorkflow,
  ClassPolicyWalkWorkflow,
  CodeKeysetWorkflow,
  createRecordsTable,
  CursorBlobWorkflow,
  ExhaustingWalkWorkflow,
  Hold,
  holds,
  JobOptionsWalkWorkflow,
  MaxRuntimeWalkWorkflow,
  OutOfBandPauseWorkflow,
  PausingOnErrorWalkWorkflow,
  RecordsWalkWorkflow,
  ResumableRecord,
  seen,
  ShutdownWalkWorkflow,
  SignalWalkWorkflow,
  signalProbe,
  SkipIfWalkWorkflow,
  SlowWalkWorkflow,
  StallingWalkWorkflow,
} from '../src/resumable-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const WORKFLOWS = [
  BatchesWorkflow,
  ClassPolicyWalkWorkflow,
  CodeKeysetWorkflow,
  CursorBlobWorkflow,
  ExhaustingWalkWorkflow,
  JobOptionsWalkWorkflow,
  MaxRuntimeWalkWorkflow,
  OutOfBandPauseWorkflow,
  PausingOnErrorWalkWorkflow,
  RecordsWalkWorkflow,
  SignalWalkWorkflow,
  SkipIfWalkWorkflow,
  StallingWalkWorkflow,
];

/** Encoded size of the cursor `{ blob: 'x' × n }` is n + 11 bytes (`{"blob":"…"}`). */
const BLOB_OVERHEAD = 11;
const HOUR = 3600_000;

describeEachDatabase('resumable steps in the engine', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let hero: TestHero;
  const chain = async (workflowId: string, step: string) => (await workflows.executionHistory(workflowId)).filter((e) => e.stepName === step);
  const execution = (id: string) => app.dataSource.getRepository(StepExecution).findOneByOrFail({ id });
  /** Runs executions as the queue would (interruptible), until the workflow has none left. */
  const runAsQueue = async (workflowId: string, limit = 60) => {
    for (let runs = 0; runs < limit; runs++) {
      const current = await workflows.currentExecution(workflowId);
      if (!current) return;
      await executor.execute(current.id);
    }
    throw new Error(`still running after ${limit} executions`);
  };
  /** What a worker that died mid-step leaves: the execution in_progress since long ago, the workflow performing. */
  const simulateDeadWorker = async (wf: WorkflowRecord, executionId: string) => {
    await app.dataSource.createQueryBuilder().update(StepExecution).set({ state: 'in_progress', startedAt: new Date(Date.now() - 2 * HOUR) }).where('id = :id', { id: executionId }).execute();
    await app.dataSource.createQueryBuilder().update(WorkflowRecord).set({ state: 'performing', currentStepName: 'walk' }).where('id = :id', { id: wf.id }).execute();
  };

  beforeAll(async () => {
    app = await createTestApp(kind, WORKFLOWS, { entities: [ResumableRecord] });
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
    const queryRunner = app.dataSource.createQueryRunner();
    try {
      await createRecordsTable(queryRunner);
    } finally {
      await queryRunner.release();
    }
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    await app.dataSource.getRepository(ResumableRecord).clear();
    seen.length = 0;
    holds.clear();
    CursorBlobWorkflow.size = 10;
    CursorBlobWorkflow.via = 'set';
    ClassPolicyWalkWorkflow.failed = false;
    PausingOnErrorWalkWorkflow.failOn = 'c';
    OutOfBandPauseWorkflow.pauseAt = 'b';
    SkipIfWalkWorkflow.skip = false;
    Object.assign(signalProbe, { matcherCalls: 0, pauseAt: null, failAt: null, onError: 'pause' });
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'i' }));
  });

  // ------------------------------------------------------------------ cursor size limit

  describe('cursor size limit (maxCursorSize, default 131072 bytes)', () => {
    it('a cursor of exactly maxCursorSize bytes is stored and the workflow goes on', async () => {
      CursorBlobWorkflow.size = 131_072 - BLOB_OVERHEAD;
      const wf = await workflows.start(CursorBlobWorkflow, hero);
      await app.gd.speedrunWorkflow(wf);
      expect(seen).toEqual(['stored', 'after']);
      const [big] = await chain(wf.id, 'big');
      expect((big.cursor as { blob: string }).blob).toHaveLength(131_072 - BLOB_OVERHEAD);
      expect(wf.state).toBe('finished');
    });

    it.each(['set', 'skipTo'] as const)('one byte more through %s is a CursorTooLargeError naming maxCursorSize: the step fails, nothing is stored, the workflow pauses', async (via) => {
      CursorBlobWorkflow.size = 131_072 - BLOB_OVERHEAD + 1;
      CursorBlobWorkflow.via = via;
      const wf = await workflows.start(CursorBlobWorkflow, hero);
      const run = app.gd.performNextStep(wf);
      await expect(run).rejects.toThrow(CursorTooLargeError);
      await expect(run).rejects.toThrow('Cursor is 131073 bytes, over maxCursorSize (131072)');
      const [big] = await chain(wf.id, 'big');
      expect(big).toMatchObject({ state: 'failed', outcome: 'failed', errorClassName: 'CursorTooLargeError', cursor: null });
      expect(big.errorMessage).toContain('maxCursorSize');
      expect(seen).toEqual([]);
      expect(wf.state).toBe('paused');
      expect(await workflows.currentExecution(wf)).toBeNull();
    });
  });

  // ------------------------------------------------------------------ exception policies

  it('a class-level onException reattempt applies inside resumable steps and continues from the cursor: [1, 2, 3, 3, 4, 5]', async () => {
    const wf = await workflows.start(ClassPolicyWalkWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('item 3 failed');
    const [failed] = await chain(wf.id, 'walk');
    expect([failed.state, failed.outcome, failed.cursor]).toEqual(['completed', 'reattempted', 2]);
    expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2, continuesFromId: failed.id });
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([1, 2, 3, 3, 4, 5]);
    expect(wf.state).toBe('finished');
  });

  it('class-level reattempts are counted across the chain; once exhausted the terminal action (cancel) applies; item 1 is never redone', async () => {
    const wf = await workflows.start(ExhaustingWalkWorkflow, hero);
    for (let attempt = 0; attempt < 3; attempt++) await expect(app.gd.performNextStep(wf)).rejects.toThrow('item 2 always fails');
    expect(seen).toEqual([1, 2, 2, 2]);
    const walks = await chain(wf.id, 'walk');
    expect(walks.map((e) => [e.state, e.outcome, e.cursor])).toEqual([
      ['completed', 'reattempted', 1],
      ['completed', 'reattempted', 1],
      ['failed', 'canceled', 1],
    ]);
    expect(wf.state).toBe('canceled');
  });

  // ------------------------------------------------------------------ job options

  it('successors keep the per-step jobOptions merged over the workflow\'s (the manual queue records every job)', async () => {
    const wf = await workflows.start(JobOptionsWalkWorkflow, hero);
    await runAsQueue(wf.id);
    expect(seen).toEqual([...'abcde', 'after']);
    const walks = await chain(wf.id, 'walk');
    expect(walks.map((e) => e.outcome)).toEqual(['continued', 'continued', 'success']);
    const jobOf = (id: string) => app.gd.enqueuedJobs.filter((job) => job.executionId === id);
    for (const walk of walks) expect(jobOf(walk.id).map((job) => job.jobOptions)).toEqual([{ lifo: true, priority: 7 }]);
    const [after] = await chain(wf.id, 'after');
    expect(jobOf(after.id).map((job) => job.jobOptions)).toEqual([{ lifo: true, priority: 1 }]);
  });

  it('successors created by resume and by housekeeping keep the per-step jobOptions too', async () => {
    const wf = await workflows.start(JobOptionsWalkWorkflow, hero);
    await app.gd.runIterations(wf, 1);
    const scheduled = (await workflows.currentExecution(wf))!;
    await simulateDeadWorker(wf, scheduled.id);
    expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckInProgressRecovered: 1 });
    const recoveredSuccessor = (await workflows.currentExecution(wf))!;
    expect(recoveredSuccessor).toMatchObject({ continuesFromId: scheduled.id, cursor: 1 });
    expect(app.gd.enqueuedJobs.filter((job) => job.executionId === recoveredSuccessor.id).map((job) => job.jobOptions)).toEqual([{ lifo: true, priority: 7 }]);
  });

  // ------------------------------------------------------------------ resume after a failure

  it('a failed resumable step (default policy: pause) resumes from its cursor, continuing from the failed row — it is not skipped', async () => {
    const wf = await workflows.start(PausingOnErrorWalkWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('failed on c');
    const [failed] = await chain(wf.id, 'walk');
    expect(failed).toMatchObject({ state: 'failed', outcome: 'failed', cursor: 2, errorMessage: 'failed on c' });
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'paused', nextStepName: 'walk' });

    await workflows.resume(wf);
    expect(await workflows.currentExecution(wf)).toMatchObject({ stepName: 'walk', state: 'scheduled', cursor: 2, continuesFromId: failed.id });
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['a', 'b', 'c', 'd', 'e', 'after']);
    expect(wf.state).toBe('finished');
  });

  // ------------------------------------------------------------------ out-of-band pause

  it('the operator cannot pause a performing workflow (which is why the next tests pause it with SQL)', async () => {
    const wf = await workflows.start(StallingWalkWorkflow, hero);
    const hold = new Hold();
    holds.set('b', hold);
    const running = executor.execute((await workflows.currentExecution(wf))!.id);
    await hold.reached;
    await expect(workflows.pause(wf)).rejects.toThrow(InvalidStateError);
    hold.release();
    await running;
    expect(seen).toEqual([...'abcde']);
  });

  it('paused behind the step\'s back: the next checkpoint stops the step, the row is completed/continued with its cursor, resume continues', async () => {
    const wf = await workflows.start(OutOfBandPauseWorkflow, hero);
    await executor.execute((await workflows.currentExecution(wf))!.id);
    expect(seen).toEqual(['a', 'b']);
    const [walk] = await chain(wf.id, 'walk');
    expect([walk.state, walk.outcome, walk.cursor]).toEqual(['completed', 'continued', 2]);
    expect((await workflows.find(wf.id)).state).toBe('paused');
    expect(await workflows.currentExecution(wf)).toBeNull();

    await workflows.resume(wf);
    expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2, continuesFromId: walk.id });
    await runAsQueue(wf.id);
    expect(seen).toEqual([...'abcde', 'after']);
    expect((await workflows.find(wf.id)).state).toBe('finished');
  });

  it('paused behind the back of a non-interruptible run (test helpers): the finished body still closes as continued with its cursor; resume completes the chain without redoing items', async () => {
    const wf = await workflows.start(OutOfBandPauseWorkflow, hero);
    await app.gd.performNextStep(wf);
    expect(seen).toEqual([...'abcde']);
    const [walk] = await chain(wf.id, 'walk');
    expect([walk.state, walk.outcome, walk.cursor]).toEqual(['completed', 'continued', 5]);
    expect(wf.state).toBe('paused');
    await workflows.resume(wf);
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual([...'abcde', 'after']);
    expect((await chain(wf.id, 'walk')).map((e) => [e.outcome, e.continuesFromId])).toEqual([
      ['continued', null],
      ['success', walk.id],
    ]);
  });

  // ------------------------------------------------------------------ conditions on continuations

  it('skipIf is evaluated on every execution of the chain: a continuation is skipped once it turns true', async () => {
    const wf = await workflows.start(SkipIfWalkWorkflow, hero);
    const first = await app.gd.runIterations(wf, 2);
    expect(first).toMatchObject({ outcome: 'continued', cursor: 2 });
    SkipIfWalkWorkflow.skip = true;
    await app.gd.speedrunWorkflow(wf);
    expect(seen).toEqual(['a', 'b', 'after']);
    expect((await chain(wf.id, 'walk')).map((e) => [e.state, e.outcome, e.continuesFromId])).toEqual([
      ['completed', 'continued', null],
      ['skipped', 'skipped', first!.id],
    ]);
    expect(wf.state).toBe('finished');
  });

  // ------------------------------------------------------------------ housekeeping

  it('housekeeping recovers a stalled resumable execution as recovered plus a successor from its cursor; the stale worker stops at its next checkpoint and never touches the chain', async () => {
    const wf = await workflows.start(StallingWalkWorkflow, hero);
    const stale = (await workflows.currentExecution(wf))!;
    const holdC = new Hold();
    holds.set('c', holdC);
    const staleRun = executor.execute(stale.id);
    await holdC.reached; // 'c' done, not yet checkpointed: the persisted cursor is 2
    await app.dataSource.createQueryBuilder().update(StepExecution).set({ startedAt: new Date(Date.now() - 2 * HOUR) }).where('id = :id', { id: stale.id }).execute();

    const summary = await app.moduleRef.get(HousekeepingService).run();
    expect(summary).toMatchObject({ stuckInProgressRecovered: 1, unrecoverable: [] });
    expect(await execution(stale.id)).toMatchObject({ state: 'completed', outcome: 'recovered', cursor: 2 });
    const successor = (await workflows.currentExecution(wf))!;
    expect(successor).toMatchObject({ stepName: 'walk', state: 'scheduled', cursor: 2, continuesFromId: stale.id });

    // The successor starts (the workflow performs again) and stalls at 'd'; then the stale worker wakes up.
    const holdD = new Hold();
    holds.set('d', holdD);
    const successorRun = executor.execute(successor.id);
    await holdD.reached;
    holdC.release();
    await staleRun;
    expect(seen).toEqual(['a', 'b', 'c', 'c', 'd']);
    expect(await execution(stale.id)).toMatchObject({ state: 'completed', outcome: 'recovered', cursor: 2 });

    holdD.release();
    await successorRun;
    await runAsQueue(wf.id);
    // 'c' twice: the item in flight when the worker stalled (at-least-once); nothing else.
    expect(seen).toEqual(['a', 'b', 'c', 'c', 'd', 'e', 'after']);
    expect((await chain(wf.id, 'walk')).map((e) => [e.outcome, e.cursor])).toEqual([
      ['recovered', 2],
      ['success', 5],
    ]);
  });

  // ------------------------------------------------------------------ maxRuntime

  it('maxRuntime: a step that checkpoints with small sleeps is cut into several executions, losing and repeating nothing', async () => {
    const wf = await workflows.start(MaxRuntimeWalkWorkflow, hero);
    await runAsQueue(wf.id);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    const walks = await chain(wf.id, 'walk');
    expect(walks.length).toBeGreaterThan(1);
    expect(walks.slice(0, -1).every((e) => e.outcome === 'continued')).toBe(true);
    expect(walks.at(-1)).toMatchObject({ outcome: 'success', cursor: 12 });
    walks.forEach((e, i) => expect(e.continuesFromId).toBe(i === 0 ? null : walks[i - 1].id));
    // Every interrupted execution moved the cursor on; only the last may have had nothing left to do
    // (an interruption at the final item's checkpoint leaves an empty successor).
    const cursors = walks.map((e) => e.cursor as number);
    expect([...cursors].sort((a, b) => a - b)).toEqual(cursors);
    expect(new Set(cursors.slice(0, -1)).size).toBe(cursors.length - 1);
    expect((await workflows.find(wf.id)).state).toBe('finished');
  });

  // ------------------------------------------------------------------ keyset iteration over a table

  describe('overRecords and overBatches on resumable_records', () => {
    const insert = (rows: Array<Partial<ResumableRecord>>) => app.dataSource.getRepository(ResumableRecord).insert(rows);
    const idOf = async (code: string) => (await app.dataSource.getRepository(ResumableRecord).findOneByOrFail({ code })).id;

    it('overRecords (keyset on the id, the default) honours the query\'s filter, pages across batches, and picks up rows added after the cursor', async () => {
      await insert(Array.from({ length: 12 }, (_, i) => ({ code: `r${String(i + 1).padStart(2, '0')}`, grp: (i + 1) % 3 === 0 ? 'b' : 'a' })));
      const wf = await workflows.start(RecordsWalkWorkflow, hero);
      const first = await app.gd.runIterations(wf, 4);
      expect(seen).toEqual(['r01', 'r02', 'r04', 'r05']);
      expect(first).toMatchObject({ outcome: 'continued', cursor: await idOf('r05') });
      await app.gd.assertCursor(wf, await idOf('r05'));

      await insert([{ code: 'r13', grp: 'a' }, { code: 'r14', grp: 'b' }]);
      const last = await app.gd.speedrunCurrentStep(wf);
      expect(seen).toEqual(['r01', 'r02', 'r04', 'r05', 'r07', 'r08', 'r10', 'r11', 'r13']);
      expect(last).toMatchObject({ outcome: 'success', cursor: await idOf('r13'), continuesFromId: first!.id });
    });

    it('overRecords keyed on a unique non-id column walks in that column\'s order across executions; only values past the cursor come later', async () => {
      // Inserted out of code order: ids and codes do not agree.
      await insert(['m', 'c', 'x', 'a', 'q', 'f', 't'].map((code) => ({ code, grp: 'a' })));
      const wf = await workflows.start(CodeKeysetWorkflow, hero);
      const first = await app.gd.runIterations(wf, 3);
      expect(seen).toEqual(['a', 'c', 'f']);
      expect(first).toMatchObject({ outcome: 'continued', cursor: 'f' });

      // A row sorting before the cursor is behind the walk; one after it is ahead.
      await insert([{ code: 'b', grp: 'a' }, { code: 'z', grp: 'a' }]);
      await app.gd.speedrunCurrentStep(wf);
      expect(seen).toEqual(['a', 'c', 'f', 'm', 'q', 't', 'x', 'z']);
      expect((await chain(wf.id, 'walk')).map((e) => [e.outcome, e.cursor])).toEqual([
        ['continued', 'f'],
        ['success', 'z'],
      ]);
    });

    it('overBatches yields one query per batch (filter kept), checkpoints each batch\'s largest id, and resumes after it', async () => {
      await insert(Array.from({ length: 12 }, (_, i) => ({ code: `r${String(i + 1).padStart(2, '0')}`, grp: i === 4 || i === 9 ? 'b' : 'a' })));
      const wf = await workflows.start(BatchesWorkflow, hero);
      const first = await app.gd.runIterations(wf, 1);
      expect(seen).toEqual([['r01', 'r02', 'r03', 'r04']]);
      expect(first).toMatchObject({ outcome: 'continued', cursor: await idOf('r04') });

      await app.gd.speedrunCurrentStep(wf);
      expect(seen).toEqual([
        ['r01', 'r02', 'r03', 'r04'],
        ['r06', 'r07', 'r08', 'r09'],
        ['r11', 'r12'],
      ]);
      expect((await chain(wf.id, 'touch')).map((e) => [e.outcome, e.cursor])).toEqual([
        ['continued', await idOf('r04')],
        ['success', await idOf('r12')],
      ]);
      const rows = await app.dataSource.getRepository(ResumableRecord).find({ order: { id: 'ASC' } });
      expect(rows.map((row) => [row.code, row.touched])).toEqual(rows.map((row) => [row.code, row.grp === 'a' ? 1 : 0]));
    });
  });

  // ------------------------------------------------------------------ resumable + waitFor (SIG-49)

  describe('a resumable waitFor step (SIG-49)', () => {
    let signals: SignalService;
    beforeAll(() => {
      signals = app.moduleRef.get(SignalService);
    });
    const signalRow = async (wf: WorkflowRecord, id: string) => (await signals.list(wf)).find((s) => s.id === id);

    it('the gate runs once; every successor carries the pin; claimed stays 1; consumption only when the chain completes', async () => {
      const wf = await workflows.start(SignalWalkWorkflow, hero);
      const sent = await signals.signal(wf, 'batch_ready', { payload: { batchId: 'b1' } });
      expect(signalProbe.matcherCalls).toBe(0);

      const firstId = (await workflows.currentExecution(wf))!.id;
      await executor.execute(firstId); // maxIterations 2: items 1, 2
      expect(signalProbe.matcherCalls).toBe(1);
      const first = await execution(firstId);
      expect(first).toMatchObject({ state: 'completed', outcome: 'continued', cursor: 2, signalId: sent.id });
      expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2, signalId: sent.id, continuesFromId: firstId });
      expect(await signalRow(wf, sent.id)).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });

      // A second matching signal arrives mid-chain: the successors do not look at it.
      const later = await signals.signal(wf, 'batch_ready', { payload: { batchId: 'b2' } });
      await executor.execute((await workflows.currentExecution(wf))!.id); // items 3, 4
      expect(await signalRow(wf, sent.id)).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });

      await runAsQueue(wf.id);
      const walks = await chain(wf.id, 'walk');
      expect(walks.map((e) => [e.outcome, e.signalId])).toEqual([
        ['continued', sent.id],
        ['continued', sent.id],
        ['success', sent.id],
      ]);
      expect(walks.slice(1).every((e) => e.waitingSince === null)).toBe(true);
      expect(seen).toEqual([[1, sent.id, 'b1'], [2, sent.id, 'b1'], [3, sent.id, 'b1'], [4, sent.id, 'b1'], 'after']);
      expect(signalProbe.matcherCalls).toBe(1);
      const [settled, untouched] = await signals.list(wf);
      expect(settled).toMatchObject({ id: sent.id, state: 'consumed', claimed: 1, consumed: 1 });
      expect(settled.consumedAt).not.toBeNull();
      expect(untouched).toMatchObject({ id: later.id, state: 'pending', claimed: 0, consumed: 0 });
    });

    it('pause() mid-chain, then resume: the successor copies the cursor and the pin and never parks', async () => {
      signalProbe.pauseAt = 3;
      const wf = await workflows.start(SignalWalkWorkflow, hero);
      const sent = await signals.signal(wf, 'batch_ready', { payload: { batchId: 'b1' } });
      await app.gd.performNextStep(wf); // non-interruptible: 1, 2, 3 then pause (cursor 2)
      expect(wf.state).toBe('paused');
      const [paused] = await chain(wf.id, 'walk');
      expect(paused).toMatchObject({ outcome: 'continued', cursor: 2, signalId: sent.id });
      expect((await signals.list(wf))[0]).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });

      await workflows.resume(wf);
      expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2, signalId: sent.id, continuesFromId: paused.id });
      await app.gd.speedrunWorkflow(wf);
      expect(seen.slice(3)).toEqual([[3, sent.id, 'b1'], [4, sent.id, 'b1'], 'after']);
      expect(signalProbe.matcherCalls).toBe(1);
      expect((await signals.list(wf))[0]).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
    });

    it.each(['an exception policy reattempt', 'resume after a failure', 'housekeeping recovery'] as const)(
      'a successor created by %s keeps the pin; the signal is consumed once, at the end',
      async (path) => {
        const wf = await workflows.start(SignalWalkWorkflow, hero);
        const sent = await signals.signal(wf, 'batch_ready', { payload: { batchId: 'b1' } });
        if (path === 'housekeeping recovery') {
          await app.gd.runIterations(wf, 2);
          await simulateDeadWorker(wf, (await workflows.currentExecution(wf))!.id);
          expect(await app.moduleRef.get(HousekeepingService).run()).toMatchObject({ stuckInProgressRecovered: 1 });
        } else {
          signalProbe.failAt = 3;
          signalProbe.onError = path === 'an exception policy reattempt' ? 'reattempt' : 'pause';
          await expect(app.gd.performNextStep(wf)).rejects.toThrow('item 3 failed');
          if (path === 'resume after a failure') {
            expect((await chain(wf.id, 'walk'))[0]).toMatchObject({ state: 'failed', cursor: 2, signalId: sent.id });
            await workflows.resume(wf);
          }
        }
        const [first] = await chain(wf.id, 'walk');
        expect(await workflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2, signalId: sent.id });
        expect((await signals.list(wf))[0]).toMatchObject({ state: 'claimed', claimed: 1, consumed: 0 });

        await app.gd.speedrunWorkflow(wf);
        const walks = await chain(wf.id, 'walk');
        expect(walks.length).toBeGreaterThan(1);
        expect(walks.every((e) => e.signalId === sent.id)).toBe(true);
        expect(walks[1].continuesFromId).toBe(first.id);
        expect(walks.some((e) => e.state === 'waiting' || e.waitingSince !== null)).toBe(false);
        expect(seen.filter((entry) => Array.isArray(entry)).every((entry) => (entry as unknown[])[2] === 'b1')).toBe(true);
        expect(signalProbe.matcherCalls).toBe(1);
        expect((await signals.list(wf))[0]).toMatchObject({ state: 'consumed', claimed: 1, consumed: 1 });
        expect(wf.state).toBe('finished');
      },
    );
  });

  // ------------------------------------------------------------------ apps of their own (same database)

  describe('with applications of their own', () => {
    it('a configured maxCursorSize raises the limit: 256 KiB is stored with maxCursorSize 300000', async () => {
      const roomy = await createTestApp(kind, [CursorBlobWorkflow], { prepare: false, maxCursorSize: 300_000 });
      try {
        CursorBlobWorkflow.size = 262_144;
        const wf = await roomy.moduleRef.get(WorkflowService).start(CursorBlobWorkflow, hero);
        await roomy.gd.speedrunWorkflow(wf);
        expect(wf.state).toBe('finished');
        const [big] = (await workflows.executionHistory(wf)).filter((e) => e.stepName === 'big');
        expect((big.cursor as { blob: string }).blob).toHaveLength(262_144);
      } finally {
        await roomy.close();
      }
      // The same cursor is too large for the default limit.
      const wf = await workflows.start(CursorBlobWorkflow, hero, { allowMultiple: true });
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(CursorTooLargeError);
    });

    it('ExecutorService.beginShutdown() stops running resumable steps at their next checkpoint, from then on; each continues in a successor', async () => {
      const stopping = await createTestApp(kind, [ShutdownWalkWorkflow], { prepare: false });
      try {
        const stoppingWorkflows = stopping.moduleRef.get(WorkflowService);
        const stoppingExecutor = stopping.moduleRef.get(ExecutorService);
        const wf = await stoppingWorkflows.start(ShutdownWalkWorkflow, hero);
        await stoppingExecutor.execute((await stoppingWorkflows.currentExecution(wf))!.id); // shutdown begins at 'b'
        expect(seen).toEqual(['a', 'b']);
        expect(await stoppingWorkflows.currentExecution(wf)).toMatchObject({ state: 'scheduled', cursor: 2 });
        await stoppingExecutor.execute((await stoppingWorkflows.currentExecution(wf))!.id); // still shutting down: one item
        expect(seen).toEqual(['a', 'b', 'c']);
        await stopping.gd.speedrunWorkflow(wf); // the helpers run without interruptions
        expect(seen).toEqual([...'abcde']);
        expect((await chain(wf.id, 'walk')).map((e) => [e.outcome, e.cursor])).toEqual([
          ['continued', 2],
          ['continued', 3],
          ['success', 5],
        ]);
      } finally {
        await stopping.close();
      }
    });

    it('closing the application while a resumable step runs (local queue) ends it as continued; the next application continues from the cursor', async () => {
      const first = await createTestApp(kind, [SlowWalkWorkflow], { prepare: false, queue: { adapter: 'local' } });
      let wf: WorkflowRecord;
      try {
        wf = await first.moduleRef.get(WorkflowService).start(SlowWalkWorkflow, hero);
        await waitFor('the step to be under way', async () => seen.length >= 2, { timeoutMs: 10_000, everyMs: 5 });
      } finally {
        await first.close();
      }
      const [stopped, pending] = await chain(wf.id, 'walk');
      const cursor = stopped.cursor as number;
      expect(stopped).toMatchObject({ state: 'completed', outcome: 'continued' });
      expect(cursor).toBeGreaterThanOrEqual(2);
      expect(cursor).toBeLessThan(8);
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8].slice(0, cursor));
      expect(pending).toMatchObject({ state: 'scheduled', cursor, continuesFromId: stopped.id });

      const second = await createTestApp(kind, [SlowWalkWorkflow], { prepare: false, queue: { adapter: 'local' } });
      try {
        await waitFor('the workflow to finish in the next application', async () => (await workflows.find(wf.id)).state === 'finished', { timeoutMs: 15_000 });
      } finally {
        await second.close();
      }
      expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      expect((await chain(wf.id, 'walk')).map((e) => e.outcome)).toEqual(['continued', 'success']);
    });
  });
});
