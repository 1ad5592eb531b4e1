import type { MigrationInterface, QueryRunner } from 'typeorm';
import { dialectOf } from './column-types.js';

const WORKFLOWS = 'geneva_drive_workflows';

/** The indexes this migration adds, with their columns. */
const INDEXES: ReadonlyArray<{ name: string; columns: string[] }> = [
  // The list filtered by type and state, newest first: one range of this index read backwards, in
  // id order, however many rows match (the single-column indexes made MySQL/MariaDB intersect both
  // and sort every matching row, PostgreSQL scan the table for a pair whose rows are old).
  { name: 'geneva_drive_workflows_type_state', columns: ['type', 'state', 'id'] },
  // The list's search by hero id alone: the hero index leads with hero_type, so without this one the
  // search read the whole table.
  { name: 'geneva_drive_workflows_hero_id', columns: ['hero_id'] },
];

/**
 * Indexes for the dashboard's and the CLI's workflow list: `(type, state, id)` and `(hero_id)` on
 * `geneva_drive_workflows`. Adds no column and changes no row; building them reads the table once
 * (MySQL/MariaDB and SQLite build them without blocking reads; PostgreSQL blocks writes to the
 * table while it builds). Raw SQL on every database: TypeORM's MySQL `createIndex` introspects the
 * table and fails on its generated column (MYSQL_NOTE in the create migration). The same class
 * serves both key types.
 * @publicApi
 */
export class AddGenevaDriveListIndexes1730000000003 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveListIndexes1730000000003';

  async up(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    for (const index of INDEXES) {
      await queryRunner.query(`CREATE INDEX ${q(index.name)} ON ${q(WORKFLOWS)} (${index.columns.map(q).join(', ')})`);
    }
    // SQLite plans with the statistics of its last ANALYZE, if it ever ran: an index without any
    // looks more selective than the table's analysed ones, and the planner would sort a type's
    // rows through (type, state, id) instead of reading them in id order through (type).
    if (dialectOf(queryRunner) === 'sqlite' && (await queryRunner.query(`SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'`)).length > 0) {
      for (const index of INDEXES) await queryRunner.query(`ANALYZE ${q(index.name)}`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    const on = dialectOf(queryRunner) === 'mysql' ? ` ON ${q(WORKFLOWS)}` : '';
    for (const index of [...INDEXES].reverse()) await queryRunner.query(`DROP INDEX ${q(index.name)}${on}`);
  }
}
