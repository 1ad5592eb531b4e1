import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';
import type { PrimaryKeyType } from './primary-keys.js';
import { columnTypes, dialectOf, type Dialect } from './column-types.js';

/*
 * Released migrations are immutable: table, column and index names are spelled out here rather than
 * shared with the entities, so a later rename in the code can never change what this file did.
 */
const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';

/** Workflow states that free the "one ongoing per (type, hero)" slot. */
const TERMINAL_WORKFLOW_STATES_SQL = `('finished', 'canceled')`;
/** Execution states of which a workflow may have at most one row. */
const ACTIVE_EXECUTION_STATES_SQL = `('scheduled', 'waiting', 'in_progress')`;

/** The rows the "one ongoing per (type, hero)" guarantee covers. */
function ongoingCondition(queryRunner: QueryRunner, dialect: Dialect): string {
  const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
  return `${q('state')} NOT IN ${TERMINAL_WORKFLOW_STATES_SQL} AND ${q('allow_multiple')} = ${columnTypes(dialect).booleanLiteral(false)}`;
}

/**
 * MySQL/MariaDB: the type and generation of `ongoing_unique_key`, the key of the one-ongoing unique
 * index (the upgrade to exact identifiers rewrites the column with it). `type` is the column type:
 * VARBINARY for the exact identifier columns, the utf8mb4_bin varchar of the first release in `down`.
 */
export function ongoingUniqueKeyDefinition(queryRunner: QueryRunner, type = ONGOING_UNIQUE_KEY_TYPE): string {
  const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
  // The key must be injective over (type, hero_type, hero_id), so every part is length-prefixed
  // ("<length>:<value>") rather than joined by a separator that a value could contain. Over the
  // VARBINARY identifier columns the parts are bytes, CHAR_LENGTH counts bytes and the key compares
  // byte for byte: uniqueness is exact, as on PostgreSQL/SQLite, whatever the table's default collation.
  const part = (column: string) => `CHAR_LENGTH(${q(column)}), ':', ${q(column)}`;
  return (
    `${type} GENERATED ALWAYS AS (` +
    `CASE WHEN ${ongoingCondition(queryRunner, 'mysql')} THEN CONCAT(${part('type')}, ${part('hero_type')}, ${part('hero_id')}) ELSE NULL END` +
    `) STORED`
  );
}

/**
 * 3 x ("1020:") + 1020 + 1020 + 764 bytes of VARBINARY(1020), (1020), (764): 2819 bytes, under
 * InnoDB's 3072-byte index key limit.
 */
const ONGOING_UNIQUE_KEY_TYPE = 'VARBINARY(2819)';

/*
 * MYSQL_NOTE: the generated columns are added with raw SQL and stay unknown to TypeORM's
 * `typeorm_metadata` table. TypeORM's MySQL introspection (`getTable`, and through it `addColumn`,
 * `dropColumn`, `createIndex`, `dropTable` … given a table name) reads a generated column's expression
 * from that table and throws when it does not exist, so later migrations must change these two
 * tables with raw SQL and the engine must probe the schema with `hasTable`/`hasColumn` only. The
 * entities must stay out of `synchronize` / `migration:generate` anyway: those would drop the partial
 * indexes and generated columns they know nothing about.
 */

/**
 * Creates `geneva_drive_workflows` and `geneva_drive_step_executions` with their indexes, the
 * cascading foreign key, and the two uniqueness guarantees the engine relies on:
 * - `geneva_drive_workflows_unique_ongoing`: one ongoing workflow per (type, hero) unless `allow_multiple`;
 * - `geneva_drive_step_executions_one_active`: at most one scheduled/waiting/in-progress execution per workflow.
 * PostgreSQL and SQLite express both as partial unique indexes; MySQL/MariaDB have none, so each is a
 * unique index over a STORED generated column that is NULL outside the constrained set (NULLs never collide).
 * The keys are autoincrement bigints. The subclass `genevaDriveMigrations({ primaryKey: 'uuid' })`
 * returns (same name) gives every id column the uuid type instead, and on MySQL/MariaDB builds the
 * one-active guarantee over (workflow_id, a generated marker): see createOneActiveIndex.
 * @publicApi
 */
