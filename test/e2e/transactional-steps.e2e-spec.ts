/**
 * Transactional steps: the body's writes through `this.manager` commit with the step's outcome or
 * not at all — completion, each flow-control action, an exception, a body over its
 * transactionTimeout, an end refused because the rows moved on while the body ran — on the three
 * databases, with a `waitFor` payload, with a workflow started in the step's transaction, and with
 * chaining into the step.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { TransactionCommitEvent } from 'typeorm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { QUEUE_PORT, Signal, SignalService, StepExecution, WorkflowRecord, WorkflowService, type StepEvent } from 'geneva-drive';
import { waitUntil } from '../src/bull-wait.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { BatchLedgerWorkflow, control, ensureEffectTable, HastyLedgerWorkflow, IdleLedgerWorkflow, LedgerWorkflow, PaidLedgerWorkflow, RelayLedgerWorkflow, SignalingLedgerWorkflow, SoleLedgerWorkflow, TestEffect, TRANSACTIONAL_WORKFLOWS } from '../src/transactional-workflows.js';
import { REDIS_QUEUE_DRIVERS } from '../src/redis-queues.js';
import { loggedDuring } from '../utils/logged-statements.js';
import { describeEachDatabase, redisAvailable, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/** Connections in the test DataSource's pool: node-postgres' and mysql2's default. */
const POOL_SIZE = 10;

