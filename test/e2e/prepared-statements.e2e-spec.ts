/**
 * PostgreSQL and MySQL/MariaDB run the executor's and signal()'s statements as prepared statements
 * on the transaction's own connection (`preparedStatements`, on by default), logged through
 * TypeORM's logger like its own queries; `preparedStatements: false` prepares nothing. The pool has
 * one connection, so the spec's reads of the session's prepared statements (PostgreSQL's
 * `pg_prepared_statements`, MySQL's `Com_stmt_execute` counter) see the engine's.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import { GenevaDriveModule, GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type GenevaDriveModuleOptions } from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import type { DataSource, DataSourceOptions, Logger as TypeOrmLogger } from 'typeorm';
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

  /** Boots on one pooled connection and runs a workflow to finished (signal, then its parked step). */
  async function runOne(options: GenevaDriveModuleOptions): Promise<{ dataSource: DataSource; log: StatementLog }> {
    await prepareDatabase(kind);
    const log = new StatementLog();
    moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot({
          ...dataSourceOptions(kind),
          migrations: [],
          migrationsRun: false,
          logger: log,
          extra: kind === 'postgres' ? { max: 1 } : { connectionLimit: 1 },
        } as DataSourceOptions),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger(), ...options }),
      ],
      providers: [PreparedWorkflow],
    })
      .setLogger(engineLogger())
      .compile();
    await moduleRef.init();
    const dataSource = moduleRef.get<DataSource>(getDataSourceToken());
    const hero = await dataSource.getRepository(TestHero).save({ name: 'Ada' });
    const gd = GenevaDriveTesting.create(moduleRef);
    const workflow = await moduleRef.get(WorkflowService).start(PreparedWorkflow, hero);
    await gd.performNextStep(workflow); // pay
    await gd.performNextStep(workflow); // ship parks
    await gd.assertWaitingForSignal(workflow, 'paid');
    await moduleRef.get(SignalService).signal(workflow, 'paid');
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
      expect(prepared.some(({ statement }) => statement.includes('ON CONFLICT DO NOTHING'))).toBe(true);
      // One name per statement text, and every prepared statement was logged as it ran.
      expect(new Set(prepared.map(({ name }) => name)).size).toBe(new Set(prepared.map(({ statement }) => statement)).size);
      for (const { statement } of prepared) expect(log.statements).toContain(statement);
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
}
