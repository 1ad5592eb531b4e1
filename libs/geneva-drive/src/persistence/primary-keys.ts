import { randomFillSync } from 'node:crypto';
import type { DataSource, EntityTarget, QueryRunner } from 'typeorm';

/**
 * The key type of geneva-drive's three tables. The migrations choose it
 * (`genevaDriveMigrations({ primaryKey })`, bigint by default); the engine reads it back from the
 * schema at boot, so there is no module option that could disagree with the tables.
 * @publicApi
 */
export type PrimaryKeyType = 'bigint' | 'uuid';

/**
 * The type of `table.id` as the database reports it: `'bigint'` for an integer column, `'uuid'` for
 * a uuid or character column (PostgreSQL `uuid`, MySQL/MariaDB `char(36)` or MariaDB's `uuid`,
 * SQLite `varchar(36)`), null when the table does not exist. Reads the catalog (information_schema,
 * PRAGMA) directly: on MySQL `QueryRunner.getTable` fails on these tables (MYSQL_NOTE in the first
 * migration). Any other driver reports null (nothing to detect: the entities' bigint default stays).
 */
export async function detectPrimaryKeyType(queryRunner: QueryRunner, table: string): Promise<PrimaryKeyType | null> {
  const driver = queryRunner.connection.driver;
  const { database, schema, tableName } = driver.parseTableName(table);
  let rows: Array<{ type: string }>;
  switch (driver.options.type) {
    case 'postgres':
      rows = await queryRunner.query(
        `SELECT data_type AS "type" FROM information_schema.columns ` +
          `WHERE table_schema = ${schema ? '$2' : 'current_schema()'} AND table_name = $1 AND column_name = 'id'`,
        schema ? [tableName, schema] : [tableName],
      );
      break;
    case 'mysql':
    case 'mariadb':
      rows = await queryRunner.query(
        'SELECT `DATA_TYPE` AS `type` FROM `INFORMATION_SCHEMA`.`COLUMNS` ' +
          `WHERE \`TABLE_SCHEMA\` = ${database ? '?' : 'DATABASE()'} AND \`TABLE_NAME\` = ? AND \`COLUMN_NAME\` = 'id'`,
        database ? [database, tableName] : [tableName],
      );
      break;
    case 'better-sqlite3':
    case 'sqljs': {
      const columns: Array<{ name: string; type: string }> = await queryRunner.query(`PRAGMA table_info(${driver.escape(tableName)})`);
      rows = columns.filter((column) => column.name === 'id');
      break;
    }
    default:
      return null;
  }
  if (rows.length === 0) return null;
  const type = String(rows[0].type).toLowerCase();
  if (type.includes('int')) return 'bigint';
  if (type.includes('uuid') || type.includes('char') || type.includes('text')) return 'uuid';
  throw new Error(`geneva-drive: ${table}.id has type "${type}"; the tables need integer (bigint) or uuid keys, as the migrations create them`);
}

/** How the id-typed columns are declared per driver once the tables use uuid keys (what the uuid migrations create). */
function uuidColumnShape(dataSource: DataSource): { type: 'uuid' | 'char' | 'varchar'; length: string } {
  const type = dataSource.driver.options.type;
  if (type === 'postgres') return { type: 'uuid', length: '' };
  return { type: type === 'mysql' || type === 'mariadb' ? 'char' : 'varchar', length: '36' };
}

/**
 * Switches geneva-drive's entity metadata on this DataSource to uuid keys: the primary column of
 * each table becomes a uuid-generated column (TypeORM then sends the value the engine assigns, and
 * would fall back to its own v4 — in JS on MySQL/SQLite, the column default on PostgreSQL — if none
 * were given), and the columns that hold ids (`workflowId`, `continuesFromId`, `signalId`) get the
 * uuid column type. The decorators declare bigint, the default; metadata belongs to one DataSource,
 * so other DataSources are not affected. The values were strings in TypeScript already.
 */
export function useUuidKeys(dataSource: DataSource, idColumns: ReadonlyArray<{ entity: EntityTarget<unknown>; properties: string[] }>): void {
  const shape = uuidColumnShape(dataSource);
  for (const { entity, properties } of idColumns) {
    const metadata = dataSource.getMetadata(entity);
    for (const property of ['id', ...properties]) {
      const column = metadata.findColumnWithPropertyName(property);
      if (!column) continue;
      column.type = shape.type;
      column.length = shape.length;
      if (column.isPrimary) {
        column.isGenerated = true;
        column.generationStrategy = 'uuid';
      }
    }
    metadata.hasUUIDGeneratedColumns = true;
  }
}

/*
 * UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit counter in `rand_a` (RFC 9562 §6.2,
 * method 1), then 62 random bits. The engine orders every history by (created_at, id), and created_at
 * has millisecond resolution: on a fast database two executions of one chain, or two signals sent in
 * one transaction, are often created in the same millisecond, and the id breaks the tie. Autoincrement
 * ids break it in creation order; random (v4) uuids would break it at random — misordering execution
 * histories, reattempt counts, "the latest execution of a step" in signal settlement and the oldest-
 * first choice of a buffered signal. These ids increase strictly within a process (the counter runs
 * on within a millisecond and across a clock that stands still or steps back), and their text form
 * sorts like their bytes, so PostgreSQL's uuid ordering, a binary-collated char(36) on MySQL and
 * SQLite's text comparison all agree with creation order. Rows created by different processes in the
 * same millisecond have no defined order between them — just as the created_at of rows written by
 * hosts with different clocks.
 */
let lastMs = -1;
let counter = 0;
const COUNTER_MAX = 0xfff;

/** A new time-ordered uuid (v7), strictly greater than every one this process generated before. */
export function uuidv7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    counter = 0;
  } else if (++counter > COUNTER_MAX) {
    lastMs++; // 4096 ids in one millisecond: borrow the next one
    counter = 0;
  }
  const bytes = randomFillSync(Buffer.alloc(16));
  bytes.writeUIntBE(lastMs, 0, 6);
  bytes[6] = 0x70 | (counter >> 8); // version 7
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | (bytes[8] & 0x3f); // RFC 9562 variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