describeEachDatabase('transactional steps', (kind: DatabaseKind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, TRANSACTIONAL_WORKFLOWS, { entities: [TestEffect] });
    await ensureEffectTable(app.dataSource);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    await app.dataSource.getRepository(TestEffect).clear();
    control.reset();
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const effects = (wf: WorkflowRecord) => app.dataSource.getRepository(TestEffect).findBy({ workflowId: wf.id });
  const heroName = async () => (await app.dataSource.getRepository(TestHero).findOneByOrFail({ id: hero.id })).name;
  const history = async (wf: WorkflowRecord) => (await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.outcome]);

  /** Runs `a`, then `b` with the given ending. */
  async function atB(ending?: Parameters<typeof control.endings.set>[1]): Promise<WorkflowRecord> {
    const wf = await workflows.start(LedgerWorkflow, hero);
    if (ending) control.endings.set(wf.id, ending);
    await app.gd.performNextStep(wf);
    return wf;
  }

  it('commits the body’s writes with the completion; the body reads the hero through its transaction; its step event says transactional', async () => {
    const wf = await atB();
    await app.dataSource.getRepository(TestHero).update(hero.id, { name: 'Ada Lovelace' });
    const events: StepEvent[] = [];
    const listener = (event: unknown) => events.push(event as StepEvent);
    subscribe('geneva-drive:step', listener);
    try {
      await app.gd.performNextStep(wf);
    } finally {
      unsubscribe('geneva-drive:step', listener);
    }
    expect(events.map((event) => [event.stepName, event.transactional])).toEqual([['b', true]]);
    expect(await effects(wf)).toHaveLength(1);
    expect(await heroName()).toBe('b wrote');
    expect(control.journal).toEqual(['a', 'a: NotTransactionalError', 'b saw hero "Ada Lovelace"']);
    await app.gd.speedrunWorkflow(wf);
    expect(await history(wf)).toEqual([
      ['a', 'completed', 'success'],
      ['b', 'completed', 'success'],
      ['c', 'completed', 'success'],
    ]);
  });

  it('rolls the writes back when the body throws, and records the failure and its policy in a transaction of its own', async () => {
    const wf = await atB('throw');
    await expect(app.gd.performNextStep(wf)).rejects.toThrow('the ledger refused');
    expect(await effects(wf)).toEqual([]);
    expect(await heroName()).toBe('Ada');
    const failed = (await workflows.executionHistory(wf))[1];
    expect([failed.state, failed.errorMessage]).toEqual(['failed', 'the ledger refused']);
    expect((await workflows.find(wf.id)).state).toBe('paused');
  });

  describe('flow control decides whether the writes commit', () => {
    it('finished(): kept, the workflow finished', async () => {
      const wf = await atB('finished');
      await app.gd.performNextStep(wf);
      expect(await effects(wf)).toHaveLength(1);
      expect((await workflows.find(wf.id)).state).toBe('finished');
    });

    it('skip(): kept, the next step scheduled', async () => {
      const wf = await atB('skip');
      await app.gd.speedrunWorkflow(wf);
      expect(await effects(wf)).toHaveLength(1);
      expect(await history(wf)).toEqual([
        ['a', 'completed', 'success'],
        ['b', 'skipped', 'skipped'],
        ['c', 'completed', 'success'],
      ]);
    });

    it('reattempt(): rolled back, so the run that completes writes once', async () => {
      const wf = await atB('reattempt-once');
      await app.gd.speedrunWorkflow(wf);
      expect(await effects(wf)).toHaveLength(1);
      expect((await history(wf)).map(([step, , outcome]) => `${step}:${outcome}`)).toEqual(['a:success', 'b:reattempted', 'b:success', 'c:success']);
    });

    it('pause(): rolled back; resume runs the step again and it writes once', async () => {
      const wf = await atB('pause');
      await app.gd.performNextStep(wf);
      expect(await effects(wf)).toEqual([]);
      expect((await workflows.find(wf.id)).state).toBe('paused');
      control.endings.delete(wf.id);
      await workflows.resume(wf);
      await app.gd.speedrunWorkflow(wf);
      expect(await effects(wf)).toHaveLength(1);
    });

    it('cancel(): rolled back, the workflow canceled', async () => {
      const wf = await atB('cancel');
      await app.gd.performNextStep(wf);
      expect(await effects(wf)).toEqual([]);
      expect(await heroName()).toBe('Ada');
      expect((await workflows.find(wf.id)).state).toBe('canceled');
    });
  });

  it('a body over its transactionTimeout is rolled back and fails with TransactionTimeoutError', async () => {
    const wf = await workflows.start(HastyLedgerWorkflow, hero);
    await expect(app.gd.performNextStep(wf)).rejects.toThrow(/over its transactionTimeout of 50 ms/);
    expect(await effects(wf)).toEqual([]);
    const [failed] = await workflows.executionHistory(wf);
    expect([failed.state, failed.errorClassName]).toEqual(['failed', 'TransactionTimeoutError']);
  });

  (kind === 'sqlite' ? it.skip : it)('PostgreSQL and MariaDB bound each statement of the body and each pause between two by transactionTimeout, for its transaction only', async () => {
    const wf = await atB('show-timeouts');
    await app.gd.performNextStep(wf);
    expect(control.journal.at(-1)).toBe(kind === 'postgres' ? 'timeouts 10s 10s' : 'timeouts 10s 10s autocommit 0');
    // And a step whose transaction rolls back.
    const thrown = await workflows.start(LedgerWorkflow, hero, { allowMultiple: true });
    control.endings.set(thrown.id, 'throw');
    await app.gd.performNextStep(thrown);
    await expect(app.gd.performNextStep(thrown)).rejects.toThrow('the ledger refused');
    expect(await boundedSessions(app, kind)).toBe(0);
  });

  it('a transactional waitFor step whose signal came first reads its hero once, through its transaction', async () => {
    const wf = await workflows.start(PaidLedgerWorkflow, hero);
    await app.moduleRef.get(SignalService).signal(wf, 'paid', { payload: { cents: 700 } });
    // The locked phase 1 attaches the signal; the step's transaction reads the hero.
    const heroReads = heroReadsIn(app, await loggedDuring(app.dataSource, () => app.gd.performNextStep(wf)));
    expect([heroReads, (await effects(wf)).map((e) => e.step)]).toEqual([1, ['paid 700']]);
    expect(await heroName()).toBe('paid 700 wrote');
  });

  it("a caller's transaction starts a transactional waitFor step's workflow with its signal, or signals it parked: the step has the payload", async () => {
    const started = await app.dataSource.transaction((manager) => workflows.start(PaidLedgerWorkflow, hero, { manager, signals: [{ name: 'paid', payload: { cents: 5 } }] }));
    await app.gd.performNextStep(started);
    const parked = await workflows.start(PaidLedgerWorkflow, hero, { allowMultiple: true });
    await app.gd.performNextStep(parked);
    await app.dataSource.transaction((manager) => app.moduleRef.get(SignalService).signal(parked, 'paid', { manager, payload: { cents: 9 } }));
    await app.gd.performNextStep(parked);
    expect([(await effects(started)).map((e) => e.step), (await effects(parked)).map((e) => e.step)]).toEqual([['paid 5'], ['paid 9']]);
  });

  for (const ending of ['complete', 'throw'] as const) {
    it(`a signal sent with { manager: this.manager } exists only if the step commits (${ending === 'throw' ? 'it throws: gone' : 'it completes: delivered'})`, async () => {
      const target = await workflows.start(PaidLedgerWorkflow, hero);
      await app.gd.performNextStep(target); // parks
      control.signalTarget = target.id;
      const sender = await workflows.start(SignalingLedgerWorkflow, hero, { allowMultiple: true });
      control.endings.set(sender.id, ending);
      await app.gd.performNextStep(sender).catch(() => undefined);
      const signals = await app.dataSource.getRepository(Signal).countBy({ workflowId: target.id });
      expect([signals, (await effects(sender)).length]).toEqual(ending === 'throw' ? [0, 0] : [1, 1]);
      if (ending === 'complete') {
        await app.gd.performNextStep(target);
        expect((await effects(target)).map((e) => e.step)).toEqual(['paid 42']);
      }
    });
  }

  it('a transactional step whose hero is gone when it runs cancels the workflow and writes nothing', async () => {
    const wf = await workflows.start(PaidLedgerWorkflow, hero);
    await app.moduleRef.get(SignalService).signal(wf, 'paid', { payload: { cents: 700 } });
    await app.dataSource.getRepository(TestHero).delete(hero.id);
    await app.gd.performNextStep(wf);
    expect([(await workflows.find(wf.id)).state, await effects(wf)]).toEqual(['canceled', []]);
  });

  it('a transactional waitFor step has its payload, and consumes its signal in the commit that keeps its writes', async () => {
    const wf = await workflows.start(PaidLedgerWorkflow, hero);
    await app.gd.performNextStep(wf); // parks
    await app.moduleRef.get(SignalService).signal(wf, 'paid', { payload: { cents: 1200 } });
    await app.gd.performNextStep(wf);
    expect((await effects(wf)).map((e) => e.step)).toEqual(['paid 1200']);
    await app.gd.assertSignalState(wf, 'paid', 'consumed');
  });

  it('a workflow started with { manager: this.manager } exists only if the step commits', async () => {
    const kept = await workflows.start(PaidLedgerWorkflow, hero);
    const undone = await workflows.start(PaidLedgerWorkflow, hero, { allowMultiple: true });
    control.endings.set(undone.id, 'throw');
    for (const wf of [kept, undone]) {
      await app.gd.performNextStep(wf);
      await app.moduleRef.get(SignalService).signal(wf, 'paid', { payload: { cents: 1 } });
      await app.gd.performNextStep(wf);
    }
    await app.gd.performNextStep(kept);
    await expect(app.gd.performNextStep(undone)).rejects.toThrow('the notification failed');
    expect(await workflows.findForHero(LedgerWorkflow, hero)).toHaveLength(1);
    // The class's resumable step is transactional too (the class default).
    await app.gd.speedrunWorkflow(kept);
    expect(control.journal).toContain('tally 1');
  });

  describe('a transactional resumable step', () => {
    const items = async (wf: WorkflowRecord) => (await effects(wf)).map((e) => e.step).sort();
    const ALL = ['item 1', 'item 2', 'item 3', 'item 4', 'item 5'];

    it('commits each item with the checkpoint after it, across its executions: every item once', async () => {
      const wf = await workflows.start(BatchLedgerWorkflow, hero);
      await app.gd.runIterations(wf, 2); // items 1 and 2, then a successor
      expect(await items(wf)).toEqual(['item 1', 'item 2']);
      await app.gd.speedrunWorkflow(wf);
      expect(await items(wf)).toEqual(ALL);
      expect((await history(wf)).map(([, , outcome]) => outcome)).toEqual(['continued', 'success']);
    });

    it('an item that throws is rolled back with its segment; the retry goes on from the last checkpoint: every item once', async () => {
      const wf = await workflows.start(BatchLedgerWorkflow, hero);
      control.failAt = 2;
      await app.gd.speedrunWorkflow(wf, { maxSteps: 10 }).catch(() => undefined);
      await app.gd.speedrunWorkflow(wf, { maxSteps: 10 });
      expect(await items(wf)).toEqual(ALL);
      expect((await history(wf)).map(([, , outcome]) => outcome)).toContain('reattempted');
    });
  });

  describe('no engine lock is held while the body runs', () => {
    // On SQLite the body's transaction holds the process's one connection: the engine's other transactions wait for it to end (MANUAL §9.8).
    const concurrent = kind === 'sqlite' ? it.skip : it;

    /** Runs `b` until it waits at the gate; resolves with the run's promise and the release. */
    async function bodyAtGate(wf: WorkflowRecord): Promise<{ run: Promise<unknown>; release: () => void }> {
      let release!: () => void;
      let reached!: () => void;
      const atGate = new Promise<void>((resolve) => (reached = resolve));
      control.gate = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
      const run = app.gd.performNextStep(wf).then(
        (value) => value,
        (error: unknown) => error,
      );
      await atGate;
      return { run, release };
    }

    concurrent('the database ends a body idle in its transaction longer than transactionTimeout: its locks freed while it waits, its writes rolled back', async () => {
      const wf = await workflows.start(IdleLedgerWorkflow, hero);
      const { run, release } = await bodyAtGate(wf);
      // The body holds the hero's row lock and sits idle: this update waits for that lock until the
      // server ends the body's transaction (1 s), long before innodb_lock_wait_timeout or the test's own.
      await app.dataSource.getRepository(TestHero).update(hero.id, { name: 'Bea' });
      release();
      expect(String(await run)).toMatch(/over its transactionTimeout of 1000 ms/);
      expect(await effects(wf)).toEqual([]);
      expect(await heroName()).toBe('Bea');
    });

    concurrent("an application's subscriber to transaction events removed while the body ran: the step's transaction ends as it began, committed", async () => {
      const subscriber = { afterTransactionStart: () => undefined };
      const unsubscribe = () => app.dataSource.subscribers.includes(subscriber) && app.dataSource.subscribers.splice(app.dataSource.subscribers.indexOf(subscriber), 1);
      app.dataSource.subscribers.push(subscriber);
      try {
        const wf = await atB();
        const { run, release } = await bodyAtGate(wf);
        unsubscribe();
        release();
        await run;
        // Read on another connection: committed.
        expect(await effects(wf)).toHaveLength(1);
        expect((await workflows.executionHistory(wf)).map((e) => e.state)).toEqual(['completed', 'completed', 'scheduled']);
      } finally {
        unsubscribe();
      }
      expect(await boundedSessions(app, kind)).toBe(0);
    });

    concurrent('a signal to the workflow is recorded while the body runs', async () => {
      const wf = await atB();
      const { run, release } = await bodyAtGate(wf);
      const signal = await app.moduleRef.get(SignalService).signal(wf, 'later', { allowUnknownName: true });
      expect(signal.state).toBe('pending');
      release();
      await run;
      expect(await effects(wf)).toHaveLength(1);
    });

    concurrent('an execution recovered while its body ran: the end is refused and the writes roll back', async () => {
      const wf = await atB();
      const { run, release } = await bodyAtGate(wf);
      const running = (await workflows.currentExecution(wf))!;
      // What stuck recovery writes: the execution closed as recovered, the workflow ready again.
      await app.dataSource.getRepository(StepExecution).update(running.id, { state: 'failed', outcome: 'recovered' });
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'ready' });
      const sent = await loggedDuring(app.dataSource, () => (release(), run));
      expect(await effects(wf)).toEqual([]);
      expect(await heroName()).toBe('Ada');
      expect((await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: running.id })).outcome).toBe('recovered');
      if (kind === 'postgres') {
        // The end went with its COMMIT, as one message that prepared it, and was refused: that statement is dropped with the transaction.
        expect(sent.filter((sql) => /^PREPARE geneva_drive_end_\w+ AS /.test(sql))).toHaveLength(1);
        expect(await endStatementsLeft(app)).toEqual([]);
      }
    });

    concurrent('a resumable run recovered while its body ran: its next checkpoint is refused, and only that segment rolls back', async () => {
      const wf = await workflows.start(BatchLedgerWorkflow, hero);
      const { run, release } = await bodyAtGate(wf); // at item 2: item 1 committed with its checkpoint
      const running = (await workflows.currentExecution(wf))!;
      await app.dataSource.getRepository(StepExecution).update(running.id, { state: 'failed', outcome: 'recovered' });
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'ready' });
      release();
      await run;
      expect((await effects(wf)).map((e) => e.step)).toEqual(['item 1']);
    });

    concurrent('a workflow canceled while the body ran: the end is refused and the writes roll back', async () => {
      const wf = await atB();
      const { run, release } = await bodyAtGate(wf);
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'canceled' });
      release();
      await run;
      expect(await effects(wf)).toEqual([]);
      expect((await workflows.executionHistory(wf)).map((e) => e.state)).toEqual(['completed', 'canceled']);
    });

    (kind === 'postgres' ? it : it.skip)('PostgreSQL sends the end and its COMMIT as one message; refused there, nothing commits', async () => {
      const wf = await atB();
      const { run, release } = await bodyAtGate(wf);
      await app.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'canceled' });
      const sent = await loggedDuring(app.dataSource, async () => {
        release();
        await run;
      });
      // Prepared, run and dropped in that message, under a name of its own.
      expect(sent.filter((sql) => /^PREPARE (\w+) AS .*; EXECUTE \1\(.*\); DEALLOCATE \1; COMMIT$/s.test(sql))).toHaveLength(1);
      expect(await effects(wf)).toEqual([]);
      expect((await workflows.executionHistory(wf)).map((e) => e.state)).toEqual(['completed', 'canceled']);
    });
  });
});

