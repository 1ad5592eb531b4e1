/**
 * PostgreSQL and MySQL/MariaDB run the executor's and signal()'s statements as prepared statements
 * on the transaction's own connection (`preparedStatements`, on by default), logged through
 * TypeORM's logger like its own queries; `preparedStatements: false` prepares nothing. The pool has
 * one connection, so the spec's reads of the session's prepared statements (PostgreSQL's
 * `pg_prepared_statements`, MySQL's `Com_stmt_execute` counter) see the engine's, and a statement
 * prepared before a migration is the one that runs after it.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { ExecutorService, GenevaDriveModule, GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type GenevaDriveModuleOptions, type StepJob, type WorkflowRecord } from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { DataSource, type DataSourceOptions, type Logger as TypeOrmLogger } from 'typeorm';
import { PartialGenevaDriveIndexes1730000000010 } from '../../libs/geneva-drive/src/migrations/index.js';
import { engineLogger } from '../src/test-app.js';
import { dataSourceOptions, enabledDatabases, prepareDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow({ hero: () => TestHero })
class PreparedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async pay() {}

  @Step({ waitFor: 'paid' })
  async ship() {}
}

/** A plain step (its phases run unlocked), a guarded one (phase 1 in a transaction), a parked one. */
@Workflow({ hero: () => TestHero })
class MigratedWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async plain() {}

  @Step({ skipIf: () => false })
  async guarded() {}

  @Step({ waitFor: 'paid' })
  async ship() {}

  @Step()
  async close() {}
}

