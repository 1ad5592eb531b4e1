/**
 * Step chaining: a step due the moment the one before it completes starts in the same worker, its
 * start committed with the previous outcome (no job, so no job id on its row); `chainSteps` bounds
 * and switches it, `jobOptions: { chain: false }` opts a step out, and an inline start that fails
 * leaves the outcome recorded and sends the step through the queue.
 */
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { SignalService, WorkflowService, type GenevaDriveModuleOptions, type StepExecution, type WorkflowRecord } from 'geneva-drive';
import type { AfterQueryEvent, EntitySubscriberInterface } from 'typeorm';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { CHAIN_WORKFLOWS, chainJournal, ChainBrokenStartWorkflow, ChainFiveStepsWorkflow, ChainGateWorkflow, ChainTwoGatesWorkflow, construction } from '../src/chain-workflows.js';

/** Every statement that ran, in order. */
class Statements implements EntitySubscriberInterface {
  readonly sql: string[] = [];
  afterQuery(event: AfterQueryEvent): void {
    this.sql.push(event.query);
  }
}

describeEachDatabase('step chaining', (kind: DatabaseKind) => {
  let app: TestApp | undefined;

  async function boot(options: GenevaDriveModuleOptions = {}): Promise<{ app: TestApp; workflows: WorkflowService; hero: TestHero }> {
    // Chains never stop on time here, however loaded the machine: which steps had a job is exact.
    app = await createTestApp(kind, CHAIN_WORKFLOWS, { queue: { adapter: 'local', concurrency: 2 }, chainSteps: { maxDuration: '10m' }, ...options });
    const heroes = app.dataSource.getRepository(TestHero);
    return { app, workflows: app.moduleRef.get(WorkflowService), hero: await heroes.save(heroes.create({ name: 'Ada' })) };
  }

  const finished = (workflows: WorkflowService, wf: WorkflowRecord) =>
    waitUntil(`workflow ${wf.id} to finish`, async () => ((await workflows.find(wf.id)).state === 'finished' ? true : null));
  /** Each execution's step and job id: null for a step that started inline. */
  const jobs = (history: StepExecution[]) => history.map((e) => [e.stepName, e.jobId === null ? null : e.jobId === e.id ? 'own job' : e.jobId]);

  beforeEach(() => {
    chainJournal.length = 0;
    construction.failNext = false;
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('runs the steps due at once inline, in order, each committed with the outcome before it; a step with chain: false gets its own job', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['one', 'completed', 'success'],
      ['two', 'completed', 'success'],
      ['three', 'completed', 'success'],
      ['four', 'completed', 'success'],
      ['five', 'completed', 'success'],
    ]);
    expect(jobs(history)).toEqual([
      ['one', 'own job'],
      ['two', null],
      ['three', 'own job'],
      ['four', null],
      ['five', null],
    ]);
    // Inline: each step started once the one before it was finished, in the same transaction.
    for (let i = 1; i < history.length; i++) expect(history[i].startedAt!.getTime()).toBeGreaterThanOrEqual(history[i - 1].finishedAt!.getTime());
    expect(chainJournal).toEqual(['one', 'two', 'three', 'four', 'five'].map((step) => `${wf.id}:${step}`));
  });

  it('a gate chained in attaches the oldest buffered signal its matcher accepts; on PostgreSQL read with the hero, after the outcome’s guarded write, in the message that begins the transaction', async () => {
    const { app, workflows, hero } = await boot();
    const statements = new Statements();
    app.dataSource.subscribers.push(statements);
    const wf = await workflows.start(ChainGateWorkflow, hero, {
      signals: [
        { name: 'go', payload: { n: 1 } },
        { name: 'go', payload: { n: 2, pick: true } },
        { name: 'go', payload: { n: 3, pick: true } },
      ],
    });
    await finished(workflows, wf);
    expect(chainJournal).toEqual([`${wf.id}:prepare`, `${wf.id}:pick:2`]);
    expect((await app.moduleRef.get(SignalService).list(wf)).map((s) => [(s.payload as { n: number }).n, s.state])).toEqual([
      [1, 'pending'],
      [2, 'consumed'],
      [3, 'pending'],
    ]);
    if (kind === 'postgres') {
      const signalReads = statements.sql.filter((sql) => /FROM "geneva_drive_signals" s WHERE/.test(sql));
      expect(signalReads).toHaveLength(1);
      expect(signalReads[0]).toMatch(/^START TRANSACTION; WITH l AS \(.* FOR UPDATE OF w, e\), g AS .*; SELECT h\.\*, s\.\* FROM \(SELECT 1\) AS o LEFT JOIN \(SELECT .* FROM "test_heroes" h WHERE/s);
    }
  });

  it('on PostgreSQL, the read of a gate’s signals with the hero carries the hero on one row only, however many signals are buffered', async () => {
    if (kind !== 'postgres') return;
    const { app, workflows, hero } = await boot();
    const wf = await workflows.start(ChainGateWorkflow, hero, { signals: [1, 2, 3].map((n) => ({ name: 'go', payload: { n } })) });
    const store = app.moduleRef.get(WorkflowStore, { strict: false });
    const sql = store.sql(app.dataSource.manager);
    const params: unknown[] = [];
    const read = sql.heroAndSignalsRead(sql.heroCodec('TestHero')!, String(hero.id), wf.id, 'go').sql((value) => `$${params.push(value)}`);
    const rows: Array<Record<string, unknown>> = await app.dataSource.query(read, params);
    expect(rows).toHaveLength(3);
    expect(rows.filter((row) => row.h_id != null)).toHaveLength(1);
    const { hero: readHero, signals } = sql.heroAndSignalsFrom(sql.heroCodec('TestHero')!, rows);
    expect(readHero).toMatchObject({ id: hero.id, name: 'Ada' });
    expect(signals.map((s) => (s.payload as { n: number }).n)).toEqual([1, 2, 3]);
  });

  it('a gate chained in after a step that consumed its signal does not attach that signal: it waits for another', async () => {
    const { app, workflows, hero } = await boot();
    const signals = app.moduleRef.get(SignalService);
    const wf = await workflows.start(ChainTwoGatesWorkflow, hero, { signals: [{ name: 'go', payload: { n: 1 } }] });
    await waitUntil('the second gate to park', async () => ((await workflows.executionHistory(wf)).some((e) => e.stepName === 'second' && e.state === 'waiting') ? true : null));
    expect(chainJournal).toEqual([`${wf.id}:first:1`]);
    await signals.signal(wf, 'go', { payload: { n: 2 } });
    await finished(workflows, wf);
    expect(chainJournal).toEqual([`${wf.id}:first:1`, `${wf.id}:second:2`]);
    expect((await signals.list(wf)).map((s) => [(s.payload as { n: number }).n, s.state, Number(s.claimed), Number(s.consumed)])).toEqual([
      [1, 'consumed', 1, 1],
      [2, 'consumed', 1, 1],
    ]);
  });

  it('hands back to the queue after maxSteps steps', async () => {
    const { workflows, hero } = await boot({ chainSteps: { maxSteps: 2, maxDuration: '10m' } });
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    expect(jobs(await workflows.executionHistory(wf))).toEqual([
      ['one', 'own job'],
      ['two', null],
      ['three', 'own job'],
      ['four', null],
      ['five', 'own job'],
    ]);
  });

  it('sends every step through the queue with chainSteps: false', async () => {
    const { workflows, hero } = await boot({ chainSteps: false });
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    expect(jobs(await workflows.executionHistory(wf))).toEqual(['one', 'two', 'three', 'four', 'five'].map((step) => [step, 'own job']));
  });

  it('an inline start that fails leaves the outcome recorded and the step goes through the queue, where it runs once', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(ChainBrokenStartWorkflow, hero);
    await finished(workflows, wf);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['first', 'completed', 'success'],
      ['second', 'completed', 'success'],
    ]);
    expect(jobs(history)).toEqual([
      ['first', 'own job'],
      ['second', 'own job'],
    ]);
    expect(chainJournal).toEqual([`${wf.id}:first`, `${wf.id}:second`]);
  });
});
