import { TableColumn, type MigrationInterface, type QueryRunner, type TableColumnOptions } from 'typeorm';
import { detectPrimaryKeyType } from './primary-keys.js';
import { columnTypes, dialectOf } from './column-types.js';
import { indexCondition } from './partial-indexes.js';

const WORKFLOWS = 'geneva_drive_workflows';
/** One start of a child per (parent, step that started it, key): a step re-run after a crash cannot start it twice. */
const CHILD_KEY_INDEX = 'geneva_drive_workflows_child_key';
/** A parent's children, page by page in id order. */
const PARENT_INDEX = 'geneva_drive_workflows_parent';

/**
 * Child workflows (`this.startChild`): on `geneva_drive_workflows`, `parent_id` (no foreign key: an
 * audit link, like `signal_id`, and adding one to an existing SQLite table rebuilds it),
 * `parent_step_name` (the parent's step that started the child), `child_key`, `on_parent_cancel`,
 * `has_children` (set on a parent once it started children: a workflow without children costs no
 * statement to cancel) and `result` (`this.setResult`, encoded like a signal payload); a unique index
 * on (parent_id, parent_step_name, child_key) and one on (parent_id, id). Nullable columns without
 * defaults: a plain ALTER TABLE everywhere. Until it runs, everything but child workflows keeps
 * working. Reads the key type from the table: the same class serves both migration sets.
 * @publicApi
 */
export class AddGenevaDriveChildWorkflows1730000000006 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'AddGenevaDriveChildWorkflows1730000000006';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (await queryRunner.hasColumn(WORKFLOWS, 'parent_id')) return;
    const dialect = dialectOf(queryRunner);
    const t = columnTypes(dialect, (await detectPrimaryKeyType(queryRunner, WORKFLOWS)) ?? 'bigint');
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    const columns: TableColumnOptions[] = [
      t.idReference('parent_id', { nullable: true }),
      t.identifier('parent_step_name', 255, { nullable: true }),
      t.identifier('child_key', 255, { nullable: true }),
      { name: 'on_parent_cancel', type: 'varchar', length: '16', isNullable: true },
      { name: 'has_children', type: 'boolean', isNullable: true },
      t.json('result'),
    ];
    // Raw SQL, as in the signals migration: TypeORM would rebuild the SQLite table and cannot
    // introspect the MySQL one (MYSQL_NOTE in the create migration).
    for (const column of columns) await queryRunner.query(`ALTER TABLE ${q(WORKFLOWS)} ADD COLUMN ${q(column.name)} ${fullType(queryRunner, column)} NULL`);
    // NULLs never collide: workflows started by start() are outside the unique index. MySQL key size:
    // 8 + 2 x (1020 + 2) = 2052 bytes of VARBINARY(1020) (2080 with uuid keys), under InnoDB's 3072.
    await queryRunner.query(`CREATE UNIQUE INDEX ${q(CHILD_KEY_INDEX)} ON ${q(WORKFLOWS)} (${q('parent_id')}, ${q('parent_step_name')}, ${q('child_key')})${indexCondition(queryRunner, CHILD_KEY_INDEX)}`);
    await queryRunner.query(`CREATE INDEX ${q(PARENT_INDEX)} ON ${q(WORKFLOWS)} (${q('parent_id')}, ${q('id')})${indexCondition(queryRunner, PARENT_INDEX)}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (!(await queryRunner.hasColumn(WORKFLOWS, 'parent_id'))) return;
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    // SQLite refuses to drop an indexed column; MySQL needs the table named.
    for (const index of [PARENT_INDEX, CHILD_KEY_INDEX]) {
      if (dialectOf(queryRunner) === 'mysql') await queryRunner.query(`DROP INDEX ${q(index)} ON ${q(WORKFLOWS)}`);
      else await queryRunner.query(`DROP INDEX IF EXISTS ${q(index)}`);
    }
    for (const column of ['result', 'has_children', 'on_parent_cancel', 'child_key', 'parent_step_name', 'parent_id']) {
      await queryRunner.query(`ALTER TABLE ${q(WORKFLOWS)} DROP COLUMN ${q(column)}`);
    }
  }
}

/** The column's type as the driver renders it, with the character set and collation it may declare (MySQL's uuid columns). */
function fullType(queryRunner: QueryRunner, column: TableColumnOptions): string {
  let type = queryRunner.dataSource.driver.createFullType(new TableColumn(column));
  if (column.charset) type += ` CHARACTER SET ${column.charset}`;
  if (column.collation) type += ` COLLATE ${column.collation}`;
  return type;
}
