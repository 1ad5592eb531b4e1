import type { QueryRunner, TableColumnOptions } from 'typeorm';
import type { PrimaryKeyType } from './primary-keys.js';

/**
 * The three SQL dialects the migrations know. MariaDB is `mysql` (same SQL for everything we use);
 * SQLite means the `better-sqlite3` driver (TypeORM 1.x has no plain `sqlite` driver any more).
 */
export type Dialect = 'postgres' | 'mysql' | 'sqlite';

/** The dialect of the database a migration runs against; any other driver is refused loudly. */
export function dialectOf(queryRunner: QueryRunner): Dialect {
  const type = queryRunner.dataSource.driver.options.type;
  switch (type) {
    case 'postgres':
      return 'postgres';
    case 'mysql':
    case 'mariadb':
      return 'mysql';
    case 'better-sqlite3':
      return 'sqlite';
    default:
      throw new Error(`geneva-drive migrations support PostgreSQL, MySQL/MariaDB and SQLite, not "${type}"`);
  }
}

/** Column options without the name (the name is supplied per column). */
type ColumnShape = Omit<TableColumnOptions, 'name'>;

/**
 * The only place that maps a logical column type to a concrete one per dialect. Everything else in
 * the migrations (varchar, text, bigint) means the same on all three and is written inline.
 */
export interface ColumnTypes {
  /** The primary key: autoincrement bigint, or a uuid (assigned by the engine) with uuid keys. */
  id(name?: string): TableColumnOptions;
  /** A column holding the id of another geneva-drive row: the key's type, without key or default. */
  idReference(name: string, options?: { nullable?: boolean }): TableColumnOptions;
  /** A timestamp with sub-second precision that round-trips a JS `Date` exactly (ms). */
  datetime(name: string, options?: { nullable?: boolean }): TableColumnOptions;
  /** A JSON document (always nullable; the engine writes the payload codec's encoded text). */
  json(name: string): TableColumnOptions;
  /**
   * An identity string (a name, key or id the engine looks rows up by) of at most `maxLength`
   * characters, compared exactly on every database: see IDENTIFIER below.
   */
  identifier(name: string, maxLength: number, options?: { nullable?: boolean }): TableColumnOptions;
  /** NOT NULL boolean with a default. */
  boolean(name: string, defaultValue: boolean): TableColumnOptions;
  /** How a boolean literal is written in SQL (partial index predicates, defaults). */
  booleanLiteral(value: boolean): string;
}

const DATETIME: Record<Dialect, ColumnShape> = {
  // timestamptz: stores an instant, so the server's and the client's time zones never matter.
  postgres: { type: 'timestamptz' },
  // datetime(6) has no time zone: the DataSource must use `timezone: 'Z'` so mysql2 writes UTC.
  mysql: { type: 'datetime', precision: 6 },
  // TypeORM writes `YYYY-MM-DD HH:MM:SS.SSS` in UTC for Date-typed columns; those sort as text.
  sqlite: { type: 'datetime' },
};

const JSON_TYPE: Record<Dialect, ColumnShape> = {
  postgres: { type: 'jsonb' },
  // longtext, not MySQL's JSON type: MariaDB's JSON is an alias of longtext anyway, and a text column
  // keeps the encoded payload byte for byte (MySQL's JSON type re-serialises it).
  mysql: { type: 'longtext' },
  sqlite: { type: 'text' },
};

const ID: Record<Dialect, ColumnShape> = {
  // TypeORM emits BIGSERIAL (bigint + owned sequence), what @PrimaryGeneratedColumn('increment') expects.
  postgres: { type: 'bigint' },
  // Signed bigint on purpose: every referencing column is a plain (signed) bigint, and MySQL
  // refuses a foreign key between an unsigned and a signed column.
  mysql: { type: 'bigint' },
  // SQLite only allows AUTOINCREMENT on a column declared exactly `integer` (the rowid alias),
  // which is a 64-bit integer anyway.
  sqlite: { type: 'integer' },
};

/*
 * uuid keys (genevaDriveMigrations({ primaryKey: 'uuid' })). The engine assigns every id itself,
 * time-ordered (UUIDv7, see persistence/primary-keys.ts), so the text forms must compare like the
 * bytes on every database.
 */
