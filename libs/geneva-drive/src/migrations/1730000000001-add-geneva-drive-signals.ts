import { Table, TableColumn, TableIndex, type MigrationInterface, type QueryRunner, type TableColumnOptions } from 'typeorm';
import { columnTypes, dialectOf } from './column-types.js';

const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';
const SIGNALS = 'geneva_drive_signals';
const SIGNAL_ID_INDEX = 'geneva_drive_step_executions_signal_id';

/**
 * Signals: the `geneva_drive_signals` table, plus the attachment pin (`signal_id`) and `waiting_since`
 * on step executions. Until this migration runs, everything but `waitFor` steps keeps working.
 * @publicApi
 */
export class AddGenevaDriveSignals1730000000001 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveSignals1730000000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    const dialect = dialectOf(queryRunner);
    const t = columnTypes(dialect);

    await queryRunner.createTable(
      new Table({
        name: SIGNALS,
        columns: [
          t.id(),
          { name: 'workflow_id', type: 'bigint', isNullable: false },
          { name: 'name', type: 'varchar', length: '255', isNullable: false },
          { name: 'idempotency_key', type: 'varchar', length: '255', isNullable: true },
          { name: 'state', type: 'varchar', length: '16', isNullable: false, default: `'pending'` },
          t.json('payload'),
          // Counters (attachments and clean resolutions), not flags.
          { name: 'claimed', type: 'bigint', isNullable: false, default: '0' },
          { name: 'consumed', type: 'bigint', isNullable: false, default: '0' },
          t.datetime('claimed_at', { nullable: true }),
          t.datetime('consumed_at', { nullable: true }),
          t.datetime('created_at'),
          t.datetime('updated_at'),
        ],
        indices: [
          // Redelivery dedup. NULL keys never collide on any of the three databases, so signals sent
          // without a key are never deduplicated. MySQL utf8mb4 key size: 8 + 2 x (255 x 4 + 2) = 2052
          // bytes, under InnoDB's 3072.
          {
            name: 'geneva_drive_signals_dedup',
            columnNames: ['workflow_id', 'name', 'idempotency_key'],
            isUnique: true,
          },
          { name: 'geneva_drive_signals_workflow_state', columnNames: ['workflow_id', 'state'] },
          { name: 'geneva_drive_signals_workflow_created', columnNames: ['workflow_id', 'created_at'] },
        ],
        foreignKeys: [
          {
            name: 'geneva_drive_signals_workflow_fk',
            columnNames: ['workflow_id'],
            referencedTableName: WORKFLOWS,
            referencedColumnNames: ['id'],
            onDelete: 'CASCADE',
          },
        ],
      }),
    );

    // `signal_id` has no foreign key: one signal is pinned by many executions, the pin is an audit
    // link, and on SQLite adding a foreign key would mean rebuilding the executions table.
    if (!(await queryRunner.hasColumn(EXECUTIONS, 'signal_id'))) {
      await this.addColumn(queryRunner, { name: 'signal_id', type: 'bigint', isNullable: true });
      await queryRunner.createIndex(EXECUTIONS, new TableIndex({ name: SIGNAL_ID_INDEX, columnNames: ['signal_id'] }));
    }
    if (!(await queryRunner.hasColumn(EXECUTIONS, 'waiting_since'))) {
      await this.addColumn(queryRunner, t.datetime('waiting_since', { nullable: true }));
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (dialectOf(queryRunner) === 'sqlite') {
      // Native DROP COLUMN (SQLite >= 3.35) instead of TypeORM's table rebuild; an indexed column
      // cannot be dropped, so its index goes first.
      await queryRunner.query(`DROP INDEX IF EXISTS ${q(SIGNAL_ID_INDEX)}`);
      for (const column of ['signal_id', 'waiting_since']) {
        if (await queryRunner.hasColumn(EXECUTIONS, column)) {
          await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} DROP COLUMN ${q(column)}`);
        }
      }
    } else {
      // Dropping a column drops its index on PostgreSQL and MySQL.
      await queryRunner.dropColumns(EXECUTIONS, ['signal_id', 'waiting_since'], true);
    }
    await queryRunner.dropTable(SIGNALS, true);
  }

  /**
   * Adds a nullable column to the executions table. On SQLite TypeORM's `addColumn` copies the whole
   * table into a new one (slow on a big audit table, and it re-creates our partial indexes from its
   * own parse of them); a nullable column without a default is a plain ALTER TABLE there.
   */
  private async addColumn(queryRunner: QueryRunner, column: TableColumnOptions): Promise<void> {
    if (dialectOf(queryRunner) !== 'sqlite') {
      await queryRunner.addColumn(EXECUTIONS, new TableColumn(column));
      return;
    }
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} ADD COLUMN ${q(column.name)} ${column.type}`);
  }
}
