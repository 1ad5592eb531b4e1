import { randomFillSync } from 'node:crypto';
import type { DataSource, EntityTarget, QueryRunner } from 'typeorm';
import { tableColumns } from './schema-catalog.js';

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
 * SQLite `varchar(36)`), null when the table does not exist.
 */
export async function detectPrimaryKeyType(queryRunner: QueryRunner, table: string): Promise<PrimaryKeyType | null> {
  return keyTypeOf(table, await tableColumns(queryRunner, table));
}

/** The key type of a table given its columns ({@link tableColumns}); null when it does not exist or has no id column. */
export function keyTypeOf(table: string, columns: Map<string, string> | null): PrimaryKeyType | null {
  const type = columns?.get('id');
  if (type === undefined) return null;
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

const BIGINT_MAX = 9_223_372_036_854_775_807n;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The canonical text of a key given by a caller (a workflow id, a hero's id), or null when the value
 * cannot be a key of that type — so that a malformed id is "not found" on every database instead of
 * a cast error on PostgreSQL, a numeric prefix match on MySQL (`'7abc' = 7`) or nothing on SQLite.
 * bigint keys: a non-negative integer in range (`'007'` is `'7'`); uuid keys: the 8-4-4-4-12 hex form,
 * kept as given (rows inserted by hand on MySQL or SQLite may be uppercase); `'any'`: any non-empty
 * string or finite number.
 */
export function canonicalKey(value: unknown, type: PrimaryKeyType | 'any'): string | null {
  if (typeof value === 'number') value = Number.isFinite(value) ? String(value) : '';
  if (typeof value !== 'string' || value === '') return null;
  switch (type) {
    case 'bigint':
      return /^\d{1,19}$/.test(value) && BigInt(value) <= BIGINT_MAX ? String(BigInt(value)) : null;
    case 'uuid':
      return UUID_TEXT.test(value) ? value : null;
    default:
      return value;
  }
}
