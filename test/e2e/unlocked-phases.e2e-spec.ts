/**
 * On PostgreSQL a plain step starts, and a last step's outcome is recorded, without a transaction:
 * the rows are read (or taken as phase 1 left them), and one statement takes the workflow and
 * execution row locks and writes only while both rows are still in the states the decision was made
 * in. These tests move the rows between the read and the write — a concurrent transaction holding
 * the workflow lock, a housekeeping recovery while the body runs — and check that the statement
 * waits for the lock, writes nothing, and the locked phase decides from the rows as they are.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { GENEVA_DRIVE_CHANNELS, GenevaWorkflow, HousekeepingService, SignalMatcher, SignalService, Step, Workflow, WorkflowService, type GenevaDriveModuleOptions, type WorkflowRecord } from 'geneva-drive';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import { pgRowVersion } from '../../libs/geneva-drive/src/persistence/sql/pg-row-version.js';
import type { AfterQueryEvent, BeforeQueryEvent, DataSource, EntitySubscriberInterface, QueryRunner } from 'typeorm';
import { waitUntil } from '../src/bull-wait.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { enabledDatabases } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/** Step bodies that ran: `<workflow id>:<step>`. */
const journal: string[] = [];
/** Set by a test: what the first run of `StalledWorkflow.work` does while it runs. */
const stall: { during?: () => Promise<void> } = {};

@Workflow({ name: 'UnlockedPlain', hero: () => TestHero })
class PlainWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async only() {
    journal.push(`${this.record.id}:only`);
  }
}

@Workflow({ name: 'UnlockedKeyed', hero: () => TestHero })
class KeyedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: (wf: KeyedWorkflow) => `account:${wf.hero.name}`, limit: 1 } }) async only() {
    journal.push(`${this.record.id}:only`);
  }
}

/** Set by a test: what the first run of `HeldKeyedWorkflow.only` waits for while it holds its key. */
const hold: { until?: Promise<void> } = {};

/** A held body: records its run, and the first one waits for `hold.until`. */
async function holdOnce(workflowId: string): Promise<void> {
  journal.push(`${workflowId}:only`);
  const until = hold.until;
  hold.until = undefined;
  await until;
}

@Workflow({ name: 'UnlockedHeldKeyed', hero: () => TestHero })
class HeldKeyedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ concurrency: { key: (wf: HeldKeyedWorkflow) => `account:${wf.hero.name}`, limit: 1 } }) async only() {
    await holdOnce(this.record.id);
  }
}

/** HeldKeyedWorkflow's step, transactional. */
@Workflow({ name: 'UnlockedHeldKeyedLedger', hero: () => TestHero })
class HeldKeyedLedgerWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ transactional: true, transactionTimeout: '30s', concurrency: { key: (wf: HeldKeyedLedgerWorkflow) => `account:${wf.hero.name}`, limit: 1 } }) async only() {
    await holdOnce(this.record.id);
  }
}

/** A stalled body: records its run, and the first one does `stall.during`. */
async function stallOnce(workflowId: string): Promise<void> {
  journal.push(`${workflowId}:work`);
  const during = stall.during;
  stall.during = undefined;
  await during?.();
}

@Workflow({ name: 'UnlockedStalled', hero: () => TestHero })
class StalledWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async work() {
    await stallOnce(this.record.id);
  }
}

/** StalledWorkflow's step, then one it chains into. */
@Workflow({ name: 'UnlockedStalledChain', hero: () => TestHero })
class StalledChainWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async work() {
    await stallOnce(this.record.id);
  }

  // A skipIf keeps its start in Node, under the locks of the outcome's transaction.
  @Step({ skipIf: () => false }) async after() {
    journal.push(`${this.record.id}:after`);
  }
}

/** StalledChainWorkflow's steps, the second deciding nothing in Node: it starts in the outcome's message. */
@Workflow({ name: 'UnlockedStalledPlainChain', hero: () => TestHero })
class StalledPlainChainWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async work() {
    await stallOnce(this.record.id);
  }

  @Step() async after() {
    journal.push(`${this.record.id}:after`);
  }
}

/** A first step, then one that waits for `go`. */
@Workflow({ name: 'UnlockedWaiting', hero: () => TestHero })
class WaitingWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async first() {
    journal.push(`${this.record.id}:first`);
  }

  @Step({ waitFor: 'go' }) async woken() {
    journal.push(`${this.record.id}:woken:${String((this.receivedSignal!.payload as { n: number }).n)}`);
  }
}

/** WaitingWorkflow with a gate whose matcher looks at the payload: it decides in Node. */
@Workflow({ name: 'UnlockedPickyWaiting', hero: () => TestHero })
class PickyWaitingWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async first() {
    journal.push(`${this.record.id}:first`);
  }

  @Step({ waitFor: new SignalMatcher('go', (payload: { n: number }) => payload.n > 0) }) async woken() {
    journal.push(`${this.record.id}:woken:${String((this.receivedSignal!.payload as { n: number }).n)}`);
  }
}

/** A first step with a skipIf: its phase 1 decides under the locks, so nothing is kept for its job. */
@Workflow({ name: 'UnlockedSkippable', hero: () => TestHero })
class SkippableWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ skipIf: () => false }) async only() {
    journal.push(`${this.record.id}:only`);
  }
}

