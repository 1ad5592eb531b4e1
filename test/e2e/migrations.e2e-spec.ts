/**
 * The migrations against each real database: the schema they build matches the entities, and the
 * uniqueness guarantees, cascades and the up/down cycle behave the same on PostgreSQL, MySQL/MariaDB
 * and SQLite.
 */
import { DataSource, QueryFailedError, type EntityTarget, type FindOptionsWhere, type MigrationInterface } from 'typeorm';
import { Signal, StepExecution, WorkflowRecord } from '../../libs/geneva-drive/src/entities/index.js';
import { identifierText } from '../../libs/geneva-drive/src/entities/column-transformers.js';
import { FlowControlNotMigratedError } from '../../libs/geneva-drive/src/errors/flow-control-not-migrated.error.js';
import {
  AddGenevaDriveFlowControl1730000000007,
  AddGenevaDriveFlowKeyIndex1730000000008,
  AddGenevaDriveRateLimits1730000000009,
  PartialGenevaDriveIndexes1730000000010,
  AddGenevaDriveListIndexes1730000000003,
  CreateGenevaDriveTables1730000000000,
  ExactGenevaDriveIdentifiers1730000000002,
  genevaDriveMigrations,
} from '../../libs/geneva-drive/src/migrations/index.js';
import { flowKeyGauges } from '../../libs/geneva-drive/src/persistence/gauges.js';
import { SchemaCapabilities } from '../../libs/geneva-drive/src/persistence/schema-capabilities.js';
import { waitingKeyRows } from '../../libs/geneva-drive/src/persistence/waiting-keys.js';
import type { StepExecutionState } from '../../libs/geneva-drive/src/state/index.js';
import { CAFE_NFC, spellingsOf } from '../src/identifier-workflows.js';
import {
  dataSourceOptions,
  describeEachDatabase,
  prepareDatabase,
  truncateAll,
  type DatabaseKind,
} from '../utils/databases.js';
import { CreateTestFixtures1600000000000, TestHero, UuidHero } from '../utils/fixtures.js';
import { statementsDuring } from '../utils/logged-statements.js';
import { releasedMigrations } from '../utils/released-migrations/index.js';

const GENEVA_TABLES = ['geneva_drive_workflows', 'geneva_drive_step_executions', 'geneva_drive_signals'];
/** The index AddGenevaDriveFlowKeyIndex1730000000008 adds. */
const FLOW_KEY_INDEX = 'geneva_drive_step_executions_state_flow_key';
/** The indexes AddGenevaDriveListIndexes1730000000003 adds. */
const LIST_INDEXES = ['geneva_drive_workflows_type_state', 'geneva_drive_workflows_hero_id'];
/** PostgreSQL: the indexes PartialGenevaDriveIndexes1730000000010 keeps to the rows where their column is set, by that column. */
const PARTIAL_INDEXES: Record<string, string> = {
  geneva_drive_step_executions_finished_at: 'finished_at',
  geneva_drive_step_executions_continues_from: 'continues_from_id',
  geneva_drive_step_executions_signal_id: 'signal_id',
  geneva_drive_step_executions_state_flow_key: 'flow_key',
  geneva_drive_step_executions_state_timeout: 'timeout_at',
  geneva_drive_workflows_parent: 'parent_id',
  geneva_drive_workflows_child_key: 'parent_id',
};
/** PostgreSQL: the indexes it drops, which others serve. */
const COVERED_INDEXES = ['geneva_drive_step_executions_workflow_state', 'geneva_drive_signals_workflow_state'];

/** Identity strings of the rows the exactness checks start from (each also spelled differently). */
const BASE = { type: 'Bílling', heroType: 'Hérö', heroId: 'Hérö-1', stepName: 'shíp', name: CAFE_NFC, key: 'Évt_1NqXaB' };

/** The spellings of `value` that differ from it only by case, an accent, a trailing space or normalisation. */
const variantsOf = (value: string) => spellingsOf(value).slice(1).map(([, spelling]) => spelling);
/** `value` and its variants. */
const allSpellingsOf = (value: string) => spellingsOf(value).map(([, spelling]) => spelling);

/** The driver's code for a primary key violation (SQLite tells it from a unique index's). */
const PRIMARY_KEY_VIOLATION: Record<DatabaseKind, string> = {
  postgres: '23505',
  mysql: 'ER_DUP_ENTRY',
  sqlite: 'SQLITE_CONSTRAINT_PRIMARYKEY',
};

/** The driver's code for a unique violation. */
const UNIQUE_VIOLATION: Record<DatabaseKind, string> = {
  postgres: '23505',
  mysql: 'ER_DUP_ENTRY',
  sqlite: 'SQLITE_CONSTRAINT_UNIQUE',
};

