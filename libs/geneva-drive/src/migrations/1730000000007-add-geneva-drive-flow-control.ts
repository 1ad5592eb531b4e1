import { Table, TableColumn, type MigrationInterface, type QueryRunner, type TableColumnOptions } from 'typeorm';
import { columnTypes, dialectOf } from './column-types.js';

const EXECUTIONS = 'geneva_drive_step_executions';
const FLOW_KEYS = 'geneva_drive_flow_keys';
const FLOW_KEY = 'flow_key';

/**
 * Flow control (concurrency keys): the table `geneva_drive_flow_keys`, one row per key in use —
 * `flow_key` (the key, compared exactly), `holding` (how many executions hold a slot of it),
 * `waiters` (the executions waiting for one, a JSON array the engine writes), `created_at`,
 * `updated_at` — and `flow_key` on step executions (the key an execution holds or waits for;
 * nullable, no default: a plain ALTER TABLE everywhere). Until it runs, everything but steps with a
 * concurrency key keeps working. Nothing in it holds a geneva-drive id: the same class serves both
 * migration sets.
 * @publicApi
 */
export class AddGenevaDriveFlowControl1730000000007 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveFlowControl1730000000007';

  async up(queryRunner: QueryRunner): Promise<void> {
    const dialect = dialectOf(queryRunner);
    const t = columnTypes(dialect);
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    // Each half checked on its own: MySQL/MariaDB commit every DDL statement, so a run that stopped
    // between them left the table without the column, and running again finishes it.
    if (!(await queryRunner.hasTable(FLOW_KEYS))) {
      // A new table without generated columns: the Table API works on MySQL too (unlike ALTERs of the
      // two first tables, MYSQL_NOTE in the create migration).
      await queryRunner.createTable(
        new Table({
          name: FLOW_KEYS,
          columns: [
            // At most 255 characters, compared exactly (IDENTIFIER in column-types.ts): VARBINARY(1020)
            // on MySQL, well under InnoDB's 3072-byte key limit.
            { ...t.identifier(FLOW_KEY, 255), isPrimary: true },
            { name: 'holding', type: 'integer', isNullable: false, default: '0' },
            // No default: MySQL refuses one on a text column, and the engine always writes it. longtext
            // on MySQL, whose text holds 64 KB only: a key with thousands of waiters must still fit.
            { name: 'waiters', type: dialect === 'mysql' ? 'longtext' : 'text', isNullable: false },
            t.datetime('created_at'),
            t.datetime('updated_at'),
          ],
        }),
      );
    }
    if (!(await queryRunner.hasColumn(EXECUTIONS, FLOW_KEY))) {
      // Raw SQL, as in the signals migration: TypeORM would rebuild the SQLite table and cannot
      // introspect the MySQL one (MYSQL_NOTE in the create migration).
      const column = t.identifier(FLOW_KEY, 255, { nullable: true });
      await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} ADD COLUMN ${q(FLOW_KEY)} ${fullType(queryRunner, column)} NULL`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    if (await queryRunner.hasColumn(EXECUTIONS, FLOW_KEY)) await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} DROP COLUMN ${q(FLOW_KEY)}`);
    await queryRunner.query(`DROP TABLE IF EXISTS ${q(FLOW_KEYS)}`);
  }
}

/** The column's type as the driver renders it. */
function fullType(queryRunner: QueryRunner, column: TableColumnOptions): string {
  return queryRunner.dataSource.driver.createFullType(new TableColumn(column));
}