/** Every statement that ran, in order, when it returned, and what the test does once a statement matching `onAfter` returns. */
class StatementWatch implements EntitySubscriberInterface {
  readonly ran: Array<{ sql: string; at: number }> = [];
  onAfter?: { matches: (sql: string) => boolean; run: () => Promise<void> };

  get statements(): string[] {
    return this.ran.map(({ sql }) => sql);
  }

  async afterQuery(event: AfterQueryEvent): Promise<void> {
    this.ran.push({ sql: event.query, at: performance.now() });
    const hook = this.onAfter;
    if (hook?.matches(event.query)) {
      this.onAfter = undefined;
      await hook.run();
    }
  }
}

/**
 * Kills the connection of the first transaction begun by a chained finalize's guarded write
 * (`START TRANSACTION; WITH l AS ...`), just before its COMMIT goes out: the write went through,
 * uncommitted, and the server rolls it back.
 */
class KillBeforeChainCommit implements EntitySubscriberInterface {
  private runner?: QueryRunner;
  private done = false;
  readonly killed: number[] = [];

  constructor(private readonly dataSource: DataSource) {}

  async beforeQuery(event: BeforeQueryEvent): Promise<void> {
    if (this.done || !event.queryRunner) return;
    if (!this.runner) {
      if (event.query.startsWith('START TRANSACTION; WITH l AS (')) this.runner = event.queryRunner;
      return;
    }
    if (event.queryRunner !== this.runner || !/(^|;\s*)COMMIT$/.test(event.query)) return;
    this.done = true;
    const [{ pid }] = await event.queryRunner.query('SELECT pg_backend_pid() AS pid');
    await this.dataSource.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitUntil(`backend ${pid} to be gone`, async () => (Number((await this.dataSource.query('SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1', [pid]))[0].n) === 0 ? true : null));
    this.killed.push(Number(pid));
  }
}

const isUnlockedRead = (sql: string) => sql.startsWith('SELECT ') && sql.includes(' JOIN "geneva_drive_step_executions" e ') && !sql.includes('FOR UPDATE');
const isGuardedWrite = (sql: string) => sql.startsWith('WITH l AS (');
const isBegin = (sql: string) => /^(START TRANSACTION|BEGIN)/.test(sql);
/** A chained finalize's first message: BEGIN with the outcome's guarded write (the read of what the next step's phase 1 needs after it). */
const isGuardedBegin = (sql: string) => sql.startsWith('START TRANSACTION; WITH l AS (');
/** The locking read of the rows that begins a locked phase, alone or with its BEGIN. */
const isLockRead = (sql: string) => /^(START TRANSACTION; )?SELECT /.test(sql) && sql.includes(' JOIN "geneva_drive_step_executions" e ') && sql.includes('FOR UPDATE');
const isHeroRead = (sql: string) => sql.startsWith('SELECT') && sql.includes('FROM "test_heroes" h');
/** A guarded write with the hero's read after it, in one message (one round trip). */
const isGuardedWriteWithHero = (sql: string) => isGuardedWrite(sql) && /; SELECT h\..* FROM "test_heroes" h /s.test(sql);
const kind = (sql: string) =>
  isUnlockedRead(sql) ? 'read' : isGuardedWriteWithHero(sql) ? 'guarded write + hero' : isGuardedWrite(sql) ? 'guarded write' : isHeroRead(sql) ? 'hero' : sql;
/** A step's statements, the test's own polling reads aside. */
const isEngine = (sql: string) => isUnlockedRead(sql) || isGuardedWrite(sql) || isHeroRead(sql) || isBegin(sql) || /^(COMMIT|WITH )/.test(sql) || sql.includes('FOR UPDATE');

/** The columns of a row that are set (not null), by name. */
const setColumns = (row: object) =>
  Object.entries(row)
    .filter(([, value]) => value != null)
    .map(([key]) => key)
    .sort();

/** The statements after the COMMIT of the caller's transaction that start()ed the workflow. */
function afterCallersCommit(statements: string[]): string[] {
  const start = statements.findIndex((sql) => sql.startsWith('WITH w AS (INSERT INTO "geneva_drive_workflows"'));
  return statements.slice(statements.findIndex((sql, at) => at > start && sql.startsWith('COMMIT')) + 1);
}

const suite = enabledDatabases().includes('postgres') ? describe : describe.skip;