describeEachDatabase('transactional steps in a chain', (kind: DatabaseKind) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await createTestApp(kind, TRANSACTIONAL_WORKFLOWS, { entities: [TestEffect], queue: { adapter: 'local', concurrency: 1 }, chainSteps: { maxDuration: '10m' } });
    await ensureEffectTable(app.dataSource);
  });
  afterAll(() => app.close());

  it('a step chains into the transactional step, and the transactional step into the step after it', async () => {
    control.reset();
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'Ada' }));
    const workflows = app.moduleRef.get(WorkflowService);
    let wf!: WorkflowRecord;
    const sent = await loggedDuring(app.dataSource, async () => {
      wf = await workflows.start(LedgerWorkflow, hero);
      await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
    });
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.jobId === null ? 'inline' : 'own job'])).toEqual([
      ['a', 'own job'],
      ['b', 'inline'],
      ['c', 'inline'],
    ]);
    expect(control.journal).toEqual(['a', 'a: NotTransactionalError', 'b saw hero "Ada"', 'c']);
    expect(await app.dataSource.getRepository(TestEffect).findBy({ workflowId: wf.id })).toHaveLength(1);
    // One hero read per step: the chain does not read b's for it, b's transaction does; c's is read in
    // b's transaction (PostgreSQL: riding on the statement that writes b's outcome, so not counted here).
    expect(heroReadsIn(app, sent)).toBe(kind === 'postgres' ? 2 : 3);
    // PostgreSQL: a's finalize commits and b's transaction begins in one message, on one connection.
    if (kind === 'postgres') expect(sent.filter((sql) => /^COMMIT; START TRANSACTION; SET LOCAL /.test(sql))).toHaveLength(1);
  });

  it('a transactional step chains into another, and into the step after it; an inline start that fails runs the step again and sends the next one through the queue', async () => {
    control.reset();
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    const effects = app.dataSource.getRepository(TestEffect);
    const jobsOf = async (wf: WorkflowRecord) => (await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.jobId === null ? 'inline' : 'own job']);

    const broken = await workflows.start(RelayLedgerWorkflow, await heroes.save(heroes.create({ name: 'Bea' })));
    control.endings.set(broken.id, 'throw');
    await waitUntil(`workflow ${broken.id} to finish`, async () => (await workflows.find(broken.id)).state === 'finished');
    // `second` ran twice (the first run's writes rolled back with the failed inline start), wrote once.
    expect(control.journal).toEqual(['first', 'second', 'second ran once', 'second', 'last']);
    expect((await effects.findBy({ workflowId: broken.id })).map((e) => e.step).sort()).toEqual(['first', 'second']);
    expect(await jobsOf(broken)).toEqual([
      ['first', 'completed', 'own job'],
      ['second', 'completed', 'inline'],
      ['last', 'completed', 'own job'],
    ]);

    control.reset();
    let chained!: WorkflowRecord;
    const sent = await loggedDuring(app.dataSource, async () => {
      chained = await workflows.start(RelayLedgerWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
      await waitUntil(`workflow ${chained.id} to finish`, async () => (await workflows.find(chained.id)).state === 'finished');
    });
    // PostgreSQL: first's transaction commits and second's begins in one message, on one connection.
    if (kind === 'postgres') expect(sent.filter((sql) => /^COMMIT; START TRANSACTION; SET LOCAL /.test(sql))).toHaveLength(1);
    expect(await jobsOf(chained)).toEqual([
      ['first', 'completed', 'own job'],
      ['second', 'completed', 'inline'],
      ['last', 'completed', 'inline'],
    ]);
    expect((await effects.findBy({ workflowId: chained.id })).map((e) => e.step).sort()).toEqual(['first', 'second']);
    // The COMMIT that started `last` inline lifted second's bounds (MariaDB: with autocommit back on).
    if (kind !== 'sqlite') expect(await boundedSessions(app, kind)).toBe(0);
  });

  it("a workflow's last step, transactional, run by a chaining worker: nothing to chain into, so its end is the one-message end (PostgreSQL)", async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const workflows = app.moduleRef.get(WorkflowService);
    let wf!: WorkflowRecord;
    const sent = await loggedDuring(app.dataSource, async () => {
      wf = await workflows.start(SoleLedgerWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
      await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
    });
    expect(await app.dataSource.getRepository(TestEffect).findBy({ workflowId: wf.id })).toHaveLength(1);
    if (kind === 'postgres') expect(sent.filter((sql) => /^PREPARE (\w+) AS .*; EXECUTE \1\(.*\); DEALLOCATE \1; COMMIT$/s.test(sql))).toHaveLength(1);
  });

  (kind === 'sqlite' ? it.skip : it)("with a subscriber of the application's to transaction events, TypeORM begins and commits: the subscriber runs outside the step's transaction and its bounds", async () => {
    control.reset();
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'Ada' }));
    const workflows = app.moduleRef.get(WorkflowService);
    // What an application's afterTransactionCommit sees: the step's bound (10 s) only inside its transaction.
    const seen: string[] = [];
    const shown = kind === 'postgres' ? 'SHOW statement_timeout' : 'SELECT @@session.max_statement_time AS statement_timeout';
    const subscriber = { afterTransactionCommit: async (event: TransactionCommitEvent) => void seen.push(String(Number((await event.queryRunner.query(shown))[0].statement_timeout))) };
    app.dataSource.subscribers.push(subscriber);
    let wf!: WorkflowRecord;
    try {
      const sent = await loggedDuring(app.dataSource, async () => {
        wf = await workflows.start(LedgerWorkflow, hero);
        await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
      });
      expect(sent.filter((sql) => /(^|; )(COMMIT; START TRANSACTION|START TRANSACTION; SET LOCAL)|SET SESSION autocommit = 0/.test(sql))).toEqual([]);
      // MariaDB: the bounds set after TypeORM's BEGIN, for b's transaction.
      if (kind === 'mysql') expect(sent.filter((sql) => /^SET SESSION max_statement_time = 10,/.test(sql))).toHaveLength(1);
    } finally {
      app.dataSource.subscribers.splice(app.dataSource.subscribers.indexOf(subscriber), 1);
    }
    expect(await app.dataSource.getRepository(TestEffect).findBy({ workflowId: wf.id })).toHaveLength(1);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((timeout) => timeout !== '0')).toEqual([]);
  });
});

