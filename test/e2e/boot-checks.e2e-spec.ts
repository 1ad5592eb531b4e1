/**
 * Misconfiguration stops the boot with an error that says what to do, on every database: no
 * DataSource, geneva-drive's entities or tables or columns missing, unknown module options (in
 * `forRoot` and in what a `forRootAsync` factory returns). And the configurations that must work:
 * `autoLoadEntities` without listing the entities, and a `dataSource` returned by the async factory.
 */
import { afterEach, expect, it } from '@jest/globals';
import type { DynamicModule } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import {
  DataSourceNotFoundError,
  EntitiesNotRegisteredError,
  GenevaDriveModule,
  GenevaWorkflow,
  InvalidOptionError,
  NotInitialisedError,
  SchemaNotMigratedError,
  SignalService,
  Step,
  UnknownWorkflowError,
  Workflow,
  WorkflowRecord,
  WorkflowService,
  type GenevaDriveModuleOptions,
} from 'geneva-drive';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { engineLogger } from '../src/test-app.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase } from '../utils/databases.js';
import { FIXTURE_ENTITIES, TestHero } from '../utils/fixtures.js';

@Workflow({ hero: () => TestHero })
class BootWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

const engine = (options: GenevaDriveModuleOptions = {}) =>
  GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger(), ...options });

