import { describe, expect, it } from '@jest/globals';
import { UnencodableValueError } from '../errors/unencodable-value.error.js';
import { decodePayload, encodePayload, MAX_PAYLOAD_DEPTH } from './payload-codec.js';

const roundTrip = (value: unknown) => decodePayload(encodePayload(value));
/** What PostgreSQL's jsonb hands back: the JSON already parsed. */
const roundTripParsed = (value: unknown) => decodePayload(JSON.parse(encodePayload(value)));

/** `depth` objects nested in one another, the innermost holding `leaf`. */
function nested(depth: number, leaf: unknown = 1): unknown {
  let value: unknown = leaf;
  for (let i = 0; i < depth; i++) value = { d: value };
  return value;
}

/** An object whose own member is named `__proto__`, as JSON.parse builds it from a webhook body. */
const withProtoMember = () => JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;

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
    ['a string with NUL characters', { s: 'a\u0000b\u0000' }],
    ['a top-level string with a NUL', '\u0000'],
    ['a lone high surrogate', { s: 'x\uD800y' }],
    ['a lone low surrogate at the end', { s: 'x\uDFFF' }],
    ['a surrogate pair next to a lone one', { s: '\uD83D\uDE00\uDC00\uD83D' }],
    ['percent signs next to escaped characters', { s: '%00%25%uD800\u0000%' }],
    ['a tag-looking string', { s: '%u0041', t: '$gd' }],
    ['member names with NUL and lone surrogates', { 'k\u0000': 1, '\uDC00': { inner: 'x\u0000' }, plain: 2 }],
    ['a NUL member name next to the tag key', { $gd: 'str', v: 1, '\u0000': 2 }],
    ['NaN, infinities and -0', { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ninf: Number.NEGATIVE_INFINITY, negZero: -0, list: [Number.NaN, -0] }],
    ['extreme finite numbers', { max: Number.MAX_VALUE, min: Number.MIN_VALUE, safe: Number.MAX_SAFE_INTEGER, tiny: -5e-324, big: 1e308 }],
    ['a top-level NaN', Number.NaN],
    ['nesting at the depth limit', nested(MAX_PAYLOAD_DEPTH)],
    ['one object shared by two members (not a cycle)', (() => { const shared = { x: 1 }; return { a: shared, b: [shared] }; })()],
  ])('round-trips %s exactly, from text and from parsed JSON', (_name, value) => {
    expect(roundTrip(value)).toEqual(value);
    expect(roundTripParsed(value)).toEqual(value);
  });

  it('keeps -0 and NaN apart from 0 and null', () => {
    const back = roundTrip({ z: -0, n: Number.NaN }) as { z: number; n: number };
    expect(Object.is(back.z, -0)).toBe(true);
    expect(Number.isNaN(back.n)).toBe(true);
  });

  it('stores only text that PostgreSQL jsonb accepts: no \\u0000 escape and no lone surrogate anywhere', () => {
    const encoded = encodePayload({ 'k\u0000\uD800': ['\u0000', 'a\uDBFFb', { x: '\uDC00' }] });
    expect(encoded).not.toMatch(/\\u0000/i);
    expect(encoded).not.toMatch(/\\ud[89a-f][0-9a-f]{2}/i);
    expect(encoded).not.toMatch(/[\uD800-\uDFFF]/);
  });

  it('leaves ordinary strings and numbers untagged', () => {
    expect(encodePayload({ s: 'café 😀 %', n: 1.5 })).toBe('{"s":"café 😀 %","n":1.5}');
  });

  it('keeps keys as sent', () => {
    expect(Object.keys(roundTrip({ amountCents: 1, 'event-id': 'x' }) as object)).toEqual(['amountCents', 'event-id']);
  });

  it('keeps a member named __proto__ as an own data member, without touching any prototype', () => {
    for (const back of [roundTrip(withProtoMember()), roundTripParsed(withProtoMember()), roundTrip({ $gd: 1, ...withProtoMember() })] as Array<Record<string, unknown>>) {
      expect(Object.hasOwn(back, '__proto__')).toBe(true);
      expect(Object.getOwnPropertyDescriptor(back, '__proto__')?.value).toEqual({ polluted: true });
      expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
      expect(back.polluted).toBeUndefined();
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('decodes a stored __proto__ member (a jsonb object or text from an earlier version) as data', () => {
    const back = decodePayload('{"__proto__":{"polluted":true},"$gd":"object","v":1}') as Record<string, unknown>;
    expect(Object.hasOwn(back, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it(`refuses a value nested deeper than ${MAX_PAYLOAD_DEPTH} levels with UnencodableValueError, arrays counting too`, () => {
    for (const value of [nested(MAX_PAYLOAD_DEPTH + 1), nested(5_000), [nested(MAX_PAYLOAD_DEPTH)]]) {
      expect(() => encodePayload(value, 'Signal payload')).toThrow(UnencodableValueError);
      expect(() => encodePayload(value, 'Signal payload')).toThrow(`Signal payload cannot be stored: it nests deeper than ${MAX_PAYLOAD_DEPTH} objects and arrays`);
    }
  });

  it('refuses a cyclic value with UnencodableValueError naming where the cycle closes', () => {
    const cyclic: Record<string, unknown> = { a: { list: [1] } };
    ((cyclic.a as Record<string, unknown>).list as unknown[]).push(cyclic);
    expect(() => encodePayload(cyclic)).toThrow(UnencodableValueError);
    expect(() => encodePayload(cyclic)).toThrow('Value cannot be stored: it contains itself (at a.list[1])');
    const self: unknown[] = [];
    self.push(self);
    expect(() => encodePayload(self)).toThrow('contains itself (at [0])');
  });

  it('asks toJSON once, like JSON.stringify, so a toJSON returning its own object does not loop', () => {
    const selfJson = { x: 1, toJSON() { return this; } };
    expect(roundTrip(selfJson)).toEqual({ x: 1 });
    expect(roundTrip({ at: { toJSON: () => 'text\u0000' } })).toEqual({ at: 'text\u0000' });
  });

  it('still decodes what earlier versions stored', () => {
    expect(decodePayload('{"$gd":"date","v":"2026-01-02T03:04:05.678Z"}')).toEqual(new Date('2026-01-02T03:04:05.678Z'));
    expect(decodePayload('{"$gd":"bigint","v":"12"}')).toBe(12n);
    expect(decodePayload('{"$gd":"scalar","v":"abc"}')).toBe('abc');
    expect(decodePayload('{"$gd":"object","v":{"$gd":"date","v":"x"}}')).toEqual({ $gd: 'date', v: 'x' });
    expect(decodePayload('{"a":[1,null,{"$gd":"date","v":"2026-01-01T00:00:00.000Z"}]}')).toEqual({ a: [1, null, new Date("2026-01-01T00:00:00.000Z")] });
    expect(decodePayload({ s: 'plain', n: null })).toEqual({ s: 'plain', n: null });
  });

  it('always stores an object or array at the top level', () => {
    for (const value of ['s', 1, true, null, new Date(), 1n, [1], {}, '\u0000', Number.NaN]) {
      expect(typeof JSON.parse(encodePayload(value))).toBe('object');
      expect(JSON.parse(encodePayload(value))).not.toBeNull();
    }
  });
});