/**
 * How many connections of the pool (those of the steps that ran among them) still have a step's
 * bounds, or autocommit off or a transaction open (MariaDB), instead of the server's values.
 */
async function boundedSessions(app: TestApp, kind: DatabaseKind): Promise<number> {
  const shown =
    kind === 'postgres'
      ? "SELECT current_setting('statement_timeout') = '0' AND current_setting('idle_in_transaction_session_timeout') = '0' AS restored"
      : 'SELECT @@session.max_statement_time = @@global.max_statement_time AND @@session.idle_transaction_timeout = @@global.idle_transaction_timeout AND @@session.autocommit = 1 AND @@in_transaction = 0 AS restored';
  const restored = (await onEverySession(app, shown)).map((rows) => (rows as Array<{ restored: unknown }>)[0].restored);
  return restored.filter((value) => value !== true && Number(value) !== 1).length;
}

/** PostgreSQL: the one-message ends' statements (endAndCommit) still prepared on any of the pool's connections. */
async function endStatementsLeft(app: TestApp): Promise<string[]> {
  const named = await onEverySession(app, "SELECT name FROM pg_prepared_statements WHERE name LIKE 'geneva_drive_end_%'");
  return named.flatMap((rows) => (rows as Array<{ name: string }>).map(({ name }) => name));
}

