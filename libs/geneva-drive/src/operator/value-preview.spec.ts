import { describe, expect, it } from '@jest/globals';
import { encodePayload } from '../util/payload-codec.js';
import { previewOf, previewOfStored, PREVIEW_CHARS } from './value-preview.js';

/** What the pages read of a stored value: its first PREVIEW_CHARS characters and one more. */
const head = (stored: string) => [...stored].slice(0, PREVIEW_CHARS + 1).join('');

/** A value as PostgreSQL's jsonb writes it back: a space after each comma and colon. */
const jsonbText = (value: unknown): string =>
  Array.isArray(value)
    ? `[${value.map(jsonbText).join(', ')}]`
    : value !== null && typeof value === 'object'
      ? `{${Object.entries(value).map(([key, member]) => `${JSON.stringify(key)}: ${jsonbText(member)}`).join(', ')}}`
      : JSON.stringify(value);

describe('previewOfStored', () => {
  it('previews a value that fits as previewOf does, decoded', () => {
    const value = { at: new Date('2024-05-01T00:00:00Z'), big: 12n, list: [1, { a: 'b' }], none: {} };
    expect(previewOfStored(head(encodePayload(value)))).toEqual(previewOf(value));
    expect(previewOf(value).text).toContain('"big": "12n"');
    expect(previewOfStored(null)).toBeNull();
    expect(previewOfStored('not json')).toBeNull();
  });

  it('previews a longer value from the characters read, indented and cut as previewOf cuts the whole value', () => {
    const values = [
      { i: 0, blob: 'x'.repeat(120_000) },
      { list: [[], {}, [1, 2, { deep: ['a,b:c', 'quote \\" and \\\\'] }]], text: 'é😀'.repeat(5_000) },
      Array.from({ length: 3_000 }, (_, i) => ({ i, empty: [], nested: { key: `v${i}` } })),
    ];
    for (const value of values) {
      expect(previewOfStored(head(JSON.stringify(value)))).toEqual(previewOf(value));
      expect(previewOfStored(head(jsonbText(value)))).toEqual(previewOf(value));
    }
  });
});
