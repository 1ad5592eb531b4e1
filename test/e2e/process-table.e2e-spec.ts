/**
 * The process table and housekeeping's report of executions no live process can run, on each
 * database. Several applications in this process stand for the processes of a fleet: each records
 * itself when it boots (what it runs, whether it takes step jobs) and deletes its row when it closes.
 * Nothing waits for a heartbeat: a process is in the table from its boot, and staleness is written
 * into the rows.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { HousekeepingService, WorkflowService, type HousekeepingSummary } from 'geneva-drive';
import { ProcessRecord } from '../../libs/geneva-drive/src/entities/process.entity.js';
import { LIVE_WINDOW_MS } from '../../libs/geneva-drive/src/housekeeping/process-roster.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { FleetChoreWorkflow, FleetLaterWithoutStepWorkflow, FleetLaterWorkflow, FleetOrderWorkflow } from '../src/fleet-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const local = (concurrency: number) => ({ queue: { adapter: 'local' as const, concurrency }, prepare: false });

describeEachDatabase('process table', (kind) => {
  let starter: TestApp;
  let lacking: TestApp;
  const others: TestApp[] = [];

  beforeAll(async () => {
    // Starts workflows and runs no step job (the manual queue): it has every class, and counts for nothing.
    starter = await createTestApp(kind, [FleetLaterWorkflow, FleetOrderWorkflow, FleetChoreWorkflow]);
    // A worker of another version: it takes step jobs, but has none of these classes.
    lacking = await createTestApp(kind, [FleetChoreWorkflow], local(1));
  });
  afterAll(async () => {
    await lacking?.close();
    await starter?.close();
  });
  beforeEach(() => starter.reset());
  afterEach(async () => {
    for (const app of others.splice(0)) await app.close();
  });

  const boot = async (providers: Function[], concurrency = 1) => {
    const app = await createTestApp(kind, providers as never[], local(concurrency));
    others.push(app);
    return app;
  };
  const housekeeping = (): Promise<HousekeepingSummary> => lacking.moduleRef.get(HousekeepingService).run();
  const startLater = async (count: number) => {
    const heroes = starter.dataSource.getRepository(TestHero);
    const workflows = starter.moduleRef.get(WorkflowService);
    for (let i = 0; i < count; i++) await workflows.start(FleetLaterWorkflow, await heroes.save(heroes.create({ name: `later ${i}` })));
  };
  const processRows = () => starter.dataSource.getRepository(ProcessRecord).find({ order: { id: 'ASC' } });

  it('each process records what it runs when it boots, and deletes its row when it closes', async () => {
    const rows = await processRows();
    expect(rows.map((row) => [row.pid, row.runsSteps, Object.keys(row.catalog).sort()])).toEqual(
      expect.arrayContaining([
        [process.pid, false, ['FleetChore', 'FleetLater', 'FleetOrder']],
        [process.pid, true, ['FleetChore']],
      ]),
    );
    expect(rows.find((row) => row.runsSteps)!.catalog.FleetChore).toEqual({ steps: ['sweep'], removedSteps: [], skipUndefinedSteps: false });
    const worker = await boot([FleetOrderWorkflow]);
    expect(await processRows()).toHaveLength(rows.length + 1);
    await worker.close();
    others.length = 0;
    expect(await processRows()).toHaveLength(rows.length);
  });

  it('counts scheduled executions whose class no live worker has, and drops to zero once a worker that has it is live', async () => {
    await startLater(3);
    // The starter has the class but runs no step job; the lacking worker runs step jobs but has no class.
    expect((await housekeeping()).unrunnableExecutions).toEqual({ total: 3, byWorkflow: { FleetLater: { reserveStock: 3 } } });

    const worker = await boot([FleetLaterWorkflow]);
    expect((await housekeeping()).unrunnableExecutions).toEqual({ total: 0, byWorkflow: {} });

    await worker.close();
    others.length = 0;
    expect((await housekeeping()).unrunnableExecutions).toEqual({ total: 3, byWorkflow: { FleetLater: { reserveStock: 3 } } });
  });

  it('a worker that has the class but not the step does not count; a worker that skips undefined steps, or was not seen lately, neither does the latter', async () => {
    await startLater(2);
    const older = await boot([FleetLaterWithoutStepWorkflow]);
    expect((await housekeeping()).unrunnableExecutions).toEqual({ total: 2, byWorkflow: { FleetLater: { reserveStock: 2 } } });

    // A worker that had the step, last seen just outside the live window (it died without deleting its row).
    const stale = Date.now() - LIVE_WINDOW_MS - 5_000;
    const rows = starter.dataSource.getRepository(ProcessRecord);
    const catalog = { FleetLater: { steps: ['reserveStock'], removedSteps: [], skipUndefinedSteps: false } };
    await rows.save(rows.create({ id: 'gone-host:1:dead', host: 'gone-host', pid: 1, runsSteps: true, catalog, startedAt: new Date(stale - 60_000), seenAt: new Date(stale) }));
    expect((await housekeeping()).unrunnableExecutions?.total).toBe(2);

    // Seen within the window: live.
    await rows.update({ id: 'gone-host:1:dead' }, { seenAt: new Date() });
    expect((await housekeeping()).unrunnableExecutions?.total).toBe(0);

    // A catalog that skips undefined steps, or lists the step as removed, runs it too (a decision its code may take).
    await rows.update({ id: 'gone-host:1:dead' }, { catalog: { FleetLater: { steps: [], removedSteps: ['reserveStock'], skipUndefinedSteps: false } } });
    expect((await housekeeping()).unrunnableExecutions?.total).toBe(0);
    await rows.update({ id: 'gone-host:1:dead' }, { catalog: { FleetLater: { steps: [], removedSteps: [], skipUndefinedSteps: true } } });
    expect((await housekeeping()).unrunnableExecutions?.total).toBe(0);

    // An enqueue-only process with the step counts for nothing.
    await rows.update({ id: 'gone-host:1:dead' }, { runsSteps: false, catalog });
    expect((await housekeeping()).unrunnableExecutions?.total).toBe(2);
    await rows.delete({ id: 'gone-host:1:dead' });
    await older.close();
    others.length = 0;
  });

  it('forgets the rows of processes gone for a day', async () => {
    const rows = starter.dataSource.getRepository(ProcessRecord);
    const dayAgo = new Date(Date.now() - 25 * 60 * 60_000);
    await rows.save(rows.create({ id: 'old-host:2:gone', host: 'old-host', pid: 2, runsSteps: true, catalog: {}, startedAt: dayAgo, seenAt: dayAgo }));
    await housekeeping();
    expect(await rows.findOneBy({ id: 'old-host:2:gone' })).toBeNull();
  });
});

describeEachDatabase('process table not migrated', (kind) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp(kind, [FleetChoreWorkflow], { withoutProcesses: true, queue: { adapter: 'local', concurrency: 1 } });
  });
  afterAll(() => app?.close());

  it('everything else works; housekeeping reports no unrunnable executions (null)', async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await app.moduleRef.get(WorkflowService).start(FleetChoreWorkflow, await heroes.save(heroes.create({ name: 'chore' })));
    const summary = await app.moduleRef.get(HousekeepingService).run();
    expect(summary.unrunnableExecutions).toBeNull();
    expect(wf.type).toBe('FleetChore');
  });
});