/** `sql`'s rows on each connection of the pool, all of them held at once so that each is a different one. */
async function onEverySession(app: TestApp, sql: string): Promise<unknown[]> {
  const runners = await Promise.all(
    Array.from({ length: POOL_SIZE }, async () => {
      const runner = app.dataSource.createQueryRunner();
      await runner.connect();
      return runner;
    }),
  );
  try {
    return await Promise.all(runners.map((runner) => runner.query(sql)));
  } finally {
    await Promise.all(runners.map((runner) => runner.release()));
  }
}


/** How many of `sent` read the hero's table. */
function heroReadsIn(app: TestApp, sent: string[]): number {
  const heroTable = app.dataSource.getMetadata(TestHero).tableName;
  const reads = new RegExp(`(^|;)\\s*SELECT [^;]*FROM \\W?${heroTable}\\W`, 'i');
  return sent.filter((query) => reads.test(query)).length;
}

/** On Bull and BullMQ: the same step, through Redis, on one database (the queue is what differs here). */
for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
  const title = `transactional steps on ${driver.adapter}`;
  if (!redisAvailable()) {
    describe.skip(`${title} (Redis not reachable)`, () => it('needs Redis', () => undefined));
    continue;
  }
  describeEachDatabase(title, (kind: DatabaseKind) => {
    // A prefix of this run's own: nothing to clear before, and no handle of the test's own on Redis
    // (a second client closed mid-connect rejects later, in whichever test runs then).
    const prefix = `gd-tx-${driver.adapter}-${process.pid}-${Date.now().toString(36)}-${kind}`;
    let app: TestApp;
    beforeAll(async () => {
      app = await createTestApp(kind, TRANSACTIONAL_WORKFLOWS, { entities: [TestEffect], queue: driver.options({ name: 'gd-transactional', prefix, concurrency: 2 }) });
      await ensureEffectTable(app.dataSource);
    });
    afterAll(async () => {
      if (app) await driver.view(app.moduleRef.get(QUEUE_PORT)).removePending();
      await app?.close();
    });

    it('runs the workflow to its end with one effect for the committed step, one rolled back by a reattempt', async () => {
      control.reset();
      const heroes = app.dataSource.getRepository(TestHero);
      const hero = await heroes.save(heroes.create({ name: 'Ada' }));
      const workflows = app.moduleRef.get(WorkflowService);
      const wf = await workflows.start(LedgerWorkflow, hero);
      control.endings.set(wf.id, 'reattempt-once');
      await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
      expect(await app.dataSource.getRepository(TestEffect).countBy({ workflowId: wf.id })).toBe(1);
      expect((await workflows.executionHistory(wf)).map((e) => `${e.stepName}:${e.outcome}`)).toEqual(['a:success', 'b:reattempted', 'b:success', 'c:success']);
    });
  });
}
