/**
 * JSON with an exact round trip for the values JSON loses: `Date`, `bigint`, `undefined` inside
 * arrays stays `null` as in JSON. Tagged values are objects with the single key `$gd`; a user object
 * that itself has a `$gd` key is wrapped, so no payload can be mistaken for a tag.
 * Used for signal payloads, resumable-step cursors and execution metadata.
 */
const TAG = '$gd';

export function encodePayload(value: unknown): string {
  const tagged = tag(value);
  // The top level is always an object or an array: a JSON column hands back strings and numbers
  // already parsed on PostgreSQL (jsonb) but as text elsewhere, which would be ambiguous for scalars.
  return JSON.stringify(tagged === null || typeof tagged !== 'object' ? { [TAG]: 'scalar', v: tagged } : tagged);
}

/** Replaces what JSON cannot carry with tagged objects. */
function tag(value: unknown): unknown {
  if (value instanceof Date) return { [TAG]: 'date', v: Number.isNaN(value.getTime()) ? null : value.toISOString() };
  if (typeof value === 'bigint') return { [TAG]: 'bigint', v: value.toString() };
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol') return null;
  if (Array.isArray(value)) return value.map(tag);
  if (value === null || typeof value !== 'object') return value;
  const withToJson = value as { toJSON?: () => unknown };
  if (typeof withToJson.toJSON === 'function') return tag(withToJson.toJSON());
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (item !== undefined && typeof item !== 'function' && typeof item !== 'symbol') copy[key] = tag(item);
  }
  return Object.hasOwn(value, TAG) ? { [TAG]: 'object', v: copy } : copy;
}

/** Decodes what {@link encodePayload} wrote: its text, or the object PostgreSQL's jsonb already parsed. */
export function decodePayload(stored: unknown): unknown {
  if (stored === null || stored === undefined) return stored;
  const parsed = typeof stored === 'string' ? JSON.parse(stored) : stored;
  return revive(parsed);
}

function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  if (Object.hasOwn(record, TAG) && Object.keys(record).length === 2 && 'v' in record) {
    switch (record[TAG]) {
      case 'date':
        return new Date(record.v === null ? Number.NaN : String(record.v));
      case 'bigint':
        return BigInt(String(record.v));
      case 'scalar':
        return revive(record.v);
      case 'object':
        return Object.fromEntries(Object.entries(record.v as object).map(([k, v]) => [k, revive(v)]));
    }
  }
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, revive(v)]));
}

/** Size in bytes of the encoded form, as stored. */
export function encodedSize(encoded: string): number {
  return Buffer.byteLength(encoded, 'utf8');
}