/** Every statement TypeORM's logger is told of. */
class StatementLog implements TypeOrmLogger {
  readonly statements: string[] = [];
  logQuery(query: string): void {
    this.statements.push(query);
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

for (const kind of ['postgres', 'mysql'] as const) {
  const suite = enabledDatabases().includes(kind) ? describe : describe.skip;
  suite(`prepared statements [${kind}]`, () => preparedStatementsSuite(kind));
}

function preparedStatementsSuite(kind: 'postgres' | 'mysql'): void {
  let moduleRef: TestingModule | undefined;
  afterEach(async () => {
    await moduleRef?.close();
    moduleRef = undefined;
  });

  /** Boots on one pooled connection (or `connections`). */
  async function boot(options: GenevaDriveModuleOptions, connections = 1): Promise<{ dataSource: DataSource; log: StatementLog; gd: GenevaDriveTesting }> {
    await prepareDatabase(kind);
    const log = new StatementLog();
    moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptions(kind),
          migrations: [],
          migrationsRun: false,
          logger: log,
          extra: kind === 'postgres' ? { max: connections } : { connectionLimit: connections },
        } as DataSourceOptions),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger(), ...options }),
      ],
      providers: [PreparedWorkflow, MigratedWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    await moduleRef.init();
    return { dataSource: moduleRef.get<DataSource>(getDataSourceToken()), log, gd: GenevaDriveTesting.create(moduleRef) };
  }

  /** Boots on one pooled connection and runs a workflow to finished (signal, then its parked step). */
  async function runOne(options: GenevaDriveModuleOptions): Promise<{ dataSource: DataSource; log: StatementLog }> {
    const { dataSource, log, gd } = await boot(options);
    const hero = await dataSource.getRepository(TestHero).save({ name: 'Ada' });
    const workflow = await moduleRef!.get(WorkflowService).start(PreparedWorkflow, hero);
    await gd.performNextStep(workflow); // pay
    await gd.performNextStep(workflow); // ship parks
    await gd.assertWaitingForSignal(workflow, 'paid');
    await moduleRef!.get(SignalService).signal(workflow, 'paid');
    expect((await gd.speedrunWorkflow(workflow)).state).toBe('finished');
    return { dataSource, log };
  }

  /** PostgreSQL: the session's named statements. */
  const namedStatements = (dataSource: DataSource): Promise<Array<{ name: string; statement: string }>> =>
    dataSource.query(`SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'geneva_drive_%' ORDER BY name`);
  /** MySQL: how many prepared statements the session executed. */
  const executedPrepared = async (dataSource: DataSource): Promise<number> =>
    Number((await dataSource.query(`SHOW SESSION STATUS LIKE 'Com_stmt_execute'`))[0].Value);

  it('by default, the step locks, writes and signal() run as prepared statements on the transaction’s connection, each logged through TypeORM', async () => {
    const { dataSource, log } = await runOne({});

    if (kind === 'postgres') {
      const prepared = await namedStatements(dataSource);
      expect(prepared.some(({ statement }) => statement.includes(' FOR UPDATE OF w, e'))).toBe(true);
      // signal() is one message: its lock read and its statement prepared by PREPAREs of the message, and logged inside the message.
      // (The session records a PREPARE with the whole message it came in: each statement is the text after its own PREPARE.)
      const textOf = ({ name, statement }: { name: string; statement: string }) => new RegExp(`PREPARE ${name} AS (.*?); EXECUTE ${name}\\(`, 's').exec(statement)?.[1];
      expect(prepared.some((one) => /^WITH .*INSERT INTO "geneva_drive_signals"/s.test(textOf(one) ?? ''))).toBe(true);
      expect(prepared.some((one) => textOf(one) === 'SELECT 1 FROM "geneva_drive_workflows" WHERE "id" = $1 FOR UPDATE')).toBe(true);
      expect(log.statements.some((statement) => /^BEGIN; SELECT 1 FROM "geneva_drive_workflows" WHERE "id" = \$1 FOR UPDATE; .*INSERT INTO "geneva_drive_signals".*; COMMIT$/s.test(statement))).toBe(true);
      // One name per statement text, and every prepared statement was logged as it ran.
      expect(new Set(prepared.map(({ name }) => name)).size).toBe(new Set(prepared.map((one) => textOf(one) ?? one.statement)).size);
      for (const one of prepared) {
        const sent = textOf(one);
        if (sent !== undefined) expect(log.statements.some((logged) => logged.includes(sent))).toBe(true);
        else expect(log.statements).toContain(one.statement);
      }
    } else {
      // The lock read, the signal's insert, the writes of every phase: well over ten.
      expect(await executedPrepared(dataSource)).toBeGreaterThan(10);
    }
    expect(log.statements.some((statement) => /geneva_drive_workflows.*FOR UPDATE/s.test(statement))).toBe(true);
  });

  it('preparedStatements: false prepares nothing, and the same statements run', async () => {
    const { dataSource, log } = await runOne({ preparedStatements: false });

    if (kind === 'postgres') expect(await namedStatements(dataSource)).toEqual([]);
    else expect(await executedPrepared(dataSource)).toBe(0);
    expect(log.statements.some((statement) => /geneva_drive_workflows.*FOR UPDATE/s.test(statement))).toBe(true);
  });

  /**
   * A migration changes the type of a column the engine's statements read, on the hero's table and
   * on an engine table (from its own connection, as a deployment would), and back again.
   */
  async function migrate(type: 'wider' | 'original'): Promise<void> {
    const wider = type === 'wider';
    const migration = await new DataSource({ ...dataSourceOptions(kind), migrations: [] } as DataSourceOptions).initialize();
    try {
      if (kind === 'postgres') {
        await migration.query(`ALTER TABLE test_heroes ALTER COLUMN name TYPE varchar(${wider ? 300 : 255})`);
        await migration.query(`ALTER TABLE geneva_drive_workflows ALTER COLUMN current_step_name TYPE varchar(${wider ? 300 : 255})`);
      } else {
        await migration.query(`ALTER TABLE test_heroes MODIFY name varchar(${wider ? 300 : 255}) NOT NULL DEFAULT ''`);
        await migration.query(`ALTER TABLE geneva_drive_workflows MODIFY current_step_name VARBINARY(${wider ? 1200 : 1020}) NULL`);
      }
    } finally {
      await migration.destroy();
    }
  }

  /** Boots with `MigratedWorkflow` and the helpers that run its paths. */
  async function migratedApp(connections = 1) {
    const { dataSource, log, gd } = await boot({}, connections);
    const workflows = moduleRef!.get(WorkflowService);
    const signals = moduleRef!.get(SignalService);
    const executor = moduleRef!.get(ExecutorService);
    const heroes = dataSource.getRepository(TestHero);
    const start = async () => workflows.start(MigratedWorkflow, await heroes.save({ name: 'Ada' }));
    const jobOf = async (workflow: WorkflowRecord): Promise<StepJob> => {
      const { id } = (await workflows.currentExecution(workflow))!;
      return gd.enqueuedJobs.findLast((job) => job.executionId === id)!;
    };
    /** Runs the job as a queue worker would, with its hints: a plain step's phases then run unlocked. Returns the statements it ran. */
    const runJob = async (workflow: WorkflowRecord, job: StepJob): Promise<string[]> => {
      const from = log.statements.length;
      await executor.execute(job.executionId, { jobId: job.jobId ?? job.executionId, hints: job.hints });
      const state = job.hints?.stepName === 'ship' ? 'waiting' : 'completed';
      expect(await workflows.executionHistory(workflow)).toContainEqual(expect.objectContaining({ id: job.executionId, state }));
      return log.statements.slice(from);
    };
    const runStep = async (workflow: WorkflowRecord) => runJob(workflow, await jobOf(workflow));
    const parked = async () => {
      const workflow = await start();
      for (let step = 0; step < 3; step++) await runStep(workflow); // plain, guarded, ship parks
      await gd.assertWaitingForSignal(workflow, 'paid');
      return workflow;
    };
    /** A whole workflow, which prepares every path's statements on the connection it gets. */
    const runWhole = async () => {
      const workflow = await parked();
      await signals.signal(workflow, 'paid');
      expect((await gd.speedrunWorkflow(workflow)).state).toBe('finished');
    };
    return { dataSource, gd, signals, heroes, start, jobOf, runJob, runStep, parked, runWhole };
  }

  /**
   * Every way a statement runs, each on a connection whose statements `disturb` made stale after a
   * workflow prepared them all: a plain step's phases (unlocked on PostgreSQL, and still so after), a
   * guarded step's locked phase 1, signal() in a transaction of its own and in a caller's
   * transaction, which must stay usable and commit.
   */
  async function runEachPathAfter(disturb: (round: number) => Promise<void>): Promise<void> {
    const { dataSource, gd, signals, heroes, start, jobOf, runJob, runStep, parked, runWhole } = await migratedApp();
    let round = 0;
    const afterDisturbance = async <T>(path: () => Promise<T>): Promise<T> => {
      await runWhole();
      await disturb(++round);
      return path();
    };
    const [plain, guarded, signaledAlone, signaledInCallers] = [await start(), await start(), await parked(), await parked()];
    await runStep(guarded); // `plain`: `guarded` is next
    const [plainJob, guardedJob] = [await jobOf(plain), await jobOf(guarded)];

    const plainStatements = await afterDisturbance(() => runJob(plain, plainJob));
    if (kind === 'postgres') expect(plainStatements.filter((sql) => /^(START TRANSACTION|BEGIN)/.test(sql))).toEqual([]); // no fallback to the locked phases
    await afterDisturbance(() => runJob(guarded, guardedJob));
    await afterDisturbance(() => signals.signal(signaledAlone, 'paid'));
    const callersHero = await heroes.save({ name: 'before' });
    await afterDisturbance(() =>
      dataSource.transaction(async (manager) => {
        await signals.signal(signaledInCallers, 'paid', { manager });
        await manager.getRepository(TestHero).update(callersHero.id, { name: 'after' }); // fails in an aborted transaction
      }),
    );
    expect((await heroes.findOneByOrFail({ id: callersHero.id })).name).toBe('after');

    await runStep(plain); // guarded
    for (const workflow of [plain, guarded]) {
      await runStep(workflow); // ship parks
      await signals.signal(workflow, 'paid');
    }
    for (const workflow of [plain, guarded, signaledAlone, signaledInCallers]) expect((await gd.speedrunWorkflow(workflow)).state).toBe('finished');
  }

  it('after a migration changes the type of a column the statements read (hero and engine table), every path runs on: no workflow pauses', async () => {
    // Alternately wider and back, so each path meets statements prepared before a change.
    await runEachPathAfter((round) => migrate(round % 2 === 1 ? 'wider' : 'original'));
  });

  if (kind === 'postgres') {
    it('once a connection meets a stale statement, every other connection of the pool prepares its statements afresh before its next one', async () => {
      const { dataSource, start, jobOf, runJob, runStep, runWhole } = await migratedApp(2);
      /** Holds a connection of the pool (of two): the engine gets the other. */
      const hold = async () => {
        const runner = dataSource.createQueryRunner();
        await runner.connect();
        return runner;
      };
      const rollbacksOf = (statements: string[]) => statements.filter((sql) => sql === 'ROLLBACK').length;
      const [first, second] = [await start(), await start()];
      for (const workflow of [first, second]) await runStep(workflow); // `plain`: `guarded` is next
      const [firstJob, secondJob] = [await jobOf(first), await jobOf(second)];
      const a = await hold();
      await runWhole(); // every statement prepared on connection B
      const b = await hold();
      await a.release();
      await runWhole(); // and on A
      await migrate('wider');

      // On A (B is held): the locked phase meets a stale statement once, and its transaction runs again.
      expect(rollbacksOf(await runJob(first, firstJob))).toBe(1);
      const again = await hold(); // A
      await b.release();
      // On B: its statements were prepared afresh before its first one.
      expect(rollbacksOf(await runJob(second, secondJob))).toBe(0);
      await again.release();
    });

    it('while the partial-indexes migration goes down and up, every path runs on: the statements prepared before it are planned again', async () => {
      await runEachPathAfter(async (round) => {
        const migration = await new DataSource({ ...dataSourceOptions(kind), migrations: [] } as DataSourceOptions).initialize();
        const runner = migration.createQueryRunner();
        try {
          await new PartialGenevaDriveIndexes1730000000010()[round % 2 === 1 ? 'down' : 'up'](runner);
        } finally {
          await runner.release();
          await migration.destroy();
        }
      });
    });

    it('after the session’s prepared statements are dropped (DISCARD ALL, as a pooler does), every path runs on', async () => {
      await runEachPathAfter(async () => {
        await moduleRef!.get<DataSource>(getDataSourceToken()).query('DISCARD ALL'); // on the pool's one connection
      });
    });
  }
}
