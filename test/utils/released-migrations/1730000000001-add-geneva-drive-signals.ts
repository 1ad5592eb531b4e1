// The migration as the first release shipped it, verbatim but for the import paths (see index.ts).
import { Table, TableColumn, type MigrationInterface, type QueryRunner, type TableColumnOptions } from 'typeorm';
import { detectPrimaryKeyType, type PrimaryKeyType } from '../../../libs/geneva-drive/src/migrations/primary-keys.js';
import { columnTypes, dialectOf } from '../../../libs/geneva-drive/src/migrations/column-types.js';

const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';
const SIGNALS = 'geneva_drive_signals';
const SIGNAL_ID_INDEX = 'geneva_drive_step_executions_signal_id';

/**
 * Signals: the `geneva_drive_signals` table, plus the attachment pin (`signal_id`) and `waiting_since`
 * on step executions. Until this migration runs, everything but `waitFor` steps keeps working.
 * Its id columns have the key type of the migration set, which must be that of the existing tables.
 * @publicApi
 */
export class AddGenevaDriveSignals1730000000001 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveSignals1730000000001';

  /** The key type of the tables (set by the subclasses of `genevaDriveMigrations`). */
  protected readonly primaryKey: PrimaryKeyType = 'bigint';

  async up(queryRunner: QueryRunner): Promise<void> {
    const t = columnTypes(dialectOf(queryRunner), this.primaryKey);
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);

    // A migration set other than the one that created the tables: refuse before changing anything
    // (PostgreSQL and MySQL would refuse the foreign key half way through; SQLite would not notice).
    const existing = await detectPrimaryKeyType(queryRunner, WORKFLOWS);
    if (existing !== null && existing !== this.primaryKey) {
      throw new Error(
        `${this.name} is configured for ${this.primaryKey} keys, but ${WORKFLOWS}.id is ${existing}: ` +
          `list the migration set the tables were created with (${existing === 'uuid' ? "genevaDriveMigrations({ primaryKey: 'uuid' })" : 'GENEVA_DRIVE_MIGRATIONS'})`,
      );
    }

    await queryRunner.createTable(
      new Table({
        name: SIGNALS,
        columns: [
          t.id(),
          t.idReference('workflow_id'),
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
          // bytes, under InnoDB's 3072 (36 + 2044 = 2080 with uuid keys, an ASCII char(36)).
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

    // The executions table is changed with raw SQL: on MySQL TypeORM cannot introspect it (generated
    // column, see the first migration), and on SQLite its addColumn copies the whole table into a new
    // one, where a nullable column without a default is a plain ALTER TABLE.
    // `signal_id` has no foreign key: it is an audit pin shared by many executions, and adding a
    // foreign key to an existing SQLite table means rebuilding it.
    if (!(await queryRunner.hasColumn(EXECUTIONS, 'signal_id'))) {
      await this.addNullableColumn(queryRunner, t.idReference('signal_id', { nullable: true }));
      await queryRunner.query(`CREATE INDEX ${q(SIGNAL_ID_INDEX)} ON ${q(EXECUTIONS)} (${q('signal_id')})`);
    }
    if (!(await queryRunner.hasColumn(EXECUTIONS, 'waiting_since'))) {
      await this.addNullableColumn(queryRunner, t.datetime('waiting_since', { nullable: true }));
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (await queryRunner.hasColumn(EXECUTIONS, 'signal_id')) {
      // SQLite refuses to drop an indexed column; PostgreSQL and MySQL drop the index with it.
      if (dialectOf(queryRunner) === 'sqlite') await queryRunner.query(`DROP INDEX IF EXISTS ${q(SIGNAL_ID_INDEX)}`);
      await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} DROP COLUMN ${q('signal_id')}`);
    }
    if (await queryRunner.hasColumn(EXECUTIONS, 'waiting_since')) {
      await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} DROP COLUMN ${q('waiting_since')}`);
    }
    await queryRunner.dropTable(SIGNALS, true);
  }

  /**
   * `ALTER TABLE … ADD COLUMN` with the column type rendered by the driver (same SQL on all three),
   * plus the character set and collation a column may declare (MySQL's uuid columns).
   */
  private async addNullableColumn(queryRunner: QueryRunner, column: TableColumnOptions): Promise<void> {
    const driver = queryRunner.dataSource.driver;
    let type = driver.createFullType(new TableColumn(column));
    if (column.charset) type += ` CHARACTER SET ${column.charset}`;
    if (column.collation) type += ` COLLATE ${column.collation}`;
    await queryRunner.query(`ALTER TABLE ${driver.escape(EXECUTIONS)} ADD COLUMN ${driver.escape(column.name)} ${type} NULL`);
  }
}
