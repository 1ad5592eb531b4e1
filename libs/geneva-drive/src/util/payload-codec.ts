import { UnencodableValueError } from '../errors/unencodable-value.error.js';

/**
 * JSON with an exact round trip for the values JSON loses or the databases cannot hold: `Date`,
 * `bigint`, `NaN`, `±Infinity` and `-0`, and strings (values or member names) with a NUL character
 * or a lone UTF-16 surrogate, which PostgreSQL's jsonb refuses. `undefined` inside arrays stays
 * `null` as in JSON. Tagged values are objects with the single key `$gd`; a user object that itself
 * has a `$gd` key is wrapped, so no payload can be mistaken for a tag. The encoded text is the same
 * on every database and is always accepted by jsonb and by the text columns of MySQL/MariaDB and SQLite.
 * Used for signal payloads, resumable-step cursors and execution metadata.
 */
const TAG = '$gd';

/** The deepest nesting of objects and arrays a value may have; each object or array is one level. */
export const MAX_PAYLOAD_DEPTH = 100;

/**
 * Encodes `value` for a JSON column. Throws {@link UnencodableValueError} (naming `what`) for a value
 * nested deeper than {@link MAX_PAYLOAD_DEPTH} or containing itself; nothing is partly encoded.
 */
export function encodePayload(value: unknown, what = 'Value'): string {
  const tagged = new Encoder(what).tag(value, 0, false);
  // The top level is always an object or an array: a JSON column hands back strings and numbers
  // already parsed on PostgreSQL (jsonb) but as text elsewhere, which would be ambiguous for scalars.
  return JSON.stringify(tagged === null || typeof tagged !== 'object' ? { [TAG]: 'scalar', v: tagged } : tagged);
}

/** A NUL, or a high surrogate not followed by a low one, or a low one not preceded by a high one. */
const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const ESCAPED = /%|\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const ESCAPE = /%(25|00|u[0-9A-F]{4})/g;

/** True when jsonb could not hold the string: it has a NUL or a lone surrogate. */
export function hasUnstorableCharacters(text: string): boolean {
  return UNSTORABLE.test(text);
}

/**
 * For plain text columns, which cannot carry them either (PostgreSQL refuses a NUL in text; every
 * driver writes a lone surrogate as U+FFFD): each becomes U+FFFD, explicitly and alike everywhere.
 */
export function replaceUnstorableCharacters(text: string): string {
  return UNSTORABLE.test(text) ? text.replace(new RegExp(UNSTORABLE.source, 'g'), '\uFFFD') : text;
}

/** `%` → `%25`, NUL → `%00`, a lone surrogate → `%uD800`: plain, well-formed text without NUL. */
function escapeText(text: string): string {
  return text.replace(ESCAPED, (c) => (c === '%' ? '%25' : c === '\0' ? '%00' : `%u${c.charCodeAt(0).toString(16).toUpperCase()}`));
}

function unescapeText(text: string): string {
  return text.replace(ESCAPE, (_, code: string) => (code === '25' ? '%' : code === '00' ? '\0' : String.fromCharCode(parseInt(code.slice(1), 16))));
}

const isDropped = (item: unknown) => item === undefined || typeof item === 'function' || typeof item === 'symbol';

/** Replaces what JSON or the databases cannot carry with tagged objects, bounded in depth and refusing cycles. */
class Encoder {
  /** The objects and arrays being encoded, from the top down to the current one, and the path to it. */
  private readonly open = new Set<object>();
  private readonly path: Array<string | number> = [];

  constructor(private readonly what: string) {}