export class CreateGenevaDriveTables1730000000000 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'CreateGenevaDriveTables1730000000000';

  /** The key type of the tables (set by the subclasses of `genevaDriveMigrations`). */
  protected readonly primaryKey: PrimaryKeyType = 'bigint';

  async up(queryRunner: QueryRunner): Promise<void> {
    const dialect = dialectOf(queryRunner);
    const t = columnTypes(dialect, this.primaryKey);

    await queryRunner.createTable(
      new Table({
        name: WORKFLOWS,
        columns: [
          t.id(),
          // Identity strings compare exactly on every database (IDENTIFIER in column-types.ts).
          t.identifier('type', 255),
          t.identifier('hero_type', 255),
          // 191 characters: the classic utf8mb4 limit of an indexable varchar (767 bytes / 4).
          t.identifier('hero_id', 191),
          { name: 'state', type: 'varchar', length: '32', isNullable: false, default: `'ready'` },
          t.identifier('current_step_name', 255, { nullable: true }),
          t.identifier('next_step_name', 255, { nullable: true }),
          t.boolean('allow_multiple', false),
          t.datetime('started_at', { nullable: true }),
          t.datetime('transitioned_at', { nullable: true }),
          t.datetime('finished_at', { nullable: true }),
          t.datetime('created_at'),
          t.datetime('updated_at'),
        ],
        indices: [
          { name: 'geneva_drive_workflows_type', columnNames: ['type'] },
          { name: 'geneva_drive_workflows_state', columnNames: ['state'] },
          { name: 'geneva_drive_workflows_hero', columnNames: ['hero_type', 'hero_id'] },
        ],
      }),
    );
    await this.createUniqueOngoingIndex(queryRunner, dialect);

    await queryRunner.createTable(
      new Table({
        name: EXECUTIONS,
        columns: [
          t.id(),
          t.idReference('workflow_id'),
          t.identifier('step_name', 255),
          { name: 'state', type: 'varchar', length: '32', isNullable: false, default: `'scheduled'` },
          { name: 'outcome', type: 'varchar', length: '32', isNullable: true },
          t.datetime('scheduled_for'),
          t.datetime('started_at', { nullable: true }),
          t.datetime('completed_at', { nullable: true }),
          t.datetime('failed_at', { nullable: true }),
          t.datetime('canceled_at', { nullable: true }),
          t.datetime('skipped_at', { nullable: true }),
          t.datetime('finished_at', { nullable: true }),
          { name: 'error_class_name', type: 'varchar', length: '255', isNullable: true },
          { name: 'error_message', type: 'text', isNullable: true },
          { name: 'error_backtrace', type: 'text', isNullable: true },
          { name: 'job_id', type: 'varchar', length: '255', isNullable: true },
          t.json('metadata'),
          // `cursor` is a reserved word on MySQL: the Table API quotes every identifier.
          t.json('cursor'),
          // Points at the execution a resumable step continues; no foreign key (audit link only).
          t.idReference('continues_from_id', { nullable: true }),
          t.datetime('created_at'),
          t.datetime('updated_at'),
        ],
        indices: [
          { name: 'geneva_drive_step_executions_workflow_created', columnNames: ['workflow_id', 'created_at'] },
          { name: 'geneva_drive_step_executions_workflow_state', columnNames: ['workflow_id', 'state'] },
          { name: 'geneva_drive_step_executions_scheduled', columnNames: ['state', 'scheduled_for'] },
          { name: 'geneva_drive_step_executions_finished_at', columnNames: ['finished_at'] },
          { name: 'geneva_drive_step_executions_continues_from', columnNames: ['continues_from_id'] },
        ],
        // Declared with the table: on SQLite adding a foreign key later rebuilds the whole table.
        foreignKeys: [
          {
            name: 'geneva_drive_step_executions_workflow_fk',
            columnNames: ['workflow_id'],
            referencedTableName: WORKFLOWS,
            referencedColumnNames: ['id'],
            onDelete: 'CASCADE',
          },
        ],
      }),
    );
    await this.createOneActiveIndex(queryRunner, dialect);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    // Raw SQL, not dropTable(): on MySQL TypeORM introspects a table before dropping it, and its
    // introspection of a generated column it did not create fails (MYSQL_NOTE at the top of this file).
    // Child first; indexes, the foreign key and the generated columns go with the tables.
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    await queryRunner.query(`DROP TABLE IF EXISTS ${q(EXECUTIONS)}`);
    await queryRunner.query(`DROP TABLE IF EXISTS ${q(WORKFLOWS)}`);
  }

  private async createUniqueOngoingIndex(queryRunner: QueryRunner, dialect: Dialect): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (dialect !== 'mysql') {
      await queryRunner.query(
        `CREATE UNIQUE INDEX ${q('geneva_drive_workflows_unique_ongoing')} ON ${q(WORKFLOWS)} ` +
          `(${q('type')}, ${q('hero_type')}, ${q('hero_id')}) WHERE ${ongoingCondition(queryRunner, dialect)}`,
      );
      return;
    }
    await queryRunner.query(`ALTER TABLE ${q(WORKFLOWS)} ADD COLUMN ${q('ongoing_unique_key')} ${ongoingUniqueKeyDefinition(queryRunner)}`);
    await queryRunner.query(
      `CREATE UNIQUE INDEX ${q('geneva_drive_workflows_unique_ongoing')} ON ${q(WORKFLOWS)} (${q('ongoing_unique_key')})`,
    );
  }

  private async createOneActiveIndex(queryRunner: QueryRunner, dialect: Dialect): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    const active = `${q('state')} IN ${ACTIVE_EXECUTION_STATES_SQL}`;
    if (dialect !== 'mysql') {
      await queryRunner.query(
        `CREATE UNIQUE INDEX ${q('geneva_drive_step_executions_one_active')} ON ${q(EXECUTIONS)} (${q('workflow_id')}) WHERE ${active}`,
      );
      return;
    }
    if (this.primaryKey === 'uuid') {
      // MariaDB refuses a generated column whose expression reads a CHAR column (its value would
      // depend on the PAD_CHAR_TO_FULL_LENGTH sql_mode), so the uuid key is not copied into one.
      // Instead a marker (1 while active, NULL otherwise) completes a composite unique index: rows
      // with a NULL part never collide, so each workflow_id has at most one active row. It also keeps
      // `workflow_id` out of the generated column's base columns, which spares the uuid tables the
      // MySQL 8 restriction on CASCADE foreign keys described below.
      await queryRunner.query(
        `ALTER TABLE ${q(EXECUTIONS)} ADD COLUMN ${q('active_marker')} TINYINT GENERATED ALWAYS AS (` +
          `CASE WHEN ${active} THEN 1 ELSE NULL END) STORED`,
      );
      await queryRunner.query(
        `CREATE UNIQUE INDEX ${q('geneva_drive_step_executions_one_active')} ON ${q(EXECUTIONS)} (${q('workflow_id')}, ${q('active_marker')})`,
      );
      return;
    }
    // A bigint is at most 20 characters; VARCHAR(40) leaves room should the id type ever widen.
    // Verified on MariaDB 10.11, which accepts this column next to the ON DELETE CASCADE foreign key
    // on its base column `workflow_id`. Oracle MySQL 8 documents that combination as refused for
    // STORED generated columns ("A foreign key constraint on the base column of a stored generated
    // column cannot use CASCADE ... as ON DELETE"): check there before claiming MySQL 8 support.
    await queryRunner.query(
      `ALTER TABLE ${q(EXECUTIONS)} ADD COLUMN ${q('active_unique_key')} VARCHAR(40) GENERATED ALWAYS AS (` +
        `CASE WHEN ${active} THEN CAST(${q('workflow_id')} AS CHAR) ELSE NULL END) STORED`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX ${q('geneva_drive_step_executions_one_active')} ON ${q(EXECUTIONS)} (${q('active_unique_key')})`,
    );
  }
}