suite('unlocked phases [postgres]', () => {
  let app: TestApp | undefined;
  let watch: StatementWatch;

  async function boot(options: GenevaDriveModuleOptions = {}): Promise<{ dataSource: DataSource; workflows: WorkflowService; hero: TestHero }> {
    journal.length = 0;
    // The local queue gives each job its hints (workflow, type, step, hero): what lets phase 1 decide unlocked.
    app = await createTestApp('postgres', [PlainWorkflow, KeyedWorkflow, HeldKeyedWorkflow, HeldKeyedLedgerWorkflow, StalledWorkflow, StalledChainWorkflow, StalledPlainChainWorkflow, WaitingWorkflow, PickyWaitingWorkflow], { queue: { adapter: 'local', concurrency: 2 }, stuckInProgressThreshold: '1s', ...options });
    watch = new StatementWatch();
    app.dataSource.subscribers.push(watch);
    const heroes = app.dataSource.getRepository(TestHero);
    return { dataSource: app.dataSource, workflows: app.moduleRef.get(WorkflowService), hero: await heroes.save(heroes.create({ name: 'Ada' })) };
  }

  const settled = (workflows: WorkflowService, wf: WorkflowRecord, state: string) =>
    waitUntil(`workflow ${wf.id} to be ${state}`, async () => ((await workflows.find(wf.id)).state === state ? true : null));

  afterEach(async () => {
    stall.during = undefined;
    hold.until = undefined;
    await app?.close();
    app = undefined;
  });

  it('a plain one-step workflow runs its step in three round trips after start(): the read, the guarded start with the hero read after it, the guarded outcome, and no transaction', async () => {
    const { dataSource, workflows, hero } = await boot();
    // Started in a transaction of the caller's: its job begins by reading the rows.
    const wf = await dataSource.transaction((manager) => workflows.start(PlainWorkflow, hero, { manager }));
    await settled(workflows, wf, 'finished');
    const afterStart = afterCallersCommit(watch.statements);
    // The step's statements: no BEGIN, no COMMIT, no other lock.
    // The hero is read after the guarded start took the row locks (in its message), so the body sees
    // every commit made under them.
    const engine = afterStart.filter((sql) => isEngine(sql));
    expect(engine.map(kind)).toEqual(['read', 'guarded write + hero', 'guarded write']);
    const [execution] = await workflows.executionHistory(wf);
    expect(execution).toMatchObject({ stepName: 'only', state: 'completed', outcome: 'success', jobId: execution.id });
    expect(journal).toEqual([`${wf.id}:only`]);
  });

  it('a first step started in the process whose start() wrote it in one statement starts on the rows that statement wrote: no read, its guarded start requiring both rows’ versions as written', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(PlainWorkflow, hero);
    await settled(workflows, wf, 'finished');
    const afterStart = watch.statements.slice(watch.statements.findIndex((sql) => sql.startsWith('WITH w AS (INSERT INTO "geneva_drive_workflows"')) + 1);
    const engine = afterStart.filter((sql) => isEngine(sql));
    expect(engine.map(kind)).toEqual(['guarded write + hero', 'guarded write']);
    expect(engine[0]).toMatch(/^WITH l AS \(SELECT .* AS workflow_version, .* AS execution_version FROM/s);
    expect(journal).toEqual([`${wf.id}:only`]);
  });

  it('a first step whose workflow row was written after start() does not start on the rows start() wrote, even when that write left its state and its updated_at: the guarded start refuses, and the locked phase 1 starts it', async () => {
    const { dataSource, workflows, hero } = await boot();
    // A writer of the workflow's row that leaves its state and its stamp (another host's, in the same
    // millisecond), between start()'s statement and the job's start.
    watch.onAfter = {
      matches: (sql) => sql.startsWith('WITH w AS (INSERT INTO "geneva_drive_workflows"'),
      run: async () => void (await dataSource.query(`UPDATE geneva_drive_workflows SET updated_at = updated_at WHERE state = 'ready'`)),
    };
    const wf = await workflows.start(PlainWorkflow, hero);
    await settled(workflows, wf, 'finished');
    const afterStart = watch.statements.slice(watch.statements.findIndex((sql) => sql.startsWith('WITH w AS (INSERT INTO "geneva_drive_workflows"')) + 1).filter((sql) => isEngine(sql));
    const guarded = afterStart.findIndex(isGuardedWrite);
    expect(guarded).toBe(0);
    // Refused: the start goes under the row locks, in a transaction.
    expect(afterStart.slice(1).findIndex(isBegin)).toBeGreaterThanOrEqual(0);
    expect(journal).toEqual([`${wf.id}:only`]);
    expect((await workflows.executionHistory(wf)).map(({ stepName, state }) => [stepName, state])).toEqual([['only', 'completed']]);
  });

  it('a step with an uncontended concurrency key costs one round trip more: the hero read for its key, the slot taken with the guarded start and freed with the guarded outcome', async () => {
    const { dataSource, workflows, hero } = await boot();
    const wf = await dataSource.transaction((manager) => workflows.start(KeyedWorkflow, hero, { manager }));
    await settled(workflows, wf, 'finished');
    const afterStart = afterCallersCommit(watch.statements);
    const engine = afterStart.filter((sql) => isEngine(sql) || /^(INSERT|UPDATE)/.test(sql));
    expect(engine.map(kind)).toEqual(['read', 'hero', 'guarded write + hero', 'guarded write']);
    const guarded = engine.filter(isGuardedWrite);
    expect(guarded[0]).toMatch(/k AS \(INSERT INTO geneva_drive_flow_keys .* ON CONFLICT \(flow_key\) DO UPDATE .* WHERE geneva_drive_flow_keys.holding < \$\d+ AND geneva_drive_flow_keys.waiters = '\[\]' AND geneva_drive_flow_keys.updated_at <= excluded.updated_at RETURNING 1\), g AS \(SELECT 1 FROM k\)/);
    expect(guarded[1]).toMatch(/k AS \(UPDATE geneva_drive_flow_keys SET holding = .* AND EXISTS \(SELECT 1 FROM s\) RETURNING holding, waiters\), g AS \(SELECT 1 FROM k\)/);
    expect(await workflows.executionHistory(wf)).toMatchObject([{ stepName: 'only', state: 'completed', flowKey: 'account:Ada' }]);
    expect(await dataSource.query(`SELECT flow_key, holding, waiters FROM geneva_drive_flow_keys`)).toEqual([{ flow_key: 'account:Ada', holding: 0, waiters: '[]' }]);
    expect(journal).toEqual([`${wf.id}:only`]);
  });

  /** Starts `workflowClass` twice on one key, the second queued for it while the first holds it; `release` ends the first's body. */
  async function contended(workflowClass: typeof HeldKeyedWorkflow | typeof HeldKeyedLedgerWorkflow) {
    const { dataSource, workflows, hero } = await boot();
    let release!: () => void;
    hold.until = new Promise<void>((resolve) => (release = resolve));
    const holder = await workflows.start(workflowClass, hero);
    await waitUntil('the holder to run', async () => (journal.includes(`${holder.id}:only`) ? true : null));
    // Another account holder of the same name: the same key.
    const namesake = await dataSource.getRepository(TestHero).save({ name: hero.name });
    const waiter = await workflows.start(workflowClass, namesake);
    await waitUntil('the second to wait for the key', async () => {
      const [row] = await dataSource.query(`SELECT waiters FROM geneva_drive_flow_keys WHERE flow_key = 'account:Ada'`);
      return row && row.waiters !== '[]' ? true : null;
    });
    return { dataSource, workflows, holder, waiter, release };
  }

  it('a holder of a contended key ends in one statement too: its slot freed with the guarded outcome, and its waiter woken once that committed', async () => {
    const { dataSource, workflows, holder, waiter, release } = await contended(HeldKeyedWorkflow);
    watch.ran.length = 0;
    release();
    await settled(workflows, holder, 'finished');
    await settled(workflows, waiter, 'finished');
    const frees = watch.statements.filter((sql) => isGuardedWrite(sql) && sql.includes('k AS (UPDATE geneva_drive_flow_keys'));
    // The holder's outcome and the waiter's: each frees its slot in its guarded write, the first with a waiter to wake.
    expect(frees).toHaveLength(2);
    expect(frees[0]).toMatch(/k AS \(UPDATE geneva_drive_flow_keys SET holding = CASE WHEN holding > 0 THEN holding - 1 ELSE 0 END, updated_at = \$\d+ WHERE flow_key = \$\d+ AND EXISTS \(SELECT 1 FROM s\) RETURNING holding, waiters\)/);
    // No outcome ran again under the locks to free the slot (freeSlot's statement of its own), and
    // the waiter was woken by the end's own reads of it, before anything began a transaction.
    expect(watch.statements.filter((sql) => sql.startsWith('UPDATE geneva_drive_flow_keys SET holding = CASE'))).toEqual([]);
    const afterFree = watch.statements.slice(watch.statements.indexOf(frees[0]) + 1);
    const wakeRead = afterFree.findIndex((sql) => sql.includes('FROM "geneva_drive_step_executions"') && sql.includes(' IN ('));
    expect(wakeRead).toBeGreaterThanOrEqual(0);
    expect(afterFree.slice(0, wakeRead).filter((sql) => isBegin(sql) || sql.includes('FOR UPDATE'))).toEqual([]);
    expect((await workflows.executionHistory(waiter)).map(({ state, flowKey }) => ({ state, flowKey }))).toEqual([{ state: 'completed', flowKey: 'account:Ada' }]);
    expect(await dataSource.query(`SELECT flow_key, holding, waiters FROM geneva_drive_flow_keys`)).toEqual([{ flow_key: 'account:Ada', holding: 0, waiters: '[]' }]);
    expect(journal).toEqual([`${holder.id}:only`, `${waiter.id}:only`]);
  });

  it('a holder whose one-statement end committed but whose waiter’s wake failed to go reports its outcome, and the wake goes again', async () => {
    const { workflows, holder, waiter, release } = await contended(HeldKeyedWorkflow);
    const store = app!.moduleRef.get(WorkflowStore, { strict: false });
    const enqueue = store.enqueue.bind(store);
    let refused = 0;
    store.enqueue = (...args: Parameters<WorkflowStore['enqueue']>) => {
      if (args[1].id === waiter.id && refused++ === 0) return Promise.reject(new Error('the queue is gone'));
      return enqueue(...args);
    };
    const finalized: Array<Record<string, unknown>> = [];
    const listener = (message: unknown) => void finalized.push(message as Record<string, unknown>);
    subscribe(GENEVA_DRIVE_CHANNELS.finalize, listener);
    try {
      release();
      await settled(workflows, holder, 'finished');
      await settled(workflows, waiter, 'finished');
    } finally {
      unsubscribe(GENEVA_DRIVE_CHANNELS.finalize, listener);
      store.enqueue = enqueue;
    }
    expect(refused).toBe(2); // the wake refused, then sent again
    // The end was written: its event says so (not a discarded outcome), once.
    expect(finalized.filter((event) => event.workflowId === holder.id)).toEqual([expect.objectContaining({ stepName: 'only', stepState: 'completed', workflowState: 'finished' })]);
  });

  it('a transactional holder whose transaction TypeORM commits (a subscriber to its events) frees its slot in its guarded write only while nobody waits: with a waiter, under the locks', async () => {
    const { dataSource, workflows, holder, waiter, release } = await contended(HeldKeyedLedgerWorkflow);
    // The application's own subscriber to transaction events: the step's COMMIT is TypeORM's, after the guarded write.
    dataSource.subscribers.push({ afterTransactionCommit: () => undefined } as EntitySubscriberInterface);
    watch.ran.length = 0;
    release();
    await settled(workflows, holder, 'finished');
    await settled(workflows, waiter, 'finished');
    const frees = watch.statements.filter((sql) => isGuardedWrite(sql) && sql.includes('k AS (UPDATE geneva_drive_flow_keys'));
    // Its waiters could not be woken before that COMMIT: the free is guarded on an empty queue, refused, and the end runs under the locks.
    expect(frees[0]).toMatch(/WHERE flow_key = \$\d+ AND waiters = '\[\]' AND EXISTS \(SELECT 1 FROM s\) RETURNING holding, waiters\)/);
    expect(watch.statements.filter((sql) => sql.startsWith('UPDATE geneva_drive_flow_keys SET holding = CASE'))).toHaveLength(1);
    expect(await dataSource.query(`SELECT flow_key, holding, waiters FROM geneva_drive_flow_keys`)).toEqual([{ flow_key: 'account:Ada', holding: 0, waiters: '[]' }]);
    expect(journal).toEqual([`${holder.id}:only`, `${waiter.id}:only`]);
  });

  /** A WaitingWorkflow parked at `woken`. */
  async function parked(workflows: WorkflowService, hero: TestHero): Promise<WorkflowRecord> {
    const wf = await workflows.start(WaitingWorkflow, hero);
    await waitUntil('the step to park', async () => ((await workflows.executionHistory(wf)).some((e) => e.stepName === 'woken' && e.state === 'waiting') ? true : null));
    return wf;
  }
  const isMessage = (sql: string) => sql.startsWith('BEGIN; ');

  it('a wake-up started in the process that signalled starts on the rows the signal’s message left: its guarded start and the hero, no read', async () => {
    const { workflows, hero } = await boot();
    const wf = await parked(workflows, hero);
    watch.ran.length = 0;
    await app!.moduleRef.get(SignalService).signal(wf, 'go', { payload: { n: 7 } });
    await settled(workflows, wf, 'finished');
    // The engine's statements (the test's own reads of the workflow apart).
    const afterMessage = watch.statements.slice(watch.statements.findIndex(isMessage) + 1).filter((sql) => isEngine(sql));
    expect(afterMessage[0]).toMatch(/^WITH l AS \(SELECT .* AS workflow_version, .* AS execution_version FROM/s);
    expect(kind(afterMessage[0])).toBe('guarded write + hero');
    expect(afterMessage.filter(isUnlockedRead)).toEqual([]);
    expect(journal).toEqual([`${wf.id}:first`, `${wf.id}:woken:7`]);
  });

  it('a wake-up whose rows were written after the message does not start on the rows it left, even when those writes left their states and updated_at: the guarded start refuses, and the locked phase 1 starts it', async () => {
    const { dataSource, workflows, hero } = await boot();
    const wf = await parked(workflows, hero);
    watch.ran.length = 0;
    // A writer of the execution's row that leaves its state and its stamp (another host's, in the
    // same millisecond), between the message's commit and the wake-up's start.
    watch.onAfter = { matches: isMessage, run: async () => void (await dataSource.query(`UPDATE geneva_drive_step_executions SET updated_at = updated_at WHERE workflow_id = $1 AND state = 'scheduled'`, [wf.id])) };
    await app!.moduleRef.get(SignalService).signal(wf, 'go', { payload: { n: 8 } });
    await settled(workflows, wf, 'finished');
    const afterMessage = watch.statements.slice(watch.statements.findIndex(isMessage) + 1).filter((sql) => isEngine(sql));
    const guarded = afterMessage.findIndex(isGuardedWrite);
    expect(guarded).toBeGreaterThanOrEqual(0);
    // Refused: the start goes under the row locks, in a transaction.
    expect(afterMessage.slice(guarded + 1).findIndex(isBegin)).toBeGreaterThanOrEqual(0);
    expect(journal).toEqual([`${wf.id}:first`, `${wf.id}:woken:8`]);
    expect((await workflows.executionHistory(wf)).map(({ stepName, state }) => [stepName, state])).toEqual([
      ['first', 'completed'],
      ['woken', 'completed'],
    ]);
  });

  it('the rows kept for a job are the rows as a read finds them, with their versions, for a first step and for a wake-up', async () => {
    // The manual queue runs nothing: the kept rows stay until taken here.
    app = await createTestApp('postgres', [WaitingWorkflow, SkippableWorkflow], { queue: { adapter: 'manual' } });
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'Ada' }));
    const store = app.moduleRef.get(WorkflowStore, { strict: false });
    const workflows = app.moduleRef.get(WorkflowService);
    const manager = app.dataSource.manager;
    const wf = await workflows.start(WaitingWorkflow, hero);
    const [first] = await workflows.executionHistory(wf);
    // A read of the rows, with their versions as the database has them now.
    const read = async (executionId: string) => {
      const [versions] = await app!.dataSource.query(
        `SELECT ${pgRowVersion('w')} AS workflow, ${pgRowVersion('e')} AS execution FROM geneva_drive_workflows w JOIN geneva_drive_step_executions e ON e.workflow_id = w.id WHERE w.id = $1 AND e.id = $2`,
        [wf.id, executionId],
      );
      return { ...(await store.readStep(manager, wf.id, executionId, 'TestHero'))!, versions: { ...versions } };
    };
    expect(store.takeRows(first.id)).toEqual(await read(first.id));
    expect(store.takeRows(first.id)).toBeUndefined();
    // A step whose phase 1 runs the application's code (a skipIf) never starts on kept rows: none are kept.
    const skippable = await workflows.start(SkippableWorkflow, hero);
    expect(store.takeRows((await workflows.executionHistory(skippable))[0].id)).toBeUndefined();
    // Parked by hand, as the gate parks it: `first` completed, `woken` waiting.
    await app.dataSource.query(`UPDATE geneva_drive_step_executions SET state = 'completed', outcome = 'success' WHERE id = $1`, [first.id]);
    await app.dataSource.query(
      `INSERT INTO geneva_drive_step_executions (workflow_id, step_name, state, scheduled_for, created_at, updated_at, waiting_since) VALUES ($1, 'woken', 'waiting', now(), now(), now(), now())`,
      [wf.id],
    );
    await app.dataSource.query(`UPDATE geneva_drive_workflows SET current_step_name = 'first', next_step_name = 'woken' WHERE id = $1`, [wf.id]);
    await app.moduleRef.get(SignalService).signal(wf, 'go', { payload: { n: 1, at: new Date(0) } });
    const woken = (await workflows.executionHistory(wf)).find((e) => e.stepName === 'woken')!;
    expect(woken).toMatchObject({ state: 'scheduled' });
    expect(store.takeRows(woken.jobId!)).toEqual(await read(woken.id));
  });

  it('a start whose workflow is paused between the read and the write waits for the pause to commit, writes nothing, and the locked phase 1 cancels the execution', async () => {
    const { dataSource, workflows, hero } = await boot();
    let pausedAt = 0;
    watch.onAfter = {
      matches: isUnlockedRead,
      run: async () => {
        // A concurrent writer holding the workflow lock: the guarded start must wait for its commit.
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        await runner.startTransaction();
        await runner.query(`UPDATE geneva_drive_workflows SET state = 'paused', transitioned_at = now() WHERE state = 'ready'`);
        setTimeout(() => {
          pausedAt = performance.now();
          void runner.commitTransaction().then(() => runner.release());
        }, 300);
      },
    };
    // Started in a transaction of the caller's: its job begins by reading the rows.
    const wf = await dataSource.transaction((manager) => workflows.start(PlainWorkflow, hero, { manager }));
    await waitUntil('the job to be dealt with', async () => {
      const [execution] = await workflows.executionHistory(wf);
      return execution.state === 'canceled' ? execution : null;
    });

    const guarded = watch.ran.find(({ sql }) => isGuardedWrite(sql));
    expect(pausedAt).toBeGreaterThan(0);
    expect(guarded!.at).toBeGreaterThanOrEqual(pausedAt);
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'paused' });
    const [execution] = await workflows.executionHistory(wf);
    expect(execution).toMatchObject({ state: 'canceled', outcome: 'canceled', startedAt: null });
    expect(journal).toEqual([]);
  });

  it('a step that chains into a gate whose matcher decides in Node begins the transaction with its guarded outcome, the hero and the gate’s signals read after it in the same message; the gate’s start goes with the COMMIT', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(PickyWaitingWorkflow, hero, { signals: [{ name: 'go', payload: { n: 1 } }] });
    await settled(workflows, wf, 'finished');
    expect(journal).toEqual([`${wf.id}:first`, `${wf.id}:woken:1`]);
    const begins = afterCallersCommit(watch.statements).filter(isBegin);
    expect(begins).toHaveLength(1);
    expect(begins[0]).toMatch(/^START TRANSACTION; WITH l AS \(.* FOR UPDATE OF w, e\), g AS .*; SELECT h\.\*, s\.\* FROM \(SELECT 1\) AS o LEFT JOIN \(SELECT .* FROM "geneva_drive_signals" s WHERE .* FROM "test_heroes" h WHERE/s);
    expect(afterCallersCommit(watch.statements).filter(isLockRead)).toEqual([]);
    expect((await workflows.executionHistory(wf)).map(({ stepName, state, jobId }) => [stepName, state, jobId === null ? 'inline' : 'job'])).toEqual([
      ['first', 'completed', 'job'],
      ['woken', 'completed', 'inline'],
    ]);
  });

  it('a chained finalize whose connection dies before its COMMIT, its guarded write through, runs again under the locks: the outcome recorded once, each body run once', async () => {
    const { dataSource, workflows, hero } = await boot();
    const killer = new KillBeforeChainCommit(dataSource);
    dataSource.subscribers.push(killer);
    const wf = await workflows.start(PickyWaitingWorkflow, hero, { signals: [{ name: 'go', payload: { n: 3 } }] });
    await settled(workflows, wf, 'finished');
    expect(killer.killed).toHaveLength(1);
    expect(journal).toEqual([`${wf.id}:first`, `${wf.id}:woken:3`]);
    expect((await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['first', 'completed', 'success'],
      ['woken', 'completed', 'success'],
    ]);
    // Run again, it began with the locking read: the first attempt had moved the outcome's states in memory.
    const afterBegin = watch.statements.slice(watch.statements.findIndex(isGuardedBegin) + 1);
    expect(afterBegin.filter(isGuardedBegin)).toEqual([]);
    expect(afterBegin.some(isLockRead)).toBe(true);
  });

  it('a chained outcome whose execution housekeeping recovered while the body ran: the guarded write that begins its transaction writes nothing, and the transaction goes on under the locks, where the recovery stands', async () => {
    // The stalled run still chains when it ends: its chain is not cut short by the time it took.
    const { workflows, hero } = await boot({ chainSteps: { maxDuration: '10m' } });
    const housekeeping = app!.moduleRef.get(HousekeepingService);
    stall.during = async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 1 });
    };
    const wf = await workflows.start(StalledChainWorkflow, hero);
    await settled(workflows, wf, 'finished');
    // Both runs' outcomes began their transactions guarded; the stalled one's then read the rows under their locks.
    await waitUntil('the stalled worker to send its outcome', async () => (watch.statements.filter(isGuardedBegin).length >= 2 && watch.statements.some(isLockRead) ? true : null));
    expect(watch.statements.filter(isGuardedBegin)).toHaveLength(2);
    expect(watch.statements.filter(isLockRead).every((sql) => !sql.startsWith('START TRANSACTION'))).toBe(true);
    expect((await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['work', 'completed', 'recovered'],
      ['work', 'completed', 'success'],
      ['after', 'completed', 'success'],
    ]);
    expect(journal).toEqual([`${wf.id}:work`, `${wf.id}:work`, `${wf.id}:after`]);
  });

  describe('a chained step that decides nothing in Node starts in its predecessor’s outcome message', () => {
    /** The outcome's guarded write with the next step's start after it: one message, no transaction of the engine's. */
    const isChainedStart = (sql: string) => isGuardedWrite(sql) && /; WITH h AS \(SELECT .* FROM "test_heroes" h .*\), d AS \(SELECT /s.test(sql);
    const statementsAfterStart = () => watch.statements.slice(watch.statements.findIndex((sql) => sql.startsWith('WITH w AS (INSERT INTO "geneva_drive_workflows"')) + 1);

    it('a gate waiting for a name alone claims the buffered signal and its step starts and runs inline, with no BEGIN and no lock read', async () => {
      const { workflows, hero } = await boot();
      const wf = await workflows.start(WaitingWorkflow, hero, { signals: [{ name: 'go', payload: { n: 1 } }, { name: 'go', payload: { n: 2 } }] });
      await settled(workflows, wf, 'finished');
      const engine = statementsAfterStart().filter(isEngine);
      expect(engine.filter(isChainedStart)).toHaveLength(1);
      expect(engine.filter((sql) => isBegin(sql) || isLockRead(sql))).toEqual([]);
      expect(journal).toEqual([`${wf.id}:first`, `${wf.id}:woken:1`]);
      // The rows as the gate that decides in Node leaves them.
      const picky = await workflows.start(PickyWaitingWorkflow, hero, { signals: [{ name: 'go', payload: { n: 1 } }, { name: 'go', payload: { n: 2 } }] });
      await settled(workflows, picky, 'finished');
      const shape = async (record: WorkflowRecord) => ({
        executions: (await workflows.executionHistory(record)).map((e) => ({ stepName: e.stepName, state: e.state, outcome: e.outcome, set: setColumns(e).filter((key) => key !== 'signalId') })),
        signals: (await app!.moduleRef.get(SignalService).list(record)).map((signal) => ({ state: signal.state, claimed: Number(signal.claimed), set: setColumns(signal) })),
      });
      expect(await shape(wf)).toEqual(await shape(picky));
      const history = await workflows.executionHistory(wf);
      expect(history.map(({ stepName, state, outcome, jobId }) => [stepName, state, outcome, jobId === null ? 'inline' : 'job'])).toEqual([
        ['first', 'completed', 'success', 'job'],
        ['woken', 'completed', 'success', 'inline'],
      ]);
      const signals = await app!.moduleRef.get(SignalService).list(wf);
      expect(history[1]).toMatchObject({ signalId: signals[0].id, waitingSince: null });
      expect(history[1].startedAt).not.toBeNull();
      // The oldest claimed and consumed; the second still buffered.
      expect(signals.map((signal) => [(signal.payload as { n: number }).n, signal.state, Number(signal.claimed), Number(signal.consumed)])).toEqual([
        [1, 'consumed', 1, 1],
        [2, 'pending', 0, 0],
      ]);
      expect(signals[0].claimedAt).not.toBeNull();
    });

    it('a gate with no signal parks in the same message, and a signal wakes it', async () => {
      const { workflows, hero } = await boot();
      const wf = await parked(workflows, hero);
      const engine = statementsAfterStart().filter(isEngine);
      expect(engine.filter(isChainedStart)).toHaveLength(1);
      expect(engine.filter((sql) => isBegin(sql) || isLockRead(sql))).toEqual([]);
      const [, waiting] = await workflows.executionHistory(wf);
      expect(waiting).toMatchObject({ stepName: 'woken', state: 'waiting', signalId: null, startedAt: null, jobId: null });
      expect(waiting.waitingSince).not.toBeNull();
      // The rows as the gate that decides in Node leaves them.
      const picky = await workflows.start(PickyWaitingWorkflow, hero);
      await waitUntil('the other gate to park', async () => ((await workflows.executionHistory(picky)).some((e) => e.state === 'waiting') ? true : null));
      const shape = async (record: WorkflowRecord) => {
        const { state, currentStepName, nextStepName, startedAt, finishedAt } = await workflows.find(record.id);
        const executions = (await workflows.executionHistory(record)).map((e) => ({ ...e, set: setColumns(e) }));
        return { workflow: { state, currentStepName, nextStepName, started: startedAt !== null, finishedAt }, executions: executions.map(({ stepName, state, outcome, set }) => ({ stepName, state, outcome, set })) };
      };
      expect(await shape(wf)).toEqual(await shape(picky));
      await app!.moduleRef.get(SignalService).signal(wf, 'go', { payload: { n: 4 } });
      await settled(workflows, wf, 'finished');
      expect(journal.filter((line) => line.startsWith(`${wf.id}:`))).toEqual([`${wf.id}:first`, `${wf.id}:woken:4`]);
    });

    it('a plain step starts in the message: in_progress, the workflow performing it, run inline', async () => {
      const { workflows, hero } = await boot();
      const wf = await workflows.start(StalledPlainChainWorkflow, hero);
      await settled(workflows, wf, 'finished');
      const engine = statementsAfterStart().filter(isEngine);
      expect(engine.filter(isChainedStart)).toHaveLength(1);
      expect(engine.filter((sql) => isBegin(sql) || isLockRead(sql))).toEqual([]);
      expect(journal).toEqual([`${wf.id}:work`, `${wf.id}:after`]);
      expect((await workflows.executionHistory(wf)).map(({ stepName, state, jobId }) => [stepName, state, jobId === null ? 'inline' : 'job'])).toEqual([
        ['work', 'completed', 'job'],
        ['after', 'completed', 'inline'],
      ]);
    });

    it('with the hero gone, the message records the outcome and starts nothing: the next step’s own job cancels the workflow', async () => {
      const { dataSource, workflows, hero } = await boot();
      stall.during = async () => {
        await dataSource.getRepository(TestHero).delete(hero.id);
      };
      const wf = await workflows.start(StalledPlainChainWorkflow, hero);
      await settled(workflows, wf, 'canceled');
      expect(statementsAfterStart().filter(isChainedStart)).toHaveLength(1);
      expect((await workflows.executionHistory(wf)).map(({ stepName, state, outcome, jobId }) => [stepName, state, outcome, jobId === null ? 'inline' : 'job'])).toEqual([
        ['work', 'completed', 'success', 'job'],
        ['after', 'canceled', 'canceled', 'job'],
      ]);
      expect(journal).toEqual([`${wf.id}:work`]);
    });

    it('an outcome whose execution housekeeping recovered while the body ran is refused with the start after it; the locked path records it, and the recovery stands', async () => {
      const { workflows, hero } = await boot({ chainSteps: { maxDuration: '10m' } });
      const housekeeping = app!.moduleRef.get(HousekeepingService);
      stall.during = async () => {
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 1 });
      };
      const wf = await workflows.start(StalledPlainChainWorkflow, hero);
      await settled(workflows, wf, 'finished');
      await waitUntil('the stalled worker to send its outcome', async () => (watch.statements.filter(isChainedStart).length >= 2 && watch.statements.some(isLockRead) ? true : null));
      expect((await workflows.executionHistory(wf)).map((e) => [e.stepName, e.state, e.outcome])).toEqual([
        ['work', 'completed', 'recovered'],
        ['work', 'completed', 'success'],
        ['after', 'completed', 'success'],
      ]);
      expect(journal).toEqual([`${wf.id}:work`, `${wf.id}:work`, `${wf.id}:after`]);
    });

    it('a refused outcome starts nothing, not even a next step an operator scheduled meanwhile: that step runs from its own job', async () => {
      // One slot: the stalled run holds it, so the step the skip schedules waits in the queue.
      const { workflows, hero } = await boot({ queue: { adapter: 'local', concurrency: 1 }, chainSteps: { maxDuration: '10m' } });
      const housekeeping = app!.moduleRef.get(HousekeepingService);
      let wf: WorkflowRecord | undefined;
      stall.during = async () => {
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 1 });
        await workflows.skip(wf!.id);
      };
      wf = await workflows.start(StalledPlainChainWorkflow, hero);
      await settled(workflows, wf, 'finished');
      expect((await workflows.executionHistory(wf)).map(({ stepName, state, outcome, jobId }) => [stepName, state, outcome, jobId === null ? 'no job' : 'job'])).toEqual([
        ['work', 'completed', 'recovered', 'job'],
        ['work', 'skipped', 'skipped', 'no job'],
        ['after', 'completed', 'success', 'job'],
      ]);
      expect(journal).toEqual([`${wf.id}:work`, `${wf.id}:after`]);
    });
  });

  it('an outcome whose execution housekeeping recovered while the body ran is not written; the recovery stands and the step runs again', async () => {
    const { workflows, hero } = await boot();
    const housekeeping = app!.moduleRef.get(HousekeepingService);
    stall.during = async () => {
      // The worker stalls past the stuck threshold, and housekeeping recovers its execution.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 1 });
    };
    const wf = await workflows.start(StalledWorkflow, hero);
    await settled(workflows, wf, 'finished');

    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['work', 'completed', 'recovered'],
      ['work', 'completed', 'success'],
    ]);
    expect(journal).toEqual([`${wf.id}:work`, `${wf.id}:work`]);
    // Both starts and both outcomes went out guarded: the stalled worker's was refused. The second
    // run can finish before the stalled worker, back from housekeeping, sends its outcome.
    await waitUntil('the stalled worker to send its outcome', async () => watch.statements.filter(isGuardedWrite).length >= 4);
    expect(watch.statements.filter(isGuardedWrite)).toHaveLength(4);
    expect(await workflows.executionHistory(wf)).toEqual(history);
  });
});
