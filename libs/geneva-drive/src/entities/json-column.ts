import type { ValueTransformer } from 'typeorm';
import { decodePayload, encodePayload } from '../util/payload-codec.js';

/** JSON columns (jsonb on PostgreSQL, longtext on MySQL, text on SQLite) through the payload codec. */
export const jsonColumnTransformer: ValueTransformer = {
  to: (value: unknown) => (value === null || value === undefined ? null : encodePayload(value)),
  from: (value: unknown) => {
    if (value === null || value === undefined) return null;
    try {
      return decodePayload(value);
    } catch {
      return null; // unparsable legacy content reads as absent rather than crashing a load
    }
  },
};