describeEachDatabase('boot checks', (kind) => {
  const opened: TestingModule[] = [];
  afterEach(async () => {
    while (opened.length) await opened.pop()!.close();
  });

  /**
   * Compiles and initialises an application of these modules (closed after the test, even when init
   * fails). Option errors fail the compilation, before there is an application to close: those tests
   * leave TypeORM out, so that no connection is left open.
   */
  async function boot(imports: DynamicModule[]): Promise<TestingModule> {
    const moduleRef = await Test.createTestingModule({ imports, providers: [BootWorkflow] }).setLogger(engineLogger()).compile();
    opened.push(moduleRef);
    await moduleRef.init();
    return moduleRef;
  }

  const typeorm = (extra: Partial<DataSourceOptions> & { autoLoadEntities?: boolean; name?: string } = {}) =>
    TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false, ...extra } as DataSourceOptions);

  /** Prepares this worker's database, then runs the statements on it. */
  async function alter(...statements: Array<(escape: (name: string) => string) => string>): Promise<void> {
    await prepareDatabase(kind);
    const dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
    try {
      for (const statement of statements) await dataSource.query(statement((name) => dataSource.driver.escape(name)));
    } finally {
      await dataSource.destroy();
    }
  }

  /** Starts a workflow through the booted application and runs it to the end. */
  async function runOne(moduleRef: TestingModule, dataSourceName?: string): Promise<WorkflowRecord> {
    const heroes = moduleRef.get<DataSource>(getDataSourceToken(dataSourceName)).getRepository(TestHero);
    const wf = await moduleRef.get(WorkflowService).start(BootWorkflow, await heroes.save(heroes.create({ name: 'boot' })));
    return GenevaDriveTesting.create(moduleRef).speedrunWorkflow(wf);
  }

  it('start() before the application is initialised: NotInitialisedError saying so, not that the class is unknown', async () => {
    await prepareDatabase(kind);
    const moduleRef = await Test.createTestingModule({ imports: [typeorm(), engine()], providers: [BootWorkflow] })
      .setLogger(engineLogger())
      .compile();
    opened.push(moduleRef);
    const workflows = moduleRef.get(WorkflowService);
    const notYet = 'geneva-drive is not initialised yet: call app.init() (or moduleRef.init()) before using its services';
    const attempt = workflows.start(BootWorkflow, { id: 1 });
    await expect(attempt).rejects.toThrow(notYet);
    await expect(attempt).rejects.toBeInstanceOf(NotInitialisedError);
    await expect(workflows.find('1')).rejects.toThrow(notYet);
    await expect(moduleRef.get(SignalService).signal('1', 'go')).rejects.toThrow(notYet);

    await moduleRef.init();
    expect((await runOne(moduleRef)).state).toBe('finished');
    class NotAProvider extends GenevaWorkflow<TestHero> {}
    await expect(workflows.start(NotAProvider, { id: 1 })).rejects.toThrow(UnknownWorkflowError);
  });

  it('no TypeORM DataSource: DataSourceNotFoundError telling to import TypeOrmModule.forRoot', async () => {
    const attempt = boot([engine()]);
    await expect(attempt).rejects.toThrow(DataSourceNotFoundError);
    await expect(attempt).rejects.toThrow(/^No TypeORM DataSource "default" for geneva-drive: import TypeOrmModule\.forRoot\(\.\.\.\) in the application/);
  });

  it('a dataSource name the application has no DataSource of: DataSourceNotFoundError naming it', async () => {
    await prepareDatabase(kind);
    await expect(boot([typeorm(), engine({ dataSource: 'workflows' })])).rejects.toThrow(
      /^No TypeORM DataSource "workflows" for geneva-drive: import TypeOrmModule\.forRoot\(\.\.\.\) with name: 'workflows'/,
    );
  });

  it("geneva-drive's entities not in the DataSource: EntitiesNotRegisteredError naming GENEVA_DRIVE_ENTITIES", async () => {
    await prepareDatabase(kind);
    const attempt = boot([typeorm({ entities: FIXTURE_ENTITIES }), engine()]);
    await expect(attempt).rejects.toThrow(EntitiesNotRegisteredError);
    await expect(attempt).rejects.toThrow(
      `The TypeORM DataSource "default" does not know geneva-drive's entities (WorkflowRecord, StepExecution, Signal): ` +
        'add GENEVA_DRIVE_ENTITIES to its entities, or set autoLoadEntities: true in TypeOrmModule.forRoot',
    );
  });

  it('autoLoadEntities: true registers the entities through the module, without listing them', async () => {
    await prepareDatabase(kind);
    const moduleRef = await boot([typeorm({ entities: FIXTURE_ENTITIES, autoLoadEntities: true }), engine()]);
    expect((await runOne(moduleRef)).state).toBe('finished');
  });

  it('tables missing (migrations never run): SchemaNotMigratedError naming GENEVA_DRIVE_MIGRATIONS', async () => {
    await alter(
      (q) => `DROP TABLE ${q('geneva_drive_signals')}`,
      (q) => `DROP TABLE ${q('geneva_drive_step_executions')}`,
      (q) => `DROP TABLE ${q('geneva_drive_workflows')}`,
    );
    const attempt = boot([typeorm(), engine()]);
    await expect(attempt).rejects.toThrow(SchemaNotMigratedError);
    await expect(attempt).rejects.toThrow(
      "geneva-drive's schema lacks geneva_drive_workflows, geneva_drive_step_executions: run the CreateGenevaDriveTables1730000000000 migration. " +
        "List GENEVA_DRIVE_MIGRATIONS (or genevaDriveMigrations({ primaryKey: 'uuid' })) in the DataSource's migrations and run them",
    );
  });

  it('a column missing: SchemaNotMigratedError naming the column and the migration that creates it', async () => {
    await alter((q) => `ALTER TABLE ${q('geneva_drive_step_executions')} DROP COLUMN ${q('error_backtrace')}`);
    await expect(boot([typeorm(), engine()])).rejects.toThrow(
      /^geneva-drive's schema lacks geneva_drive_step_executions\.error_backtrace: run the CreateGenevaDriveTables1730000000000 migration/,
    );
  });

  it('the signals migration alone missing still boots (only waitFor steps need it)', async () => {
    await prepareDatabase(kind, { withoutSignals: true });
    const moduleRef = await boot([typeorm(), engine()]);
    expect((await runOne(moduleRef)).state).toBe('finished');
  });

  it('an unknown module option in forRoot: InvalidOptionError naming it', async () => {
    const attempt = boot([engine({ housekeepingEvery: '1m' } as GenevaDriveModuleOptions)]);
    await expect(attempt).rejects.toThrow(InvalidOptionError);
    await expect(attempt).rejects.toThrow(/^GenevaDriveModule: unknown option "housekeepingEvery" \(the options are queue, dataSource, /);
    await expect(boot([engine({ queue: { adapter: 'bull', url: 'redis://x' } as never })])).rejects.toThrow(
      'GenevaDriveModule: unknown option "queue.url" (the options are queue.adapter, queue.redis, queue.name, queue.prefix, queue.concurrency, queue.configKey, queue.limiter, queue.settings, queue.defaultJobOptions, queue.createClient)',
    );
    await expect(boot([engine({ queue: { adapter: 'bullmq', settings: {} } as never })])).rejects.toThrow(
      'GenevaDriveModule: unknown option "queue.settings" (the options are queue.adapter, queue.redis, queue.name, queue.prefix, queue.concurrency, queue.configKey, queue.defaultJobOptions, queue.worker)',
    );
  });

  it('a preparedStatements that is not a boolean: InvalidOptionError naming it', async () => {
    const attempt = boot([engine({ preparedStatements: 'no' } as never)]);
    await expect(attempt).rejects.toThrow(InvalidOptionError);
    await expect(attempt).rejects.toThrow('preparedStatements must be true or false');
  });

  it('an unknown option in what the forRootAsync factory returns: InvalidOptionError naming it', async () => {
    const async = (options: object) => GenevaDriveModule.forRootAsync({ useFactory: () => ({ queue: { adapter: 'manual' as const }, ...options }) });
    const attempt = boot([async({ maxSignalPayloadBytes: 10 })]);
    await expect(attempt).rejects.toThrow(InvalidOptionError);
    await expect(attempt).rejects.toThrow(/^GenevaDriveModule: unknown option "maxSignalPayloadBytes"/);
    await expect(boot([async({ isGlobal: false })])).rejects.toThrow(
      /unknown option "isGlobal": isGlobal goes beside useFactory in forRootAsync, not in the options it returns/,
    );
  });

  it('a dataSource returned by the forRootAsync factory is the one the rows go to', async () => {
    await prepareDatabase(kind);
    const moduleRef = await boot([
      // The default DataSource has no geneva-drive tables or entities: nothing may land there.
      TypeOrmModule.forRoot({ type: 'better-sqlite3', database: ':memory:', entities: FIXTURE_ENTITIES, synchronize: true }),
      typeorm({ name: 'workflows' }),
      GenevaDriveModule.forRootAsync({ useFactory: async () => ({ dataSource: 'workflows', queue: { adapter: 'manual' as const }, housekeeping: false as const }) }),
    ]);
    const finished = await runOne(moduleRef, 'workflows');
    expect(finished.state).toBe('finished');
    const workflows = moduleRef.get<DataSource>(getDataSourceToken('workflows')).getRepository(WorkflowRecord);
    expect(await workflows.findOneByOrFail({ id: finished.id })).toMatchObject({ state: 'finished', heroType: 'TestHero' });
  });

  it('a dataSource both beside useFactory and, different, in what it returns: InvalidOptionError', async () => {
    await expect(
      boot([
        GenevaDriveModule.forRootAsync({ dataSource: 'default', useFactory: () => ({ dataSource: 'workflows', queue: { adapter: 'manual' as const } }) }),
      ]),
    ).rejects.toThrow('GenevaDriveModule: dataSource is "default" beside useFactory but "workflows" in what it returns: give it once');
  });
});
