import { TableColumn, type MigrationInterface, type QueryRunner } from 'typeorm';
import { columnTypes, dialectOf } from './column-types.js';
import { indexCondition } from './partial-indexes.js';

const EXECUTIONS = 'geneva_drive_step_executions';
const TIMEOUT_COLUMN = 'timeout_at';
/** Housekeeping's sweep of lost deadlines reads `state = 'waiting' AND timeout_at < cutoff` through it. */
const TIMEOUT_INDEX = 'geneva_drive_step_executions_state_timeout';

/**
 * Wait deadlines: `timeout_at` on step executions (when a parked `waitFor` step with a `timeout`
 * gives up), indexed with the state. Until this migration runs, everything but steps with a `timeout`
 * keeps working. Independent of the key type: the same class serves both migration sets.
 * @publicApi
 */
export class AddGenevaDriveWaitDeadlines1730000000004 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveWaitDeadlines1730000000004';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (await queryRunner.hasColumn(EXECUTIONS, TIMEOUT_COLUMN)) return;
    const driver = queryRunner.dataSource.driver;
    const q = (identifier: string) => driver.escape(identifier);
    // Raw SQL, as in the signals migration: a nullable column without a default is a plain ALTER TABLE
    // everywhere (TypeORM would rebuild the SQLite table and cannot introspect the MySQL one).
    const type = driver.createFullType(new TableColumn(columnTypes(dialectOf(queryRunner), 'bigint').datetime(TIMEOUT_COLUMN, { nullable: true })));
    await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} ADD COLUMN ${q(TIMEOUT_COLUMN)} ${type} NULL`);
    await queryRunner.query(`CREATE INDEX ${q(TIMEOUT_INDEX)} ON ${q(EXECUTIONS)} (${q('state')}, ${q(TIMEOUT_COLUMN)})${indexCondition(queryRunner, TIMEOUT_INDEX)}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (!(await queryRunner.hasColumn(EXECUTIONS, TIMEOUT_COLUMN))) return;
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    // SQLite refuses to drop an indexed column; MySQL needs the table named.
    if (dialectOf(queryRunner) === 'mysql') await queryRunner.query(`DROP INDEX ${q(TIMEOUT_INDEX)} ON ${q(EXECUTIONS)}`);
    else await queryRunner.query(`DROP INDEX IF EXISTS ${q(TIMEOUT_INDEX)}`);
    await queryRunner.query(`ALTER TABLE ${q(EXECUTIONS)} DROP COLUMN ${q(TIMEOUT_COLUMN)}`);
  }
}
