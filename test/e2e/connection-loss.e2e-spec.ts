/**
 * Transient database errors: the engine's own connection is killed from outside — PostgreSQL
 * `pg_terminate_backend`, MariaDB `KILL CONNECTION` — at a chosen point of one of its transactions,
 * and the transaction is run again on a fresh connection (bounded, with backoff) instead of
 * stranding the work.
 *
 * The killer is a TypeORM query subscriber: armed just before the transaction (for finalize: from the
 * `geneva-drive:step` event, published after the body and before finalize), it holds the next
 * statement of a transaction — its first statement, or its COMMIT — reads the backend id of the
 * connection running it, and has another connection kill exactly that backend (of this test
 * database, never another) and wait until it is gone. The statement then meets a dead connection.
 *
 * Killed before COMMIT, nothing committed, so every engine transaction may run again. Killed at
 * COMMIT, the client cannot know whether it committed: only idempotent work (finalize, which
 * re-checks under the lock that the execution is still in progress) runs again, while `start()`
 * reports the error rather than risk a second workflow. On PostgreSQL, `start()` without a manager is
 * one statement with no transaction of its own: a loss there is like a loss at COMMIT; so is the
 * guarded statement that records a plain step's outcome, after which the locked finalize runs and
 * records what is still due. SQLite has no connection to lose.
 */
