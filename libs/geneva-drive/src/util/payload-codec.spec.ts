import { describe, expect, it } from '@jest/globals';
import { decodePayload, encodePayload } from './payload-codec.js';

const roundTrip = (value: unknown) => decodePayload(encodePayload(value));
/** What PostgreSQL's jsonb hands back: the JSON already parsed. */
const roundTripParsed = (value: unknown) => decodePayload(JSON.parse(encodePayload(value)));

describe('payload codec', () => {
  it.each([
    ['a Date', new Date('2026-01-02T03:04:05.678Z')],
    ['a bigint', 12345678901234567890n],
    ['nested values', { at: new Date(0), list: [1, 'two', { big: 3n }], nothing: null }],
    ['a top-level string that looks like JSON', '123'],
    ['a plain top-level string', 'abc'],
    ['a number', 42],
    ['null', null],
    ['an object with the tag key', { $gd: 'date', v: 'not a date' }],
    ['an empty object', {}],
  ])('round-trips %s exactly, from text and from parsed JSON', (_name, value) => {
    expect(roundTrip(value)).toEqual(value);
    expect(roundTripParsed(value)).toEqual(value);
  });

  it('keeps keys as sent', () => {
    expect(Object.keys(roundTrip({ amountCents: 1, 'event-id': 'x' }) as object)).toEqual(['amountCents', 'event-id']);
  });

  it('always stores an object or array at the top level', () => {
    for (const value of ['s', 1, true, null, new Date(), 1n, [1], {}]) {
      expect(typeof JSON.parse(encodePayload(value))).toBe('object');
      expect(JSON.parse(encodePayload(value))).not.toBeNull();
    }
  });
});