const UUID: Record<Dialect, ColumnShape> = {
  // The native type: 16 bytes, ordered like the text form.
  postgres: { type: 'uuid' },
  // char(36), not MariaDB's uuid type (10.7+), which MySQL does not have. ASCII with the binary
  // collation: 36-byte index entries instead of utf8mb4's 144, and ids compare byte by byte, exactly
  // and in the order of their text, as on PostgreSQL and SQLite. Every id column is declared alike,
  // as the foreign keys require.
  mysql: { type: 'char', length: '36', charset: 'ascii', collation: 'ascii_bin' },
  sqlite: { type: 'varchar', length: '36' },
};

/*
 * IDENTIFIER: identity strings (workflow type, hero type and id, step names, signal name and
 * idempotency key) must compare exactly, as their code points, on every database: `evt_1NqXaB` and
 * `evt_1NqXab`, `cafe` and `café`, `k` and `k `, NFC and NFD `café` are different events, names and
 * heroes. PostgreSQL's varchar (deterministic collation) and SQLite's text (BINARY) do that.
 * MySQL/MariaDB compare a varchar by its collation: the usual table defaults ignore case and accents
 * (`utf8mb4_general_ci`; `utf8mb4_unicode_ci` even equates NFC with NFD), and `utf8mb4_bin` is
 * PAD SPACE on MariaDB 10.x and on MySQL 8 (`'k' = 'k '`, in unique indexes too). The NO PAD binary
 * collations are per server: MariaDB's `utf8mb4_nopad_bin` does not exist on MySQL, and MySQL 8's
 * `utf8mb4_0900_bin` does not exist on MariaDB 10.x. The `binary` character set exists on both and
 * is NO PAD: a VARBINARY compares byte for byte, trailing spaces included (verified on MariaDB
 * 10.11: `_binary'k' = _binary'k '` is 0, and a unique index holds `k` and `k ` apart). So on MySQL
 * these columns are VARBINARY of 4 bytes per character (utf8mb4's widest): every value the other
 * databases' varchar(n) holds fits, at the index cost of a utf8mb4 varchar(n) (the limit counts
 * bytes, so up to 4n ASCII characters fit there). The bytes are the UTF-8 the driver sends (mysql2's
 * default connection character set, utf8mb4); the driver returns them as Buffers, which the entities
 * decode (`identifierTransformer`).
 */
const IDENTIFIER_BYTES_PER_CHARACTER = 4;

/** The MySQL/MariaDB type of an identifier column of at most `maxLength` characters (see IDENTIFIER). */
export function mysqlIdentifierType(maxLength: number): string {
  return `VARBINARY(${maxLength * IDENTIFIER_BYTES_PER_CHARACTER})`;
}

export function columnTypes(dialect: Dialect, primaryKey: PrimaryKeyType = 'bigint'): ColumnTypes {
  const booleanLiteral = (value: boolean): string => {
    if (dialect === 'postgres') return value ? 'true' : 'false';
    return value ? '1' : '0'; // MySQL tinyint(1) and SQLite integer affinity
  };
  return {
    id: (name = 'id') =>
      primaryKey === 'uuid'
        ? {
            name,
            ...UUID[dialect],
            isPrimary: true,
            // For rows written by hand: the engine always sends its own id. Built into PostgreSQL
            // since 13 (older servers need the pgcrypto extension). MySQL and SQLite get no default.
            ...(dialect === 'postgres' ? { default: 'gen_random_uuid()' } : {}),
          }
        : {
            name,
            ...ID[dialect],
            isPrimary: true,
            isGenerated: true,
            generationStrategy: 'increment',
          },
    idReference: (name, options = {}) => ({
      name,
      // With bigint keys, a plain (signed) bigint on every dialect: the same type as the referenced id.
      ...(primaryKey === 'uuid' ? UUID[dialect] : { type: 'bigint' }),
      isNullable: options.nullable ?? false,
    }),
    datetime: (name, options = {}) => ({ name, ...DATETIME[dialect], isNullable: options.nullable ?? false }),
    json: (name) => ({ name, ...JSON_TYPE[dialect], isNullable: true }),
    identifier: (name, maxLength, options = {}) => ({
      name,
      type: dialect === 'mysql' ? 'varbinary' : 'varchar',
      length: String(dialect === 'mysql' ? maxLength * IDENTIFIER_BYTES_PER_CHARACTER : maxLength),
      isNullable: options.nullable ?? false,
    }),
    boolean: (name, defaultValue) => ({
      name,
      type: 'boolean',
      isNullable: false,
      default: booleanLiteral(defaultValue),
    }),
    booleanLiteral,
  };
}
