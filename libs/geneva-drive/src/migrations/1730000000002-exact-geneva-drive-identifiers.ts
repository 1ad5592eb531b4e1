import type { MigrationInterface, QueryRunner } from 'typeorm';
import { ongoingUniqueKeyDefinition } from './1730000000000-create-geneva-drive-tables.js';
import { dialectOf, mysqlIdentifierType } from './column-types.js';

const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';
const SIGNALS = 'geneva_drive_signals';

/** An identity string column: its name, length in characters and nullability. */
interface IdentifierColumn {
  name: string;
  length: number;
  nullable: boolean;
  /** The column's type and collation in the first release, when not the table's default collation. */
  released?: string;
}

/** The identity string columns, per table, as the first release created them on MySQL/MariaDB. */
const IDENTIFIER_COLUMNS: Record<string, IdentifierColumn[]> = {
  [WORKFLOWS]: [
    { name: 'type', length: 255, nullable: false },
    { name: 'hero_type', length: 255, nullable: false },
    { name: 'hero_id', length: 191, nullable: false, released: 'VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin' },
    { name: 'current_step_name', length: 255, nullable: true },
    { name: 'next_step_name', length: 255, nullable: true },
  ],
  [EXECUTIONS]: [{ name: 'step_name', length: 255, nullable: false }],
  [SIGNALS]: [
    { name: 'name', length: 255, nullable: false },
    { name: 'idempotency_key', length: 255, nullable: true },
  ],
};

/** The first release's `ongoing_unique_key`, restored by `down`. */
const RELEASED_ONGOING_UNIQUE_KEY_TYPE = 'VARCHAR(767) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin';

/**
 * Identity strings compare exactly on MySQL/MariaDB, as on PostgreSQL and SQLite: the workflow
 * type, hero type and hero id, the step names and the signal name and idempotency key become
 * VARBINARY (IDENTIFIER in column-types.ts), and `ongoing_unique_key` is recomputed over them. Before,
 * they had the table's default collation (case- and accent-insensitive, PAD SPACE), so keys, names
 * and ids that differ only so were merged: a redelivery where there was a new event. The data is
 * kept byte for byte (utf8mb4 text becomes its UTF-8 bytes), and nothing can collide, as exact
 * comparison only tells more values apart. Each table is changed by one ALTER TABLE (a table copy).
 * The tables the create migrations make today have these columns already: then it rewrites them
 * unchanged. The signals table is changed when it exists (its migration is optional and, run later,
 * creates exact columns itself). A no-op on PostgreSQL and SQLite, which compare exactly already.
 * The same class serves both key types: none of these columns depends on it.
 * @publicApi
 */
export class ExactGenevaDriveIdentifiers1730000000002 implements MigrationInterface {
  /** Explicit so a minifier renaming the class cannot change the migration's identity. */
  name = 'ExactGenevaDriveIdentifiers1730000000002';

  async up(queryRunner: QueryRunner): Promise<void> {
    if (dialectOf(queryRunner) !== 'mysql') return;
    for (const table of [WORKFLOWS, EXECUTIONS, SIGNALS]) {
      await this.alter(queryRunner, table, (column) => mysqlIdentifierType(column.length), ongoingUniqueKeyDefinition(queryRunner));
    }
  }

  /**
   * Back to the first release's collations. Signals first: its dedup index is the only unique index
   * the old collation can make fail (two keys that now differ only by case, say) — the ALTER then
   * stops with a duplicate-key error before any table is changed. Signals the engine kept apart are
   * merged again by the old collation; nothing else is lost.
   */
  async down(queryRunner: QueryRunner): Promise<void> {
    if (dialectOf(queryRunner) !== 'mysql') return;
    for (const table of [SIGNALS, EXECUTIONS, WORKFLOWS]) {
      await this.alter(
        queryRunner,
        table,
        (column) => column.released ?? `VARCHAR(${column.length})`,
        ongoingUniqueKeyDefinition(queryRunner, RELEASED_ONGOING_UNIQUE_KEY_TYPE),
      );
    }
  }

  /** One ALTER TABLE giving the table's identifier columns `typeOf(column)`; the workflows table's generated key is rewritten with them. */
  private async alter(queryRunner: QueryRunner, table: string, typeOf: (column: IdentifierColumn) => string, ongoingUniqueKey: string): Promise<void> {
    if (!(await queryRunner.hasTable(table))) return;
    const q = (identifier: string) => queryRunner.dataSource.driver.escape(identifier);
    const changes = IDENTIFIER_COLUMNS[table].map((column) => `MODIFY ${q(column.name)} ${typeOf(column)} ${column.nullable ? 'NULL' : 'NOT NULL'}`);
    // The generated column is computed from the changed columns, so it is redefined in the same statement.
    if (table === WORKFLOWS) changes.push(`MODIFY ${q('ongoing_unique_key')} ${ongoingUniqueKey}`);
    await queryRunner.query(`ALTER TABLE ${q(table)} ${changes.join(', ')}`);
  }
}