describeEachDatabase('geneva-drive migrations', (kind) => {
  let dataSource: DataSource;

  async function open(): Promise<void> {
    dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
  }

  /**
   * Asserts that `attempt` fails with a unique violation; on PostgreSQL and MySQL also that `index`
   * is the one that fired (SQLite names the columns, not the index).
   */
  async function expectUniqueViolation(attempt: Promise<unknown>, index: string): Promise<void> {
    const error = await attempt.then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(error).toBeInstanceOf(QueryFailedError);
    const driverError = (error as QueryFailedError).driverError as { code?: string; message: string };
    expect(driverError.code).toBe(UNIQUE_VIOLATION[kind]);
    if (kind !== 'sqlite') expect(driverError.message).toContain(index);
  }

  async function hasTable(name: string): Promise<boolean> {
    const queryRunner = dataSource.createQueryRunner();
    try {
      return await queryRunner.hasTable(name);
    } finally {
      await queryRunner.release();
    }
  }

  async function hasColumn(table: string, column: string): Promise<boolean> {
    const queryRunner = dataSource.createQueryRunner();
    try {
      return await queryRunner.hasColumn(table, column);
    } finally {
      await queryRunner.release();
    }
  }

  async function insertWorkflow(values: Partial<WorkflowRecord> = {}): Promise<string> {
    const at = new Date();
    const { identifiers } = await dataSource.getRepository(WorkflowRecord).insert({
      type: 'OrderWorkflow',
      heroType: 'TestHero',
      heroId: '1',
      // The entities carry no column defaults (the engine always writes every column).
      state: 'ready',
      allowMultiple: false,
      createdAt: at,
      updatedAt: at,
      ...values,
    });
    return String(identifiers[0].id);
  }

  async function setWorkflowState(id: string, state: WorkflowRecord['state']): Promise<void> {
    await dataSource.getRepository(WorkflowRecord).update(id, { state });
  }

  async function insertExecution(workflowId: string, state: StepExecutionState, stepName = 'charge'): Promise<string> {
    const at = new Date();
    const { identifiers } = await dataSource.getRepository(StepExecution).insert({
      workflowId,
      stepName,
      state,
      scheduledFor: at,
      createdAt: at,
      updatedAt: at,
    });
    return String(identifiers[0].id);
  }

  async function insertSignal(workflowId: string, name: string, idempotencyKey: string | null): Promise<string> {
    const at = new Date();
    const { identifiers } = await dataSource.getRepository(Signal).insert({
      workflowId,
      name,
      idempotencyKey,
      state: 'pending',
      claimed: 0,
      consumed: 0,
      createdAt: at,
      updatedAt: at,
    });
    return String(identifiers[0].id);
  }

  /** The one row found by `where` carries exactly the value of `property` it was looked up by. */
  async function expectFoundOnce<T extends object>(entity: EntityTarget<T>, where: FindOptionsWhere<T>, property: keyof T & string): Promise<void> {
    const rows = await dataSource.getRepository(entity).findBy(where);
    expect({ [property]: where[property], found: rows.map((row) => row[property]) }).toEqual({ [property]: where[property], found: [where[property]] });
  }

  /** A workflow, one execution and one signal whose identity strings are those of BASE. */
  async function insertBaseRows(): Promise<string> {
    const workflowId = await insertWorkflow({ type: BASE.type, heroType: BASE.heroType, heroId: BASE.heroId, nextStepName: BASE.stepName });
    await insertExecution(workflowId, 'scheduled', BASE.stepName);
    await insertSignal(workflowId, BASE.name, BASE.key);
    return workflowId;
  }

  /**
   * Next to the rows of insertBaseRows: rows whose identity strings differ from BASE only by case,
   * an accent, a trailing space or normalisation are all accepted by the unique indexes (signal
   * dedup, one ongoing workflow per type and hero), and each is found by its exact value alone.
   */
  async function expectVariantsKeptApart(workflowId: string): Promise<void> {
    for (const key of variantsOf(BASE.key)) await insertSignal(workflowId, BASE.name, key);
    for (const name of variantsOf(BASE.name)) await insertSignal(workflowId, name, BASE.key);
    for (const type of variantsOf(BASE.type)) await insertWorkflow({ type, heroType: BASE.heroType, heroId: BASE.heroId });
    for (const heroType of variantsOf(BASE.heroType)) await insertWorkflow({ type: BASE.type, heroType, heroId: BASE.heroId });
    for (const heroId of variantsOf(BASE.heroId)) await insertWorkflow({ type: BASE.type, heroType: BASE.heroType, heroId });
    for (const stepName of variantsOf(BASE.stepName)) await insertExecution(workflowId, 'completed', stepName);

    for (const key of allSpellingsOf(BASE.key)) await expectFoundOnce(Signal, { workflowId, name: BASE.name, idempotencyKey: key }, 'idempotencyKey');
    for (const name of allSpellingsOf(BASE.name)) await expectFoundOnce(Signal, { workflowId, name, idempotencyKey: BASE.key }, 'name');
    for (const type of allSpellingsOf(BASE.type)) await expectFoundOnce(WorkflowRecord, { type, heroType: BASE.heroType, heroId: BASE.heroId }, 'type');
    for (const heroType of allSpellingsOf(BASE.heroType)) await expectFoundOnce(WorkflowRecord, { type: BASE.type, heroType, heroId: BASE.heroId }, 'heroType');
    for (const heroId of allSpellingsOf(BASE.heroId)) await expectFoundOnce(WorkflowRecord, { type: BASE.type, heroType: BASE.heroType, heroId }, 'heroId');
    for (const stepName of allSpellingsOf(BASE.stepName)) await expectFoundOnce(StepExecution, { workflowId, stepName }, 'stepName');
    // ... and an exact duplicate is still refused.
    await expectUniqueViolation(insertSignal(workflowId, BASE.name, BASE.key), 'geneva_drive_signals_dedup');
    await expectUniqueViolation(insertWorkflow({ type: BASE.type, heroType: BASE.heroType, heroId: BASE.heroId }), 'geneva_drive_workflows_unique_ongoing');
  }

  /**
   * The geneva-drive tables' columns and indexes as the catalog describes them, to compare schemas
   * built by different migration paths.
   */
  async function schemaSnapshot(): Promise<unknown[]> {
    if (kind === 'sqlite') {
      return dataSource.query(`SELECT type, name, tbl_name, sql FROM sqlite_master WHERE tbl_name LIKE 'geneva_drive_%' ORDER BY type, name`);
    }
    if (kind === 'postgres') {
      // Columns in their order, not their ordinal numbers: PostgreSQL never reuses the number of a
      // dropped column, so a column dropped by a down migration and added again gets a new one.
      const columns = await dataSource.query(
        `SELECT table_name, column_name, data_type, character_maximum_length, is_nullable, column_default, collation_name ` +
          `FROM information_schema.columns WHERE table_schema = current_schema() AND table_name LIKE 'geneva_drive_%' ORDER BY table_name, ordinal_position`,
      );
      const indexes = await dataSource.query(
        `SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'geneva_drive_%' ORDER BY indexname`,
      );
      return [...columns, ...indexes];
    }
    const columns = await dataSource.query(
      'SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, COLLATION_NAME, IS_NULLABLE, COLUMN_DEFAULT, GENERATION_EXPRESSION, EXTRA ' +
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'geneva\\_drive\\_%' ORDER BY TABLE_NAME, ORDINAL_POSITION",
    );
    const indexes = await dataSource.query(
      'SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS ' +
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'geneva\\_drive\\_%' ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
    );
    return [...columns, ...indexes];
  }

  /** MySQL/MariaDB: the declared type of a column (`varbinary`, `varchar`). */
  async function mysqlDataType(table: string, column: string): Promise<string> {
    const [row] = await dataSource.query(
      'SELECT DATA_TYPE AS `type` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?',
      [table, column],
    );
    return row.type;
  }

  /** The names of the indexes on `table` (geneva_drive_workflows unless told). */
  async function indexNames(table = 'geneva_drive_workflows'): Promise<string[]> {
    const rows: Array<{ name: string }> =
      kind === 'sqlite'
        ? await dataSource.query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`, [table])
        : kind === 'postgres'
          ? await dataSource.query(`SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1`, [table])
          : await dataSource.query('SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?', [table]);
    return rows.map((row) => row.name).sort();
  }

  /** PostgreSQL: each geneva-drive index's definition, by name. */
  async function indexDefinitions(): Promise<Map<string, string>> {
    const rows: Array<{ name: string; definition: string }> = await dataSource.query(
      `SELECT indexname AS name, indexdef AS definition FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'geneva_drive_%'`,
    );
    return new Map(rows.map((row) => [row.name, row.definition]));
  }

  /** The names of the indexes on geneva_drive_step_executions. */
  const executionIndexNames = () => indexNames('geneva_drive_step_executions');

  /** A schema snapshot without the list indexes: what the schema was before AddGenevaDriveListIndexes1730000000003. */
  function withoutListIndexes(snapshot: unknown[]): unknown[] {
    return snapshot.filter((row) => {
      const { name, indexname, INDEX_NAME } = row as { name?: string; indexname?: string; INDEX_NAME?: string };
      return !LIST_INDEXES.includes(name ?? indexname ?? INDEX_NAME ?? '');
    });
  }

  describe('fully migrated', () => {
    beforeAll(async () => {
      await prepareDatabase(kind);
      await open();
    });
    afterAll(() => dataSource?.destroy());
    beforeEach(() => truncateAll(dataSource));

    it('runs every migration up on an empty database', async () => {
      expect(await dataSource.showMigrations()).toBe(false); // nothing pending
      const executed: { name: string }[] = await dataSource.query(
        `SELECT ${dataSource.driver.escape('name')} FROM ${dataSource.driver.escape('migrations')} ORDER BY ${dataSource.driver.escape('timestamp')}`,
      );
      expect(executed.map((row) => row.name)).toEqual([
        'CreateTestFixtures1600000000000',
        'CreateGenevaDriveTables1730000000000',
        'AddGenevaDriveSignals1730000000001',
        'ExactGenevaDriveIdentifiers1730000000002',
        'AddGenevaDriveListIndexes1730000000003',
        'AddGenevaDriveWaitDeadlines1730000000004',
        'AddGenevaDriveProcesses1730000000005',
        'AddGenevaDriveChildWorkflows1730000000006',
        'AddGenevaDriveFlowControl1730000000007',
        'AddGenevaDriveFlowKeyIndex1730000000008',
        'AddGenevaDriveRateLimits1730000000009',
        'PartialGenevaDriveIndexes1730000000010',
      ]);
      for (const table of [...GENEVA_TABLES, 'geneva_drive_flow_keys', 'test_heroes', 'test_uuid_heroes']) {
        expect(await hasTable(table)).toBe(true);
      }
    });

    // PostgreSQL only: the other databases have no partial indexes, and the migration leaves them as they are.
    if (kind === 'postgres') it('keeps the mostly-null columns’ indexes to the rows that have them, and the engine’s reads still go by them [postgres]', async () => {
      const definitions = await indexDefinitions();
      for (const [name, column] of Object.entries(PARTIAL_INDEXES)) expect([name, definitions.get(name)]).toEqual([name, expect.stringMatching(new RegExp(`WHERE \\(${column} IS NOT NULL\\)$`))]);
      for (const name of COVERED_INDEXES) expect(definitions.has(name)).toBe(false);
      // Each read as the engine words it (recovery, gauges, purge, children, signals' settlement, resumable steps).
      const reads: Array<[string, string]> = [
        [`SELECT id FROM geneva_drive_step_executions WHERE state = 'waiting' AND timeout_at < now()`, 'geneva_drive_step_executions_state_timeout'],
        [`SELECT state, count(*) FROM geneva_drive_step_executions WHERE state IN ('scheduled', 'in_progress') AND flow_key IS NOT NULL GROUP BY state`, 'geneva_drive_step_executions_state_flow_key'],
        [`SELECT id FROM geneva_drive_step_executions WHERE signal_id = 7 AND step_name = 'charge'`, 'geneva_drive_step_executions_signal_id'],
        [`SELECT id FROM geneva_drive_step_executions s WHERE s.continues_from_id = 7`, 'geneva_drive_step_executions_continues_from'],
        [`SELECT id FROM geneva_drive_step_executions WHERE finished_at < now()`, 'geneva_drive_step_executions_finished_at'],
        [`SELECT id FROM geneva_drive_workflows WHERE parent_id = 7 AND id > 3 ORDER BY id LIMIT 10`, 'geneva_drive_workflows_parent'],
      ];
      const runner = dataSource.createQueryRunner();
      try {
        await runner.query('SET enable_seqscan = off');
        await runner.query('SET enable_bitmapscan = off');
        for (const [sql, index] of reads) {
          const plan = (await runner.query(`EXPLAIN ${sql}`)) as Array<{ 'QUERY PLAN': string }>;
          expect([sql, plan.map((row) => row['QUERY PLAN']).join('\n')]).toEqual([sql, expect.stringContaining(index)]);
        }
      } finally {
        await runner.release();
      }
      // Still unique among a parent's children.
      const parentId = await insertWorkflow({ allowMultiple: true });
      const child = { allowMultiple: true, parentId, parentStepName: 'fan_out', childKey: 'k1' } as Partial<WorkflowRecord>;
      await insertWorkflow(child);
      await expectUniqueViolation(insertWorkflow(child), 'geneva_drive_workflows_child_key');
    });

    // PostgreSQL only, as above.
    if (kind === 'postgres') it('lets the engine’s reads go on while it builds the indexes: the tables are locked whole only by the drops at its end [postgres]', async () => {
      const migration = new PartialGenevaDriveIndexes1730000000010();
      const runner = dataSource.createQueryRunner();
      const reader = dataSource.createQueryRunner();
      const readsBlocked: string[] = [];
      try {
        await migration.down(runner);
        await reader.query(`SET lock_timeout = '2s'`);
        // Before each index it builds, another connection reads both tables: a read that waits for a lock fails at once with lock_timeout.
        const query = runner.query.bind(runner);
        runner.query = (async (sql: string, parameters?: unknown[]) => {
          if (/^CREATE (UNIQUE )?INDEX/.test(sql)) {
            for (const table of ['geneva_drive_workflows', 'geneva_drive_step_executions']) {
              await reader.query(`SELECT count(*) FROM ${table}`).catch((error: Error) => readsBlocked.push(`${table} before "${sql.slice(0, 60)}…": ${error.message}`));
            }
          }
          return query(sql, parameters);
        }) as typeof runner.query;
        await runner.startTransaction();
        await migration.up(runner);
        await runner.commitTransaction();
      } finally {
        if (runner.isTransactionActive) await runner.rollbackTransaction();
        await runner.release();
        await reader.release();
      }
      expect(readsBlocked).toEqual([]);
      const definitions = await indexDefinitions();
      for (const name of Object.keys(PARTIAL_INDEXES)) expect([name, definitions.get(name)]).toEqual([name, expect.stringContaining('IS NOT NULL')]);
    });

    it('stores and loads every entity column (the schema matches the entities)', async () => {
      const at = new Date('2024-05-06T07:08:09.123Z');
      const later = new Date('2024-05-06T08:00:00.456Z');

      const workflows = dataSource.getRepository(WorkflowRecord);
      const workflow = await workflows.save(
        workflows.create({
          type: 'OrderWorkflow',
          heroType: 'UuidHero',
          heroId: '1b4e28ba-2fa1-11d2-883f-0016d3cca427',
          state: 'paused',
          currentStepName: 'charge',
          nextStepName: 'ship',
          allowMultiple: true,
          startedAt: at,
          transitionedAt: later,
          finishedAt: null,
          createdAt: at,
          updatedAt: later,
        }),
      );
      expect(await workflows.findOneByOrFail({ id: workflow.id })).toEqual(workflow);

      const signals = dataSource.getRepository(Signal);
      const signal = await signals.save(
        signals.create({
          workflowId: workflow.id,
          name: 'payment_confirmed',
          idempotencyKey: 'evt_1',
          state: 'claimed',
          payload: { amountCents: 1250, at, note: 'ünïcödé ✓' },
          claimed: 2,
          consumed: 1,
          claimedAt: at,
          consumedAt: later,
          createdAt: at,
          updatedAt: later,
        }),
      );
      expect(await signals.findOneByOrFail({ id: signal.id })).toEqual(signal);

      const executions = dataSource.getRepository(StepExecution);
      const execution = await executions.save(
        executions.create({
          workflowId: workflow.id,
          stepName: 'charge',
          state: 'failed',
          outcome: 'failed',
          scheduledFor: at,
          startedAt: at,
          completedAt: null,
          failedAt: later,
          canceledAt: null,
          skippedAt: null,
          finishedAt: later,
          errorClassName: 'PaymentError',
          errorMessage: 'card declined',
          errorBacktrace: 'at charge\nat perform',
          jobId: '42',
          metadata: { reattemptReason: 'exception_policy', exception: { class: 'PaymentError', message: 'card declined', backtrace: null } },
          cursor: { page: 3, seen: [1, 2, 3] },
          continuesFromId: null,
          signalId: signal.id,
          waitingSince: at,
          flowKey: 'stripé:Acct_1',
          createdAt: at,
          updatedAt: later,
        }),
      );
      expect(await executions.findOneByOrFail({ id: execution.id })).toEqual(execution);
    });

    it('creates the fixture hero tables with their defaults', async () => {
      const heroes = dataSource.getRepository(TestHero);
      const hero = await heroes.save(heroes.create({ name: 'Ada' }));
      expect(await heroes.findOneByOrFail({ id: hero.id })).toEqual({ id: hero.id, name: 'Ada', active: true, canceled: false });

      const uuidHeroes = dataSource.getRepository(UuidHero);
      const uuidHero = await uuidHeroes.save(uuidHeroes.create({ name: 'Grace' }));
      expect(uuidHero.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(await uuidHeroes.findOneByOrFail({ id: uuidHero.id })).toEqual(uuidHero);
    });

    describe('one ongoing workflow per type and hero', () => {
      const index = 'geneva_drive_workflows_unique_ongoing';

      it.each(['ready', 'performing', 'paused'] as const)('rejects a second workflow while the first is %s', async (state) => {
        await insertWorkflow({ state });
        await expectUniqueViolation(insertWorkflow(), index);
      });

      it('allows a second one with allow_multiple, in either position', async () => {
        await insertWorkflow();
        await insertWorkflow({ allowMultiple: true });
        await insertWorkflow({ type: 'RefundWorkflow', allowMultiple: true });
        await insertWorkflow({ type: 'RefundWorkflow' });
        expect(await dataSource.getRepository(WorkflowRecord).count()).toBe(4);
      });

      it.each(['finished', 'canceled'] as const)('allows a new one once the first is %s', async (state) => {
        const first = await insertWorkflow();
        await setWorkflowState(first, state);
        await insertWorkflow();
        // ...and the old row cannot come back while the new one is ongoing.
        await expectUniqueViolation(setWorkflowState(first, 'ready'), index);
      });

      it('allows another type for the same hero, and the same type for another hero', async () => {
        await insertWorkflow();
        await insertWorkflow({ type: 'RefundWorkflow' });
        await insertWorkflow({ heroType: 'UuidHero' });
        await insertWorkflow({ heroId: '2' });
        expect(await dataSource.getRepository(WorkflowRecord).count()).toBe(4);
      });

      it('compares the key exactly: no separator collisions, case and trailing spaces count', async () => {
        // Would collide under a naive CONCAT(type, '-', hero_type, '-', hero_id).
        await insertWorkflow({ type: 'A-B', heroType: 'C', heroId: 'D' });
        await insertWorkflow({ type: 'A', heroType: 'B-C', heroId: 'D' });
        await insertWorkflow({ type: 'A', heroType: 'B', heroId: 'C-D' });
        // Would collide under a case-insensitive or PAD SPACE collation (MySQL's defaults).
        await insertWorkflow({ heroId: 'abc' });
        await insertWorkflow({ heroId: 'ABC' });
        await insertWorkflow({ heroId: 'abc ' });
        expect(await dataSource.getRepository(WorkflowRecord).count()).toBe(6);
      });
    });

    describe('one active execution per workflow', () => {
      const index = 'geneva_drive_step_executions_one_active';

      it.each([
        ['scheduled', 'scheduled'],
        ['scheduled', 'waiting'],
        ['waiting', 'in_progress'],
        ['in_progress', 'scheduled'],
      ] as const)('rejects %s + %s', async (first, second) => {
        const workflowId = await insertWorkflow();
        await insertExecution(workflowId, first);
        await expectUniqueViolation(insertExecution(workflowId, second), index);
      });

      it('allows any number of finished executions next to one active', async () => {
        const workflowId = await insertWorkflow();
        for (const state of ['completed', 'failed', 'canceled', 'skipped'] as const) {
          await insertExecution(workflowId, state);
        }
        await insertExecution(workflowId, 'scheduled');
        await insertExecution(workflowId, 'completed');
        expect(await dataSource.getRepository(StepExecution).countBy({ workflowId })).toBe(6);
      });

      it('frees the slot when the active execution finishes, and is per workflow', async () => {
        const workflowId = await insertWorkflow();
        const other = await insertWorkflow({ type: 'RefundWorkflow' });
        const first = await insertExecution(workflowId, 'in_progress');
        await insertExecution(other, 'in_progress');
        await dataSource.getRepository(StepExecution).update(first, { state: 'completed' });
        await insertExecution(workflowId, 'scheduled');
        await expectUniqueViolation(dataSource.getRepository(StepExecution).update(first, { state: 'waiting' }), index);
      });
    });

    it('deleting a workflow deletes its executions and signals', async () => {
      const doomed = await insertWorkflow();
      const kept = await insertWorkflow({ heroId: '2' });
      for (const workflowId of [doomed, kept]) {
        await insertExecution(workflowId, 'completed');
        await insertExecution(workflowId, 'scheduled');
        await insertSignal(workflowId, 'payment_confirmed', 'evt_1');
      }

      await dataSource.getRepository(WorkflowRecord).delete(doomed);

      expect(await dataSource.getRepository(StepExecution).countBy({ workflowId: doomed })).toBe(0);
      expect(await dataSource.getRepository(Signal).countBy({ workflowId: doomed })).toBe(0);
      expect(await dataSource.getRepository(StepExecution).countBy({ workflowId: kept })).toBe(2);
      expect(await dataSource.getRepository(Signal).countBy({ workflowId: kept })).toBe(1);
    });

    it('compares every identity string exactly: case, accents, trailing spaces and normalisation count', async () => {
      await expectVariantsKeptApart(await insertBaseRows());
    });

    it('rejects an execution or a signal for a workflow that does not exist', async () => {
      await expect(insertExecution('999999', 'scheduled')).rejects.toBeInstanceOf(QueryFailedError);
      await expect(insertSignal('999999', 'payment_confirmed', null)).rejects.toBeInstanceOf(QueryFailedError);
    });

    describe('signal dedup', () => {
      const index = 'geneva_drive_signals_dedup';

      it('rejects the same (workflow, name, idempotency key) twice', async () => {
        const workflowId = await insertWorkflow();
        await insertSignal(workflowId, 'payment_confirmed', 'evt_1');
        await expectUniqueViolation(insertSignal(workflowId, 'payment_confirmed', 'evt_1'), index);
      });

      it('allows the key again under another name or workflow, and any number of NULL keys', async () => {
        const workflowId = await insertWorkflow();
        const other = await insertWorkflow({ heroId: '2' });
        await insertSignal(workflowId, 'payment_confirmed', 'evt_1');
        await insertSignal(workflowId, 'payment_refunded', 'evt_1');
        await insertSignal(other, 'payment_confirmed', 'evt_1');
        await insertSignal(workflowId, 'payment_confirmed', null);
        await insertSignal(workflowId, 'payment_confirmed', null);
        expect(await dataSource.getRepository(Signal).count()).toBe(5);
      });

      it('accepts the longest name and key (fits the MySQL index size)', async () => {
        const workflowId = await insertWorkflow();
        await insertSignal(workflowId, 'ñ'.repeat(255), '✓'.repeat(255));
        await expectUniqueViolation(insertSignal(workflowId, 'ñ'.repeat(255), '✓'.repeat(255)), index);
      });
    });

    describe('the flow keys table', () => {
      const q = (name: string) => dataSource.driver.escape(name);
      const p = (n: number) => (kind === 'postgres' ? `$${n}` : '?');
      // better-sqlite3 cannot bind a Date: SQLite gets the text TypeORM itself would write.
      const at = () => (kind === 'sqlite' ? '2024-01-01 00:00:00.000' : new Date('2024-01-01T00:00:00Z'));
      /** Inserts a key as the engine will, by raw SQL; `holding` left to its default unless given. */
      const insertKey = (key: string, values: { holding?: number; waiters?: string | null } = {}) => {
        const columns = ['flow_key', 'created_at', 'updated_at'];
        const params: unknown[] = [key, at(), at()];
        if (values.waiters !== null) {
          columns.push('waiters');
          params.push(values.waiters ?? '[]');
        }
        if (values.holding !== undefined) {
          columns.push('holding');
          params.push(values.holding);
        }
        return dataSource.query(
          `INSERT INTO ${q('geneva_drive_flow_keys')} (${columns.map(q).join(', ')}) VALUES (${params.map((_, i) => p(i + 1)).join(', ')})`,
          params,
        );
      };
      const keyRows = async (key: string): Promise<Array<{ key: unknown; holding: number; waiters: string }>> => {
        const rows: Array<{ key: unknown; holding: unknown; waiters: string }> = await dataSource.query(
          `SELECT ${q('flow_key')} AS ${q('key')}, ${q('holding')} AS ${q('holding')}, ${q('waiters')} AS ${q('waiters')} ` +
            `FROM ${q('geneva_drive_flow_keys')} WHERE ${q('flow_key')} = ${p(1)}`,
          [key],
        );
        return rows.map((row) => ({ key: identifierText(row.key), holding: Number(row.holding), waiters: row.waiters }));
      };

      it('keys its rows by the exact key (case, accents, trailing spaces and normalisation count), up to 255 characters', async () => {
        for (const key of allSpellingsOf(BASE.key)) await insertKey(key);
        const longest = '✓'.repeat(255);
        await insertKey(longest);
        for (const key of [...allSpellingsOf(BASE.key), longest]) expect(await keyRows(key)).toEqual([{ key, holding: 0, waiters: '[]' }]);
        for (const key of [BASE.key, longest]) {
          const error = await insertKey(key).then(() => undefined, (rejection: unknown) => rejection);
          expect(error).toBeInstanceOf(QueryFailedError);
          expect(((error as QueryFailedError).driverError as { code?: string }).code).toBe(PRIMARY_KEY_VIOLATION[kind]);
        }
      });

      it('starts holding at 0, requires the waiters, and keeps a long waiters list whole', async () => {
        await expect(insertKey('no-waiters', { waiters: null })).rejects.toBeInstanceOf(QueryFailedError);
        // Over the 64 KB of MySQL's TEXT: the column is LONGTEXT there.
        const waiters = JSON.stringify(Array.from({ length: 20_000 }, (_, i) => `0190a3f2-7b1c-7def-8abc-${String(i).padStart(12, '0')}`));
        await insertKey('stripe', { waiters, holding: 3 });
        expect(await keyRows('stripe')).toEqual([{ key: 'stripe', holding: 3, waiters }]);
      });
    });

    it('goes down and up again', async () => {
      await dataSource.undoLastMigration(); // the partial indexes (PostgreSQL): whole again, and the two it dropped back
      if (kind === 'postgres') {
        const definitions = await indexDefinitions();
        for (const name of [...Object.keys(PARTIAL_INDEXES), ...COVERED_INDEXES]) expect([name, definitions.get(name)]).toEqual([name, expect.not.stringContaining('WHERE')]);
      }
      expect(await hasColumn('geneva_drive_flow_keys', 'rate_window')).toBe(true);
      await dataSource.undoLastMigration(); // rate limits: their column goes
      expect(await hasColumn('geneva_drive_flow_keys', 'rate_window')).toBe(false);
      expect(await executionIndexNames()).toContain(FLOW_KEY_INDEX);
      await dataSource.undoLastMigration(); // the flow-key index
      expect(await executionIndexNames()).not.toContain(FLOW_KEY_INDEX);
      expect(await hasColumn('geneva_drive_step_executions', 'flow_key')).toBe(true);
      await dataSource.undoLastMigration(); // flow control: its table and column go
      expect(await hasTable('geneva_drive_flow_keys')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'flow_key')).toBe(false);
      expect(await hasColumn('geneva_drive_workflows', 'parent_id')).toBe(true);
      await dataSource.undoLastMigration(); // the child workflows: their columns and indexes go
      for (const column of ['parent_id', 'parent_step_name', 'child_key', 'on_parent_cancel', 'has_children', 'result']) {
        expect(await hasColumn('geneva_drive_workflows', column)).toBe(false);
      }
      await dataSource.undoLastMigration(); // the process table
      expect(await hasTable('geneva_drive_processes')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'timeout_at')).toBe(true);

      await dataSource.undoLastMigration(); // wait deadlines: the column and its index go
      expect(await hasColumn('geneva_drive_step_executions', 'timeout_at')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'waiting_since')).toBe(true);

      expect(await indexNames()).toEqual(expect.arrayContaining(LIST_INDEXES));
      await dataSource.undoLastMigration(); // the list indexes
      expect((await indexNames()).filter((name) => LIST_INDEXES.includes(name))).toEqual([]);
      await dataSource.undoLastMigration(); // exact identifiers: back to the first release's columns
      if (kind === 'mysql') expect(await mysqlDataType('geneva_drive_signals', 'idempotency_key')).toBe('varchar');
      expect(await hasTable('geneva_drive_signals')).toBe(true);

      await dataSource.undoLastMigration();
      expect(await hasTable('geneva_drive_signals')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'signal_id')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'waiting_since')).toBe(false);
      expect(await hasTable('geneva_drive_step_executions')).toBe(true);

      await dataSource.undoLastMigration();
      for (const table of GENEVA_TABLES) expect(await hasTable(table)).toBe(false);
      expect(await hasTable('test_heroes')).toBe(true); // the fixture migration is still applied

      await dataSource.runMigrations();
      expect(await dataSource.showMigrations()).toBe(false);
      for (const table of [...GENEVA_TABLES, 'geneva_drive_flow_keys']) expect(await hasTable(table)).toBe(true);
      expect(await hasColumn('geneva_drive_step_executions', 'flow_key')).toBe(true);
      expect(await executionIndexNames()).toContain(FLOW_KEY_INDEX);

      // The re-created schema enforces the same guarantees.
      const workflowId = await insertWorkflow();
      await expectUniqueViolation(insertWorkflow(), 'geneva_drive_workflows_unique_ongoing');
      await insertExecution(workflowId, 'scheduled');
      await expectUniqueViolation(insertExecution(workflowId, 'waiting'), 'geneva_drive_step_executions_one_active');
      await truncateAll(dataSource);
      await expectVariantsKeptApart(await insertBaseRows());
      expect(await indexNames()).toEqual(expect.arrayContaining(LIST_INDEXES));
    });
  });

  describe.each(['bigint', 'uuid'] as const)('adding flow control to a database in use (%s keys)', (primaryKey) => {
    let fresh: unknown[];
    /** Flow control without its index (AddGenevaDriveFlowKeyIndex1730000000008). */
    let unindexed: unknown[];
    let schema: SchemaCapabilities;

    /** Opens `dataSource` and detects its schema as the engine does at boot (uuid ids, columns hidden). */
    async function openDetected(): Promise<void> {
      dataSource = await new DataSource(dataSourceOptions(kind, { primaryKey })).initialize();
      schema = new SchemaCapabilities();
      await schema.detect(dataSource);
    }

    /** What a booting engine detects now (on a DataSource of its own: detect() changes the entities' metadata). */
    async function detected(): Promise<SchemaCapabilities> {
      const other = await new DataSource(dataSourceOptions(kind, { primaryKey })).initialize();
      try {
        const capabilities = new SchemaCapabilities();
        await capabilities.detect(other);
        return capabilities;
      } finally {
        await other.destroy();
      }
    }

    /** Runs the migration's up or down by itself, whatever the migrations table says. */
    async function run(direction: 'up' | 'down'): Promise<void> {
      const runner = dataSource.createQueryRunner();
      try {
        await new AddGenevaDriveFlowControl1730000000007()[direction](runner);
      } finally {
        await runner.release();
      }
    }

    beforeAll(async () => {
      await prepareDatabase(kind, { primaryKey });
      await openDetected();
      fresh = await schemaSnapshot();
      await dataSource.destroy();
      // Flow control alone: neither its index nor the rate limits that come after it.
      await prepareDatabase(kind, { primaryKey, withoutFlowKeyIndex: true, withoutRateLimits: true });
      await openDetected();
      unindexed = await schemaSnapshot();
      await dataSource.destroy();
      await prepareDatabase(kind, { primaryKey, withoutFlowControl: true });
      await openDetected();
    });
    afterAll(() => dataSource?.destroy());

    it('works without it (flow_key out of the statements), then adds both halves and the index, runs again as a no-op, finishes a half-done run, and goes down and up', async () => {
      const q = (name: string) => dataSource.driver.escape(name);
      const before = await schemaSnapshot();
      expect(before).not.toEqual(unindexed);
      expect(unindexed).not.toEqual(fresh);
      expect(await executionIndexNames()).not.toContain(FLOW_KEY_INDEX);
      expect(await hasTable('geneva_drive_flow_keys')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'flow_key')).toBe(false);
      expect(schema.primaryKey).toBe(primaryKey);
      expect(schema.hasFlowControl).toBe(false);
      expect(() => schema.assertFlowControl('Step OrderWorkflow.charge (concurrency)')).toThrow(FlowControlNotMigratedError);
      expect(() => schema.assertFlowControl('Step OrderWorkflow.charge (concurrency)')).toThrow(
        'Step OrderWorkflow.charge (concurrency) needs the geneva_drive_flow_keys table and the flow_key column of geneva_drive_step_executions: run the AddGenevaDriveFlowControl1730000000007 migration',
      );
      // The entity works on the older schema: written, read and updated without the column.
      const workflowId = await insertWorkflow();
      const executionId = await insertExecution(workflowId, 'scheduled');
      await dataSource.getRepository(StepExecution).update(executionId, { state: 'in_progress' });
      const older = await dataSource.getRepository(StepExecution).findOneByOrFail({ id: executionId });
      expect(older).toMatchObject({ stepName: 'charge', state: 'in_progress' });
      expect(older.flowKey).toBeUndefined();

      expect(await dataSource.showMigrations()).toBe(true); // flow control, its index and the rate limits are pending
      await dataSource.runMigrations();
      expect(await dataSource.showMigrations()).toBe(false);
      expect(await schemaSnapshot()).toEqual(fresh);
      expect(await executionIndexNames()).toContain(FLOW_KEY_INDEX);
      await dataSource.undoLastMigration(); // the rate limits
      await dataSource.undoLastMigration(); // the index
      expect(await schemaSnapshot()).toEqual(unindexed);
      await run('up'); // applied already: nothing to do
      expect(await schemaSnapshot()).toEqual(unindexed);
      const now = await detected();
      expect(now.hasFlowControl).toBe(true);
      expect(() => now.assertFlowControl('Step OrderWorkflow.charge (concurrency)')).not.toThrow();

      // A run that stopped between its statements (MySQL/MariaDB commit each DDL): either half alone
      // is not flow control, and running again adds the other.
      await dataSource.query(`ALTER TABLE ${q('geneva_drive_step_executions')} DROP COLUMN ${q('flow_key')}`);
      expect((await detected()).hasFlowControl).toBe(false);
      await run('up');
      expect(await schemaSnapshot()).toEqual(unindexed);
      await dataSource.query(`DROP TABLE ${q('geneva_drive_flow_keys')}`);
      expect((await detected()).hasFlowControl).toBe(false);
      await run('up');
      expect(await schemaSnapshot()).toEqual(unindexed);

      await dataSource.undoLastMigration(); // flow control
      expect(await schemaSnapshot()).toEqual(before);
      await run('down'); // undone already: nothing to do
      expect(await schemaSnapshot()).toEqual(before);
      await dataSource.runMigrations();
      expect(await schemaSnapshot()).toEqual(fresh);

      // Once migrated, a booting engine reads and writes the column; the older rows hold no key.
      await dataSource.destroy();
      await openDetected();
      expect(schema.hasFlowControl).toBe(true);
      const executions = dataSource.getRepository(StepExecution);
      expect(await executions.findOneByOrFail({ id: executionId })).toMatchObject({ stepName: 'charge', state: 'in_progress', flowKey: null });
      await executions.update(executionId, { flowKey: 'stripe' });
      expect(await executions.findOneByOrFail({ id: executionId })).toMatchObject({ flowKey: 'stripe' });
    });
  });

  describe('without the signals migration', () => {
    beforeAll(async () => {
      await prepareDatabase(kind, { withoutSignals: true });
      await open();
    });
    afterAll(() => dataSource?.destroy());

    it('has no signals table and no signal columns on executions', async () => {
      await truncateAll(dataSource); // tolerates the missing signals table
      expect(await hasTable('geneva_drive_workflows')).toBe(true);
      expect(await hasTable('geneva_drive_signals')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'signal_id')).toBe(false);
      expect(await hasColumn('geneva_drive_step_executions', 'waiting_since')).toBe(false);
      expect(await dataSource.showMigrations()).toBe(true); // the signals migration is pending
    });

    it('upgrades a database in use: rows and the unique indexes survive', async () => {
      // Raw SQL: the entity already maps the columns the upgrade adds.
      const workflowId = await insertWorkflow();
      const q = (name: string) => dataSource.driver.escape(name);
      const p = (n: number) => (kind === 'postgres' ? `$${n}` : '?');
      // better-sqlite3 cannot bind a Date: SQLite gets the text TypeORM itself would write.
      const at = kind === 'sqlite' ? '2024-01-01 00:00:00.000' : new Date('2024-01-01T00:00:00Z');
      const columns = ['workflow_id', 'step_name', 'scheduled_for', 'created_at', 'updated_at'].map(q).join(', ');
      await dataSource.query(
        `INSERT INTO ${q('geneva_drive_step_executions')} (${columns}) VALUES (${p(1)}, 'charge', ${p(2)}, ${p(3)}, ${p(4)})`,
        [workflowId, at, at, at],
      );

      await dataSource.runMigrations();

      expect(await hasColumn('geneva_drive_step_executions', 'signal_id')).toBe(true);
      expect(await hasColumn('geneva_drive_step_executions', 'waiting_since')).toBe(true);
      const [execution] = await dataSource.getRepository(StepExecution).findBy({ workflowId });
      expect(execution).toMatchObject({ stepName: 'charge', state: 'scheduled', signalId: null, waitingSince: null });
      await expectUniqueViolation(insertExecution(workflowId, 'waiting'), 'geneva_drive_step_executions_one_active');
      await expectUniqueViolation(insertWorkflow(), 'geneva_drive_workflows_unique_ongoing');
      await insertSignal(workflowId, 'payment_confirmed', null);
    });
  });

  /**
   * Replaces this worker's database with an older schema, built by the migrations `from` (default:
   * the first release's, verbatim) and opens `dataSource` on it with today's migrations listed:
   * `migrations` (default: all of them). Returns the schema a new install gets today, to compare
   * with, and the same before the wait-deadlines migration (the last one).
   */
  async function openReleasedSchema(
    primaryKey: 'bigint' | 'uuid',
    options: { withoutSignals?: boolean; migrations?: Array<new () => object>; from?: Array<new () => MigrationInterface> } = {},
  ): Promise<{ fresh: unknown[]; beforeDeadlines: unknown[] }> {
    await prepareDatabase(kind, { primaryKey, withoutDeadlines: true, withoutProcesses: true, withoutChildren: true, withoutFlowControl: true, withoutPartialIndexes: true });
    dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
    const beforeDeadlines = await schemaSnapshot();
    await dataSource.destroy();
    await prepareDatabase(kind, { primaryKey });
    dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
    const fresh = await schemaSnapshot();
    await dataSource.destroy();
    const released = await new DataSource({
      ...dataSourceOptions(kind),
      migrations: [CreateTestFixtures1600000000000, ...(options.from ?? releasedMigrations(primaryKey, options))],
    }).initialize();
    try {
      await released.dropDatabase();
      await released.runMigrations();
    } finally {
      await released.destroy();
    }
    const current = dataSourceOptions(kind, { primaryKey });
    dataSource = await new DataSource({ ...current, migrations: options.migrations ?? current.migrations }).initialize();
    // What the engine does at boot: with uuid keys, the entities' metadata switches to uuid ids.
    await new SchemaCapabilities().detect(dataSource);
    return { fresh, beforeDeadlines };
  }

  /** The rows of a workflow, its executions and its signals, as the entities load them. */
  async function rowsOf(workflowId: string) {
    return {
      workflow: await dataSource.getRepository(WorkflowRecord).findOneByOrFail({ id: workflowId }),
      executions: await dataSource.getRepository(StepExecution).find({ where: { workflowId }, order: { id: 'ASC' } }),
      signals: await dataSource.getRepository(Signal).find({ where: { workflowId }, order: { id: 'ASC' } }),
    };
  }

  describe.each(['bigint', 'uuid'] as const)("upgrading the first release's schema (%s keys)", (primaryKey) => {
    let fresh: unknown[];
    let beforeDeadlines: unknown[];
    let released: unknown[];

    beforeAll(async () => {
      ({ fresh, beforeDeadlines } = await openReleasedSchema(primaryKey));
      released = await schemaSnapshot();
    });
    afterAll(() => dataSource?.destroy());

    it('keeps every row, then tells apart what the old collation merged, and goes down and up again', async () => {
      // Only MySQL/MariaDB had the inexact columns; elsewhere only the list indexes and the deadlines are new.
      if (kind === 'mysql') expect(released).not.toEqual(withoutListIndexes(beforeDeadlines));
      else expect(released).toEqual(withoutListIndexes(beforeDeadlines));

      const workflowId = await insertBaseRows();
      const before = await rowsOf(workflowId);
      if (kind === 'mysql') {
        // The defect: a key that differs only by case was taken for a redelivery of the first one.
        await expectUniqueViolation(insertSignal(workflowId, BASE.name, BASE.key.toLowerCase()), 'geneva_drive_signals_dedup');
      }

      expect(await dataSource.showMigrations()).toBe(true); // the upgrade is pending
      await dataSource.runMigrations();
      expect(await dataSource.showMigrations()).toBe(false);
      expect(await schemaSnapshot()).toEqual(fresh); // the schema of a new install
      expect(await rowsOf(workflowId)).toEqual(before);
      await expectVariantsKeptApart(workflowId);
      await dataSource.undoLastMigration(); // the partial indexes
      await dataSource.undoLastMigration(); // rate limits
      await dataSource.undoLastMigration(); // the flow-key index
      await dataSource.undoLastMigration(); // flow control
      await dataSource.undoLastMigration(); // the child workflows
      await dataSource.undoLastMigration(); // the process table
      expect(await hasTable('geneva_drive_processes')).toBe(false);
      await dataSource.undoLastMigration(); // the wait deadlines
      expect(await schemaSnapshot()).toEqual(beforeDeadlines);

      await dataSource.undoLastMigration(); // the list indexes
      expect(await schemaSnapshot()).toEqual(withoutListIndexes(beforeDeadlines));
      if (kind === 'mysql') {
        // Down cannot merge the signals the exact columns kept apart: it refuses before changing anything.
        await expectUniqueViolation(dataSource.undoLastMigration(), 'geneva_drive_signals_dedup');
        expect(await schemaSnapshot()).toEqual(withoutListIndexes(beforeDeadlines));
      }
      // Without the variants, down restores the first release's columns, the rows intact.
      const keepOnly = (entity: EntityTarget<object>, rows: Array<{ id: string }>) =>
        dataSource.createQueryBuilder().delete().from(entity).where('id NOT IN (:...ids)', { ids: rows.map((row) => row.id) }).execute();
      await keepOnly(WorkflowRecord, [before.workflow]);
      await keepOnly(StepExecution, before.executions);
      await keepOnly(Signal, before.signals);
      await dataSource.undoLastMigration();
      expect(await schemaSnapshot()).toEqual(released);
      expect(await rowsOf(workflowId)).toEqual(before);

      await dataSource.runMigrations();
      expect(await schemaSnapshot()).toEqual(fresh);
      expect(await rowsOf(workflowId)).toEqual(before);
    });
  });

  describe.each(['bigint', 'uuid'] as const)('adding the list indexes to a database in use (%s keys)', (primaryKey) => {
    let fresh: unknown[];
    let previous: unknown[];

    beforeAll(async () => {
      const before = genevaDriveMigrations({ primaryKey }).filter((migration) => migration !== AddGenevaDriveListIndexes1730000000003);
      ({ fresh } = await openReleasedSchema(primaryKey, { from: before }));
      previous = await schemaSnapshot();
    });
    afterAll(() => dataSource?.destroy());

    it('keeps every row, lists them as before, and goes down and up again', async () => {
      expect(previous).toEqual(withoutListIndexes(fresh));
      expect(previous).not.toEqual(fresh);
      const ids = await insertListRows();
      const rows = await Promise.all(ids.map(rowsOf));
      const listed = await listPages();

      expect(await dataSource.showMigrations()).toBe(true); // the list indexes are pending
      await dataSource.runMigrations();
      expect(await dataSource.showMigrations()).toBe(false);
      expect(await schemaSnapshot()).toEqual(fresh);
      expect(await Promise.all(ids.map(rowsOf))).toEqual(rows);
      expect(await listPages()).toEqual(listed);
      // The hero-id index is not unique: one hero id in several workflows.
      const another = await insertWorkflow({ type: 'RefundWorkflow', heroId: 'hero-7' });

      await dataSource.undoLastMigration();
      expect(await schemaSnapshot()).toEqual(previous);
      expect(await Promise.all(ids.map(rowsOf))).toEqual(rows);
      await dataSource.runMigrations();
      expect(await schemaSnapshot()).toEqual(fresh);
      const relisted = await listPages();
      expect(relisted.byTypeAndState).toEqual(listed.byTypeAndState);
      expect(new Set(relisted.byHeroId)).toEqual(new Set([...listed.byHeroId, another]));
    });

    /** Workflows of two types in every state, each with an execution and a signal; returns their ids. */
    async function insertListRows(): Promise<string[]> {
      const ids: string[] = [];
      for (const type of ['OrderWorkflow', 'ShippingWorkflow']) {
        for (const state of ['ready', 'performing', 'paused', 'finished', 'canceled'] as const) {
          for (let i = 0; i < 3; i++) {
            const id = await insertWorkflow({ type, state, heroId: `hero-${ids.length % 10}`, heroType: `Hero${ids.length}` });
            await insertExecution(id, state === 'finished' ? 'completed' : 'scheduled');
            await insertSignal(id, 'payment_confirmed', `evt_${ids.length}`);
            ids.push(id);
          }
        }
      }
      return ids;
    }

    /** What the list's queries answer: by type and state, newest first, and by hero id. */
    async function listPages() {
      const ids = (qb: ReturnType<typeof listQuery>) => qb.getMany().then((found) => found.map((row) => row.id));
      const listQuery = () => dataSource.getRepository(WorkflowRecord).createQueryBuilder('w').orderBy('w.id', 'DESC').limit(5);
      return {
        byTypeAndState: await ids(listQuery().where('w.type = :type AND w.state = :state', { type: 'ShippingWorkflow', state: 'paused' })),
        byHeroId: await ids(listQuery().where('w.heroId = :heroId', { heroId: 'hero-7' })),
      };
    }
  });

  // SQLite plans with the statistics of its last ANALYZE; an index added after it has none.
  if (kind === 'sqlite') {
    describe('adding the list indexes to an analysed SQLite database', () => {
      beforeAll(async () => {
        const before = genevaDriveMigrations().filter((migration) => migration !== AddGenevaDriveListIndexes1730000000003);
        await openReleasedSchema('bigint', { from: before });
      });
      afterAll(() => dataSource?.destroy());

      it('analyses the new indexes: a type is read in id order, a (type, state) pair and a hero id through their index', async () => {
        const rows = Array.from({ length: 2000 }, (_, i) => `('${i % 2 ? 'OrderWorkflow' : 'ShippingWorkflow'}', 'TestHero', '${i}', '${i % 5 ? 'finished' : 'ready'}', 0, '2024-01-01 00:00:00.000', '2024-01-01 00:00:00.000')`);
        await dataSource.query(`INSERT INTO geneva_drive_workflows (type, hero_type, hero_id, state, allow_multiple, created_at, updated_at) VALUES ${rows.join(', ')}`);
        await dataSource.query('ANALYZE');

        await dataSource.runMigrations();

        const plan = async (where: string, parameters: Record<string, string>) => {
          const [sql, values] = dataSource.getRepository(WorkflowRecord).createQueryBuilder('w').where(where, parameters).orderBy('w.id', 'DESC').limit(51).getQueryAndParameters();
          const steps: Array<{ detail: string }> = await dataSource.query(`EXPLAIN QUERY PLAN ${sql}`, values);
          return steps.map((step) => step.detail).join('; ');
        };
        expect(await plan('w.type = :type', { type: 'OrderWorkflow' })).toBe('SEARCH w USING INDEX geneva_drive_workflows_type (type=?)');
        expect(await plan('w.type = :type AND w.state = :state', { type: 'OrderWorkflow', state: 'ready' })).toBe(
          'SEARCH w USING INDEX geneva_drive_workflows_type_state (type=? AND state=?)',
        );
        expect(await plan('w.heroId = :heroId', { heroId: '7' })).toBe('SEARCH w USING INDEX geneva_drive_workflows_hero_id (hero_id=?)');
      });
    });
  }

  // Its reads of the waiting and holding executions, planned on an analysed SQLite database.
  if (kind === 'sqlite') {
    describe('adding the flow-key index to an analysed SQLite database', () => {
      beforeAll(async () => {
        const before = genevaDriveMigrations().filter((migration) => migration !== AddGenevaDriveFlowKeyIndex1730000000008);
        await openReleasedSchema('bigint', { from: before });
      });
      afterAll(() => dataSource?.destroy());

      it('the reads of keys with waiters and of the key gauges go through it, not through the history', async () => {
        const at = `'2024-01-01 00:00:00.000'`;
        const workflows = Array.from({ length: 2000 }, (_, i) => `('OrderWorkflow', 'TestHero', '${i}', 'ready', 0, ${at}, ${at})`);
        await dataSource.query(`INSERT INTO geneva_drive_workflows (type, hero_type, hero_id, state, allow_multiple, created_at, updated_at) VALUES ${workflows.join(', ')}`);
        // Mostly history that kept its key, some steps without a key due, a few waiting for a key.
        const executions = Array.from({ length: 2000 }, (_, i) => {
          const [state, key] = i % 100 === 0 ? ['scheduled', `'k${i % 7}'`] : i % 3 === 0 ? ['scheduled', 'NULL'] : ['completed', `'k${i % 7}'`];
          return `(${i + 1}, 'charge', '${state}', ${at}, ${at}, ${at}, ${key})`;
        });
        await dataSource.query(`INSERT INTO geneva_drive_step_executions (workflow_id, step_name, state, scheduled_for, created_at, updated_at, flow_key) VALUES ${executions.join(', ')}`);
        await dataSource.query('ANALYZE');

        await dataSource.runMigrations();

        const statements = await statementsDuring(dataSource, async () => {
          expect((await waitingKeyRows(dataSource.manager, 101)).map((row) => [row.key, row.waiting])).toEqual([['k0', 3], ['k1', 3], ['k2', 3], ['k3', 3], ['k4', 3], ['k6', 3], ['k5', 2]]);
          expect((await flowKeyGauges(dataSource.manager)).waiting.total).toBe(20);
        });
        expect(statements).toHaveLength(2);
        for (const { query, parameters } of statements) {
          const steps: Array<{ detail: string }> = await dataSource.query(`EXPLAIN QUERY PLAN ${query}`, parameters);
          expect(steps.map((step) => step.detail)).toContain(`SEARCH e USING INDEX ${FLOW_KEY_INDEX} (state=? AND flow_key>?)`);
        }
      });
    });
  }

  describe("upgrading the first release's schema without the signals migration", () => {
    let fresh: unknown[];

    beforeAll(async () => {
      ({ fresh } = await openReleasedSchema('bigint', {
        withoutSignals: true,
        migrations: [CreateTestFixtures1600000000000, CreateGenevaDriveTables1730000000000, ExactGenevaDriveIdentifiers1730000000002],
      }));
    });
    afterAll(() => dataSource?.destroy());

    it('upgrades the two tables; the signals migration, run later, creates exact columns itself', async () => {
      const workflowId = await insertWorkflow({ type: BASE.type, heroType: BASE.heroType, heroId: BASE.heroId });
      await insertExecution(workflowId, 'scheduled', BASE.stepName);
      const before = { workflow: await dataSource.getRepository(WorkflowRecord).findOneByOrFail({ id: workflowId }) };

      await dataSource.runMigrations();
      expect(await dataSource.showMigrations()).toBe(false);
      expect(await hasTable('geneva_drive_signals')).toBe(false);
      expect({ workflow: await dataSource.getRepository(WorkflowRecord).findOneByOrFail({ id: workflowId }) }).toEqual(before);
      for (const heroId of variantsOf(BASE.heroId)) await insertWorkflow({ type: BASE.type, heroType: BASE.heroType, heroId });
      for (const heroId of allSpellingsOf(BASE.heroId)) await expectFoundOnce(WorkflowRecord, { type: BASE.type, heroType: BASE.heroType, heroId }, 'heroId');

      // The application lists the signals migration later.
      await dataSource.destroy();
      dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
      await dataSource.runMigrations();
      expect(await schemaSnapshot()).toEqual(fresh);
      await truncateAll(dataSource);
      await expectVariantsKeptApart(await insertBaseRows());
    });
  });
});