import diagnostics from 'node:diagnostics_channel';
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import type { BeforeQueryEvent, DataSource, EntitySubscriberInterface } from 'typeorm';
import { CommitOutcomeUnknownError, GENEVA_DRIVE_CHANNELS, Signal, SignalService, StepExecution, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { isConnectionError, TransactionRunner } from '../../libs/geneva-drive/src/persistence/transaction-runner.js';
import { ChoreWorkflow, DeliveryWorkflow, hkJournal } from '../src/housekeeping-workflows.js';
import { sleep, waitFor } from '../src/resumable-app.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/**
 * A transaction's first statement or its COMMIT (alone, or with the statements that ride on it in
 * one message), the next statement run outside any transaction, or the next transaction sent as one
 * message (PostgreSQL's signal(): `BEGIN; ...; COMMIT`).
 */
type KillPoint = 'first statement' | 'commit' | 'single statement' | 'message';

/** Kills the connection of the next engine transaction at each `arm` point in turn, once each. */
class ConnectionKiller implements EntitySubscriberInterface {
  private armed: KillPoint[] = [];
  /** Backend ids killed so far. */
  readonly killed: number[] = [];

  constructor(
    private readonly kind: 'postgres' | 'mysql',
    private readonly dataSource: DataSource,
  ) {}

  arm(...points: KillPoint[]): void {
    this.armed = points;
  }

  async beforeQuery(event: BeforeQueryEvent): Promise<void> {
    const point = this.armed[0];
    if (point === undefined) return;
    const query = event.query.trim().toUpperCase();
    if (point === 'message') {
      if (!query.startsWith('BEGIN; ')) return;
    } else {
      if ((point === 'single statement') === Boolean(event.queryRunner?.isTransactionActive)) return;
      // A BEGIN alone (the first statement comes next), not one whose message carries the first statement (PostgreSQL).
      if (/^(START TRANSACTION|BEGIN|SET TRANSACTION)\b/.test(query) && !query.includes('; ')) return;
      // A COMMIT alone, or one whose message carries the transaction's last writes (PostgreSQL).
      if ((point === 'commit') !== /(^|;\s*)COMMIT$/.test(query)) return;
    }
    this.armed.shift();
    const [{ id }] = await event.queryRunner!.query(this.kind === 'postgres' ? 'SELECT pg_backend_pid() AS id' : 'SELECT CONNECTION_ID() AS id');
    const backend = Number(id);
    // Another pooled connection kills this one: only this backend, and only on this test database.
    if (this.kind === 'postgres') {
      await this.dataSource.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND datname = current_database()', [backend]);
    } else {
      const [owned] = await this.dataSource.query('SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ? AND DB = DATABASE()', [backend]);
      if (Number(owned.n) !== 1) throw new Error(`connection ${backend} is not on this test database`);
      await this.dataSource.query(`KILL CONNECTION ${backend}`);
    }
    await waitFor(`backend ${backend} to be gone`, async () => {
      const [row] = await this.dataSource.query(
        this.kind === 'postgres' ? 'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE pid = $1' : 'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?',
        [backend],
      );
      return Number(row.n) === 0;
    });
    await sleep(20); // let the client read the server's goodbye, as it would in production
    this.killed.push(backend);
  }
}

describeEachDatabase('connection loss inside engine transactions', (kind) => {
  if (kind === 'sqlite') {
    it.skip('does not apply: SQLite has no connection to lose', () => undefined);
    return;
  }
  const ctx = {} as { app: TestApp; killer: ConnectionKiller; workflows: WorkflowService; signals: SignalService };
  let armOnStep: KillPoint[] = [];
  const onStep = () => {
    ctx.killer.arm(...armOnStep);
    armOnStep = [];
  };

  beforeAll(async () => {
    ctx.app = await createTestApp(kind, [ChoreWorkflow, DeliveryWorkflow]);
    ctx.killer = new ConnectionKiller(kind, ctx.app.dataSource);
    ctx.app.dataSource.subscribers.push(ctx.killer);
    ctx.workflows = ctx.app.moduleRef.get(WorkflowService);
    ctx.signals = ctx.app.moduleRef.get(SignalService);
    diagnostics.subscribe(GENEVA_DRIVE_CHANNELS.step, onStep);
  });
  afterAll(async () => {
    diagnostics.unsubscribe(GENEVA_DRIVE_CHANNELS.step, onStep);
    await ctx.app?.close();
  });
  beforeEach(async () => {
    await ctx.app.reset();
    hkJournal.length = 0;
    ctx.killer.killed.length = 0;
  });

  const hero = async (name: string) => {
    const heroes = ctx.app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };

  // On PostgreSQL a plain step's outcome first goes out as one guarded statement, no transaction:
  // killed there, it is recorded by the locked finalize, whose transaction is then killed too.
  const finalizeKills: Array<[string, KillPoint[]]> =
    kind === 'postgres'
      ? [
          ['its one statement, then its transaction at the first statement', ['single statement', 'first statement']],
          ['its one statement, then its transaction at COMMIT', ['single statement', 'commit']],
        ]
      : [
          ['its first statement', ['first statement']],
          ['its commit', ['commit']],
        ];
  it.each(finalizeKills)(
    'finalize whose connection is killed at %s is run again at once: the step completes, its body ran once, the next step is scheduled',
    async (_label, points) => {
      const wf = await ctx.workflows.start(ChoreWorkflow, await hero('Ada'));
      armOnStep = points;
      const executed = await ctx.app.gd.performNextStep(wf);

      expect(ctx.killer.killed).toHaveLength(points.length);
      expect(executed).toMatchObject({ stepName: 'sweep', state: 'completed', outcome: 'success' });
      expect(hkJournal).toEqual(['sweep Ada']);
      const history = await ctx.workflows.executionHistory(wf);
      expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
        ['sweep', 'completed', 'success'],
        ['mop', 'scheduled', null],
      ]);
      expect(await ctx.app.gd.reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'mop' });
      await ctx.app.gd.speedrunWorkflow(wf);
      expect(hkJournal).toEqual(['sweep Ada', 'mop Ada']);
    },
  );

  it('prepare whose connection is killed mid-transaction is run again: the body runs once', async () => {
    const wf = await ctx.workflows.start(ChoreWorkflow, await hero('Ada'));
    ctx.killer.arm('first statement');
    await ctx.app.gd.performNextStep(wf);
    expect(ctx.killer.killed).toHaveLength(1);
    expect(hkJournal).toEqual(['sweep Ada']);
    expect((await ctx.workflows.executionHistory(wf))[0]).toMatchObject({ state: 'completed', outcome: 'success' });
  });

  if (kind === 'mysql') {
    // MySQL has no single-statement start(): it is a transaction, killed before or at its COMMIT.
    it('start() without a manager whose connection is killed mid-transaction is run again: one workflow, one first execution', async () => {
      const ada = await hero('Ada');
      ctx.killer.arm('first statement');
      const wf = await ctx.workflows.start(ChoreWorkflow, ada);
      expect(ctx.killer.killed).toHaveLength(1);
      expect(await ctx.app.dataSource.getRepository(WorkflowRecord).count()).toBe(1);
      expect(await ctx.app.dataSource.getRepository(StepExecution).findBy({ workflowId: wf.id })).toEqual([expect.objectContaining({ stepName: 'sweep', state: 'scheduled' })]);
    });

    // The connection dies just before COMMIT: the driver refuses to send it, so nothing committed for
    // certain and the engine runs the transaction again. (A COMMIT whose answer is lost after it was
    // sent is not run again: see interleaving-defects.e2e-spec.ts, CommitOutcomeUnknownError.)
    it('start() whose connection is killed just before COMMIT is run again: one workflow, one first execution', async () => {
      const ada = await hero('Ada');
      ctx.killer.arm('commit');
      const wf = await ctx.workflows.start(ChoreWorkflow, ada);
      expect(ctx.killer.killed).toHaveLength(1);
      expect(await ctx.app.dataSource.getRepository(WorkflowRecord).count()).toBe(1);
      expect(await ctx.app.dataSource.getRepository(StepExecution).findBy({ workflowId: wf.id })).toEqual([expect.objectContaining({ stepName: 'sweep', state: 'scheduled' })]);
    });
  } else {
    // Killed before the statement was sent, the outcome is known: the caller gets the connection
    // error itself (a lost answer would be CommitOutcomeUnknownError: interleaving-defects.e2e-spec.ts).
    it('start() without a manager is one statement on PostgreSQL: its connection killed before it is sent, the caller gets the connection error', async () => {
      const ada = await hero('Ada');
      ctx.killer.arm('single statement');
      const error = await ctx.workflows.start(ChoreWorkflow, ada).then(() => undefined, (thrown: unknown) => thrown);
      expect(ctx.killer.killed).toHaveLength(1);
      expect(error).not.toBeInstanceOf(CommitOutcomeUnknownError);
      expect(isConnectionError(error)).toBe(true);
      // Here the statement never reached the server: nothing was written, and the caller may simply try again.
      expect(await ctx.app.dataSource.getRepository(WorkflowRecord).count()).toBe(0);
      await expect(ctx.workflows.start(ChoreWorkflow, ada)).resolves.toMatchObject({ state: 'ready' });
      expect(await ctx.app.dataSource.getRepository(StepExecution).count()).toBe(1);
    });
  }

  it('a transaction whose statement is running when the server kills its connection is run again on a new connection', async () => {
    const runner = new TransactionRunner(ctx.app.dataSource);
    const seen: unknown[] = [];
    let tries = 0;
    const result = await runner.run(async (manager) => {
      tries++;
      if (tries === 1) {
        const [{ id }] = await manager.query(kind === 'postgres' ? 'SELECT pg_backend_pid() AS id' : 'SELECT CONNECTION_ID() AS id');
        const kill = sleep(300).then(() =>
          kind === 'postgres'
            ? ctx.app.dataSource.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND datname = current_database()', [Number(id)])
            : ctx.app.dataSource.query(`KILL CONNECTION ${Number(id)}`),
        );
        try {
          await manager.query(kind === 'postgres' ? 'SELECT pg_sleep(10)' : 'SELECT SLEEP(10)');
        } catch (error) {
          seen.push(error);
          throw error;
        } finally {
          await kill;
        }
      }
      return 'committed';
    });
    expect(result).toBe('committed');
    expect(tries).toBe(2);
    expect(seen).toHaveLength(1);
    expect(isConnectionError(seen[0])).toBe(true);
  });

  // PostgreSQL sends it as one message: killed before it goes, signal() cannot tell that nothing
  // was sent, looks for its row under the lock, finds none and delivers again.
  it('signal() without a manager whose connection is killed mid-transaction (PostgreSQL: before its one message) is run again: the signal is recorded once and wakes the step', async () => {
    const wf = await ctx.workflows.start(DeliveryWorkflow, await hero('Ada'));
    await ctx.app.gd.performNextStep(wf);
    ctx.killer.arm(kind === 'postgres' ? 'message' : 'first statement');
    const signal = await ctx.signals.signal(wf, 'delivered', { payload: { parcel: 'P-1' }, idempotencyKey: 'evt-1' });
    expect(ctx.killer.killed).toHaveLength(1);
    expect(signal).toMatchObject({ duplicateDelivery: false, state: 'claimed' });
    expect(await ctx.app.dataSource.getRepository(Signal).countBy({ workflowId: wf.id })).toBe(1);
    await ctx.app.gd.speedrunWorkflow(wf);
    expect(hkJournal).toEqual(['delivered P-1', 'archived']);
  });
});