  tag(value: unknown, depth: number, viaToJson: boolean): unknown {
    if (typeof value === 'string') return UNSTORABLE.test(value) ? { [TAG]: 'str', v: escapeText(value) } : value;
    if (typeof value === 'number') {
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      return { [TAG]: 'num', v: Object.is(value, -0) ? '-0' : String(value) };
    }
    if (value instanceof Date) return { [TAG]: 'date', v: Number.isNaN(value.getTime()) ? null : value.toISOString() };
    if (typeof value === 'bigint') return { [TAG]: 'bigint', v: value.toString() };
    if (isDropped(value)) return null;
    if (value === null || typeof value !== 'object') return value;
    // Like JSON.stringify: toJSON is asked once, and what it returns is encoded as it is.
    const withToJson = value as { toJSON?: () => unknown };
    if (!viaToJson && typeof withToJson.toJSON === 'function') return this.tag(withToJson.toJSON(), depth, true);
    if (this.open.has(value)) throw new UnencodableValueError(this.what, `contains itself (at ${this.describePath()})`);
    if (depth + 1 > MAX_PAYLOAD_DEPTH) throw new UnencodableValueError(this.what, `nests deeper than ${MAX_PAYLOAD_DEPTH} objects and arrays`);
    this.open.add(value);
    try {
      return Array.isArray(value) ? this.tagArray(value, depth + 1) : this.tagObject(value, depth + 1);
    } finally {
      this.open.delete(value);
    }
  }

  private tagArray(array: unknown[], depth: number): unknown[] {
    const copy: unknown[] = new Array(array.length);
    for (let i = 0; i < array.length; i++) copy[i] = this.child(i, array[i], depth);
    return copy;
  }

  private tagObject(value: object, depth: number): unknown {
    const entries: Array<[string, unknown]> = [];
    let escapedKeys = false;
    for (const [key, item] of Object.entries(value)) {
      if (isDropped(item)) continue;
      entries.push([key, this.child(key, item, depth)]);
      escapedKeys ||= UNSTORABLE.test(key);
    }
    if (escapedKeys) return { [TAG]: 'entries', v: entries.map(([key, item]) => [escapeText(key), item]) };
    // fromEntries defines own members: a member named `__proto__` stays data (an assignment would set the prototype).
    const copy = Object.fromEntries(entries);
    return Object.hasOwn(value, TAG) ? { [TAG]: 'object', v: copy } : copy;
  }

  private child(key: string | number, item: unknown, depth: number): unknown {
    this.path.push(key);
    try {
      return this.tag(item, depth, false);
    } finally {
      this.path.pop();
    }
  }

  private describePath(): string {
    return this.path.length === 0 ? 'the top level' : this.path.map((key) => (typeof key === 'number' ? `[${key}]` : `.${key}`)).join('').replace(/^\./, '');
  }
}

/** Decodes what {@link encodePayload} wrote (or any earlier version of it): its text, or the object PostgreSQL's jsonb already parsed. */
export function decodePayload(stored: unknown): unknown {
  if (stored === null || stored === undefined) return stored;
  const parsed = typeof stored === 'string' ? JSON.parse(stored) : stored;
  return revive(parsed);
}

/** Own members only, so a member named `__proto__` reads back as data and never sets a prototype. */
const record = (entries: Iterable<readonly [string, unknown]>): Record<string, unknown> => Object.fromEntries(entries);

function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value === null || typeof value !== 'object') return value;
  const stored = value as Record<string, unknown>;
  if (Object.hasOwn(stored, TAG) && Object.keys(stored).length === 2 && Object.hasOwn(stored, 'v')) {
    const v = stored.v;
    switch (stored[TAG]) {
      case 'date':
        return new Date(v === null ? Number.NaN : String(v));
      case 'bigint':
        return BigInt(String(v));
      case 'num':
        return v === '-0' ? -0 : Number(v);
      case 'str':
        return unescapeText(String(v));
      case 'scalar':
        return revive(v);
      case 'object':
        return record(Object.entries(v as object).map(([k, item]) => [k, revive(item)]));
      case 'entries':
        return record((v as Array<[string, unknown]>).map(([k, item]) => [unescapeText(k), revive(item)]));
    }
  }
  return record(Object.entries(stored).map(([k, item]) => [k, revive(item)]));
}

/** Size in bytes of the encoded form, as stored. */
export function encodedSize(encoded: string): number {
  return Buffer.byteLength(encoded, 'utf8');
}
