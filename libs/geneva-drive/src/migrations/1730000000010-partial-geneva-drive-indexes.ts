import type { MigrationInterface, QueryRunner } from 'typeorm';
import { dialectOf } from './column-types.js';
import { COVERED_INDEXES, indexCondition, PARTIAL_INDEXES, type PartialIndex } from './partial-indexes.js';

/**
 * PostgreSQL: fewer index entries per write on the hot path. An update that changes an indexed
 * column (every state change does) writes an entry into every index of the row whose condition it
 * meets; an execution had ten, and its `finished_at`, `continues_from_id`, `signal_id`, `flow_key`
 * and `timeout_at` are null for most of its life. Seven indexes become partial (the rows where
 * their column is set, partial-indexes.ts) and two that others serve go: a step's start, its end, a
 * park and a wake write four or five entries instead of nine or ten on the executions, and a
 * workflow update without a parent seven instead of nine. Indexes only: no column, no row and no
 * statement's result changes, so the engine of the release before runs on either schema. Building
 * them reads each table once and blocks writes to it while it does (PostgreSQL's CREATE INDEX), as
 * the other index migrations do; reads go on (see rebuild). Nothing on MySQL/MariaDB (no partial
 * indexes) or SQLite. An index whose migration has not run is left to it (it creates it partial).
 * @publicApi
 */
export class PartialGenevaDriveIndexes1730000000010 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'PartialGenevaDriveIndexes1730000000010';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (dialectOf(queryRunner) !== 'postgres') return;
    await rebuild(queryRunner, PARTIAL_INDEXES, (index) => indexCondition(queryRunner, index.name));
    for (const index of COVERED_INDEXES) await queryRunner.query(`DROP INDEX IF EXISTS ${quote(queryRunner, index.name)}`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    if (dialectOf(queryRunner) !== 'postgres') return;
    for (const index of COVERED_INDEXES) {
      if ((await queryRunner.hasTable(index.table)) && !(await exists(queryRunner, index.name))) await queryRunner.query(create(queryRunner, index));
    }
    await rebuild(queryRunner, PARTIAL_INDEXES, () => '');
  }
}

/**
 * Builds each of `indexes` that exists anew (`condition` after its columns) under a name of its own,
 * then drops the old one and gives the new one its name. A build locks its table against writes only
 * (CREATE INDEX takes SHARE), a drop against every access (ACCESS EXCLUSIVE) until the migration's
 * transaction ends: with every build first, the engine's reads go on while the indexes build, and
 * only the drops and renames at the end, which take no time, hold the tables whole.
 */
async function rebuild(queryRunner: QueryRunner, indexes: readonly PartialIndex[], condition: (index: PartialIndex) => string): Promise<void> {
  const present: PartialIndex[] = [];
  for (const index of indexes) if (await exists(queryRunner, index.name)) present.push(index);
  const building = (index: PartialIndex) => `${index.name}_new`;
  for (const index of present) await queryRunner.query(`${create(queryRunner, { ...index, name: building(index) })}${condition(index)}`);
  for (const index of present) {
    await queryRunner.query(`DROP INDEX ${quote(queryRunner, index.name)}`);
    await queryRunner.query(`ALTER INDEX ${quote(queryRunner, building(index))} RENAME TO ${quote(queryRunner, index.name)}`);
  }
}

function quote(queryRunner: QueryRunner, identifier: string): string {
  return queryRunner.dataSource.driver.escape(identifier);
}

function create(queryRunner: QueryRunner, index: Omit<PartialIndex, 'notNull'>): string {
  const q = (identifier: string) => quote(queryRunner, identifier);
  return `CREATE ${index.unique ? 'UNIQUE ' : ''}INDEX ${q(index.name)} ON ${q(index.table)} (${index.columns.map(q).join(', ')})`;
}

/** Whether the index exists where the connection resolves names (its search_path). */
async function exists(queryRunner: QueryRunner, name: string): Promise<boolean> {
  const [row] = (await queryRunner.query('SELECT to_regclass($1) IS NOT NULL AS found', [quote(queryRunner, name)])) as Array<{ found: boolean }>;
  return row.found;
}
