import type { ValueTransformer } from 'typeorm';

/** Ids are strings in TypeScript whatever the column type: bigint arrives as a string or a number depending on the driver. */
export const idTransformer: ValueTransformer = {
  to: (value: unknown) => value,
  from: (value: unknown) => (value === null || value === undefined ? value : String(value)),
};

/** Counters are bigint columns; they are small enough for a JS number. */
export const counterTransformer: ValueTransformer = {
  to: (value: unknown) => value,
  from: (value: unknown) => (value === null || value === undefined ? 0 : Number(value)),
};

/** Booleans come back as 0/1 from MySQL and SQLite. */
export const booleanTransformer: ValueTransformer = {
  to: (value: unknown) => value,
  from: (value: unknown) => value === true || value === 1 || value === '1' || value === 't',
};

/** A nullable boolean column: null stays null. */
export const nullableBooleanTransformer: ValueTransformer = {
  to: (value: unknown) => value,
  from: (value: unknown) => (value === null || value === undefined ? null : booleanTransformer.from(value)),
};

/**
 * Identity strings (names, keys, hero ids) are VARBINARY on MySQL/MariaDB so that they compare
 * exactly (see the migrations' column-types.ts), and the driver returns those as Buffers of UTF-8.
 */
export function identifierText(value: unknown): unknown {
  return Buffer.isBuffer(value) ? value.toString('utf8') : value;
}

/** Raw rows (no entity transformer ran) with identity strings read back as strings. */
export function identifierRows<Row extends object>(rows: Row[]): Row[] {
  return rows.map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, identifierText(value)])) as Row);
}

/** Reads identity strings back as strings on every database (see {@link identifierText}). */
export const identifierTransformer: ValueTransformer = {
  to: (value: unknown) => value,
  from: identifierText,
};
