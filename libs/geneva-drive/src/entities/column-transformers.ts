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
