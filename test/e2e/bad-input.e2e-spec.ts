/**
 * Hostile and unusual input through `signal()` and `start(..., { signals })`, table-driven, on every
 * database: each input either fails with its exact typed error, before anything is written, or is
 * stored and read back exactly (the returned Signal is the stored row). After every case the tables
 * hold exactly the rows of the calls that succeeded. Also: cursors and execution metadata carry the
 * values jsonb cannot hold (NUL, lone surrogates) through the same codec.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  InvalidSignalError,
  Signal,
  SignalService,
  StepExecution,
  UnencodableValueError,
  WorkflowNotFoundError,
  WorkflowRecord,
  WorkflowService,
  type SignalOptions,
  type StartSignal,
} from 'geneva-drive';
import { CursorValueWorkflow, cursorProbe, FailingWithMessageWorkflow, failureProbe } from '../src/bad-input-workflows.js';
import { PlainTwoStepWorkflow } from '../src/signal-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { saveHero } from '../src/dashboard-app.js';

/** `depth` objects nested in one another. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: true };
  for (let i = 1; i < depth; i++) value = { d: value };
  return value;
}
const cyclic = () => {
  const value: Record<string, unknown> = { a: 1 };
  value.self = { back: value };
  return value;
};
/** A member named `__proto__` as JSON.parse builds it from a request body. */
const protoMember = () => JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as Record<string, unknown>;

type Failure = { error: new (...args: never[]) => Error; message: string };
interface SignalCase {
  title: string;
  workflow?: (wf: WorkflowRecord) => unknown;
  name?: unknown;
  options?: unknown;
  /** The error, or (on success) what the row reads back; defaults to the payload sent. */
  fails?: Failure;
  stored?: { name?: string; idempotencyKey?: string | null; payload?: unknown };
}

const invalid = (message: string): Failure => ({ error: InvalidSignalError, message });
const unencodable = (message: string): Failure => ({ error: UnencodableValueError, message });
const KEY_TYPE = 'idempotencyKey must be a non-empty string or a safe integer, got';

const SIGNAL_CASES: SignalCase[] = [
  // Names
  { title: 'an empty name', name: '', fails: invalid('A signal needs a non-empty name, got ""') },
  { title: 'a whitespace-only name', name: ' \t ', fails: invalid('A signal needs a non-empty name') },
  { title: 'a null name', name: null, fails: invalid('A signal needs a non-empty name, got null') },
  { title: 'a numeric name', name: 42, fails: invalid('A signal needs a non-empty name, got 42') },
  { title: 'a 256-character name', name: 'n'.repeat(256), fails: invalid('Signal name is 256 bytes long (UTF-8), over the limit of 255 bytes') },
  { title: 'a name of 128 two-byte characters', name: 'é'.repeat(128), fails: invalid('Signal name is 256 bytes long (UTF-8), over the limit of 255 bytes') },
  { title: 'a name with a NUL', name: 'pay\u0000ment', fails: invalid('Signal name must not contain a NUL character') },
  { title: 'a name with a lone surrogate', name: 'pay\uD800', fails: invalid('Signal name must not contain a lone UTF-16 surrogate') },
  { title: 'a 255-character name', name: 'n'.repeat(255), stored: { name: 'n'.repeat(255) } },
  { title: 'a name of 63 emoji (252 bytes)', name: '😀'.repeat(63), stored: { name: '😀'.repeat(63) } },
  // Idempotency keys
  { title: 'a NaN key', options: { idempotencyKey: Number.NaN }, fails: invalid(`${KEY_TYPE} NaN`) },
  { title: 'an Infinity key', options: { idempotencyKey: Number.POSITIVE_INFINITY }, fails: invalid(`${KEY_TYPE} Infinity`) },
  { title: 'a fractional key', options: { idempotencyKey: 1.5 }, fails: invalid(`${KEY_TYPE} 1.5`) },
  { title: 'a key beyond the safe integers', options: { idempotencyKey: 2 ** 53 }, fails: invalid(`${KEY_TYPE} 9007199254740992`) },
  { title: 'an empty key', options: { idempotencyKey: '' }, fails: invalid(`${KEY_TYPE} ""`) },
  { title: 'a whitespace-only key', options: { idempotencyKey: '  \n' }, fails: invalid(KEY_TYPE) },
  { title: 'a boolean key', options: { idempotencyKey: true }, fails: invalid(`${KEY_TYPE} boolean`) },
  { title: 'an object key', options: { idempotencyKey: { id: 1 } }, fails: invalid(`${KEY_TYPE} object`) },
  { title: 'a 256-character key', options: { idempotencyKey: 'k'.repeat(256) }, fails: invalid('idempotencyKey is 256 bytes long (UTF-8), over the limit of 255 bytes') },
  { title: 'a key with a NUL', options: { idempotencyKey: 'evt\u00001' }, fails: invalid('idempotencyKey must not contain a NUL character') },
  { title: 'a key with a lone surrogate', options: { idempotencyKey: 'evt\uDC00' }, fails: invalid('idempotencyKey must not contain a lone UTF-16 surrogate') },
  { title: 'a 255-character key', options: { idempotencyKey: 'k'.repeat(255) }, stored: { idempotencyKey: 'k'.repeat(255) } },
  { title: 'a key with surrounding spaces, kept as sent', options: { idempotencyKey: ' evt_1 ' }, stored: { idempotencyKey: ' evt_1 ' } },
  { title: 'a negative integer key', options: { idempotencyKey: -7 }, stored: { idempotencyKey: '-7' } },
  // Arguments
  { title: 'null options', options: null, fails: invalid('signal() options must be an object, got null') },
  { title: 'string options', options: 'payload', fails: invalid('signal() options must be an object, got "payload"') },
  { title: 'array options', options: [1], fails: invalid('signal() options must be an object, got 1') },
  { title: 'an unknown option', options: { timeout: 1 }, fails: invalid('Unknown signal option(s): timeout') },
  { title: 'a null workflow', workflow: () => null, fails: invalid('signal() needs a WorkflowRecord or a workflow id, got null') },
  { title: 'an empty workflow id', workflow: () => '', fails: { error: WorkflowNotFoundError, message: 'Workflow  does not exist' } },
  { title: 'a workflow id that is not a number', workflow: () => 'abc', fails: { error: WorkflowNotFoundError, message: 'Workflow abc does not exist' } },
  { title: 'a workflow id beyond bigint', workflow: () => '9223372036854775808', fails: { error: WorkflowNotFoundError, message: 'Workflow 9223372036854775808 does not exist' } },
  { title: 'a workflow record of no row', workflow: (wf) => ({ ...wf, id: '9223372036854775807' }), fails: { error: WorkflowNotFoundError, message: 'does not exist' } },
  // Payloads that cannot be stored
  { title: 'a payload nested 5,000 deep', options: { payload: nested(5_000) }, fails: unencodable('Signal payload cannot be stored: it nests deeper than 100 objects and arrays') },
  { title: 'a payload nested 101 deep', options: { payload: nested(101) }, fails: unencodable('nests deeper than 100') },
  { title: 'a cyclic payload', options: { payload: cyclic() }, fails: unencodable('Signal payload cannot be stored: it contains itself (at self.back)') },
  // Payloads that round-trip
  { title: 'a payload nested 100 deep', options: { payload: nested(100) } },
  { title: 'a NUL in a payload string', options: { payload: { note: 'a\u0000b', list: ['\u0000'] } } },
  { title: 'lone surrogates in payload strings', options: { payload: { high: 'x\uD800', low: '\uDFFFy', pair: '😀' } } },
  { title: 'NUL and lone surrogates in member names', options: { payload: { 'k\u0000': 1, '\uDBFF': { '\u0000': '\uDC00' } } } },
  { title: 'percent escapes and the tag key as data', options: { payload: { s: '%00%25%uD800', $gd: 'str', v: '%00' } } },
  { title: 'a top-level string with a NUL', options: { payload: 'raw\u0000text' } },
  { title: 'NaN, infinities, -0 and extreme numbers', options: { payload: { nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ninf: Number.NEGATIVE_INFINITY, negZero: -0, max: Number.MAX_VALUE, min: Number.MIN_VALUE, big: 1e308 } } },
  { title: 'Dates and bigints', options: { payload: { at: new Date('2026-02-03T04:05:06.789Z'), big: 123456789012345678901234567890n } } },
  { title: 'a member named __proto__', options: { payload: protoMember() }, stored: { payload: protoMember() } },
  {
    title: 'members JSON drops (undefined, functions, symbols): the returned row reads as stored',
    options: { payload: { keep: 1, gone: undefined, fn: () => 1, sym: Symbol('s'), list: [undefined, () => 1] } },
    stored: { payload: { keep: 1, list: [null, null] } },
  },
  { title: 'no payload', options: {}, stored: { payload: {} } },
];

interface StartCase {
  title: string;
  signals: unknown;
  fails?: Failure;
  /** On success: the payloads the rows read back. */
  stored?: unknown[];
}

const START_CASES: StartCase[] = [
  { title: 'signals that are not a list', signals: 'payment', fails: invalid('start() signals must be an array, got "payment"') },
  { title: 'a null signal', signals: [null], fails: invalid("Each of start()'s signals must be an object, got null") },
  { title: 'an unknown signal key', signals: [{ name: 'p', key: 'evt' }], fails: invalid('Unknown key(s) in a signal given to start(): key') },
  { title: 'a 256-character name', signals: [{ name: 'n'.repeat(256) }], fails: invalid('Signal name is 256 bytes long (UTF-8), over the limit of 255 bytes') },
  { title: 'a NUL in a name', signals: [{ name: 'p\u0000' }], fails: invalid('Signal name must not contain a NUL character') },
  { title: 'a NaN key after a valid signal', signals: [{ name: 'p' }, { name: 'p', idempotencyKey: Number.NaN }], fails: invalid(`${KEY_TYPE} NaN`) },
  { title: 'a payload nested 5,000 deep', signals: [{ name: 'p', payload: nested(5_000) }], fails: unencodable('Signal payload cannot be stored: it nests deeper than 100 objects and arrays') },
  { title: 'a cyclic payload', signals: [{ name: 'p', payload: cyclic() }], fails: unencodable('Signal payload cannot be stored: it contains itself (at self.back)') },
  { title: 'payloads jsonb cannot hold as they are', signals: [{ name: 'p', payload: { s: '\u0000\uD800' } }, { name: 'q', payload: protoMember() }], stored: [{ s: '\u0000\uD800' }, protoMember()] },
];

async function expectFailure(attempt: Promise<unknown>, failure: Failure): Promise<void> {
  await expect(attempt).rejects.toThrow(failure.error);
  await expect(attempt).rejects.toThrow(failure.message);
}

/**
 * No step of PlainTwoStepWorkflow waits for a signal: the input under test is buffered with
 * `allowUnknownName` (options that are not an object stay as they are, to be refused).
 */
function buffered(options: unknown): unknown {
  return options === undefined || (typeof options === 'object' && options !== null && !Array.isArray(options)) ? { allowUnknownName: true, ...options } : options;
}

/** The payload equals `expected` exactly, own `__proto__` member included, and no prototype was touched. */
function expectExactPayload(actual: unknown, expected: unknown): void {
  expect(actual).toEqual(expected);
  if (expected !== null && typeof expected === 'object' && Object.hasOwn(expected, '__proto__')) {
    expect(Object.hasOwn(actual as object, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(actual, '__proto__')?.value).toEqual((expected as Record<string, unknown>)['__proto__']);
    expect(Object.getPrototypeOf(actual)).toBe(Object.prototype);
  }
  expect(({} as Record<string, unknown>).polluted).toBeUndefined();
}

describeEachDatabase('bad input', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let hero: TestHero;

  const newHero = (name: string) => saveHero(app.dataSource, name);
  const count = () =>
    Promise.all([WorkflowRecord, StepExecution, Signal].map((entity) => app.dataSource.getRepository(entity as typeof Signal).count()));

  beforeAll(async () => {
    app = await createTestApp(kind, [PlainTwoStepWorkflow, CursorValueWorkflow, FailingWithMessageWorkflow]);
    workflows = app.moduleRef.get(WorkflowService);
    signals = app.moduleRef.get(SignalService);
    await app.reset();
    hero = await newHero('Ada');
  });
  afterAll(() => app.close());

  describe('signal()', () => {
    let wf: WorkflowRecord;
    let succeeded = 0;
    beforeAll(async () => {
      wf = await workflows.start(PlainTwoStepWorkflow, hero, { allowMultiple: true });
    });

    it.each(SIGNAL_CASES.map((c) => [c.title, c] as const))('%s', async (_title, c) => {
      const target = c.workflow ? c.workflow(wf) : wf;
      const name = 'name' in c ? c.name : 'payment';
      const call = () => signals.signal(target as WorkflowRecord, name as string, buffered(c.options) as SignalOptions);
      if (c.fails) {
        await expectFailure(call(), c.fails);
      } else {
        const signal = await call();
        succeeded++;
        const sent = (c.options as SignalOptions | undefined)?.payload;
        const payload = c.stored && 'payload' in c.stored ? c.stored.payload : (sent ?? {});
        const expected = { name: c.stored?.name ?? name, idempotencyKey: c.stored?.idempotencyKey ?? null };
        const row = await app.dataSource.getRepository(Signal).findOneByOrFail({ id: signal.id });
        for (const read of [signal, row]) {
          expect({ name: read.name, idempotencyKey: read.idempotencyKey }).toEqual(expected);
          expectExactPayload(read.payload, payload);
        }
      }
      // Only the calls that succeeded left a row; the workflow and its execution are untouched.
      expect(await count()).toEqual([1, 1, succeeded]);
    });
  });

  describe('start(..., { signals })', () => {
    let succeeded = 0;
    beforeAll(async () => {
      await app.reset();
      hero = await newHero('Bo');
    });

    it.each(START_CASES.map((c) => [c.title, c] as const))('%s', async (_title, c) => {
      const call = () => workflows.start(PlainTwoStepWorkflow, hero, { allowMultiple: true, signals: (Array.isArray(c.signals) ? c.signals.map(buffered) : c.signals) as StartSignal[] });
      if (c.fails) {
        await expectFailure(call(), c.fails);
      } else {
        const wf = await call();
        const rows = await signals.list(wf);
        expect(rows).toHaveLength(c.stored!.length);
        rows.forEach((row, i) => expectExactPayload(row.payload, c.stored![i]));
        succeeded++;
      }
      const [workflowRows, executionRows, signalRows] = await count();
      expect([workflowRows, executionRows]).toEqual([succeeded, succeeded]);
      expect(signalRows).toBe(START_CASES.filter((s) => !s.fails).slice(0, succeeded).reduce((n, s) => n + s.stored!.length, 0));
    });
  });

  describe('cursors and execution metadata', () => {
    beforeEach(async () => {
      await app.reset();
      hero = await newHero('Cy');
      cursorProbe.resumedWith.length = 0;
    });

    it.each([
      ['a NUL', 'a\u0000b'],
      ['lone surrogates and a NUL member name', { at: 'x\uD800', '\u0000': ['\uDFFF'] }],
      ['NaN and -0', [Number.NaN, -0]],
      ['a member named __proto__', protoMember()],
    ])('a cursor with %s is stored, reloaded and resumed with exactly', async (_what, value) => {
      cursorProbe.value = value;
      const wf = await workflows.start(CursorValueWorkflow, hero);
      await app.gd.performNextStep(wf); // hands the cursor on to a successor
      const [first, successor] = await workflows.executionHistory(wf);
      expect(first).toMatchObject({ state: 'completed', outcome: 'continued' });
      expectExactPayload(first.cursor, value);
      expectExactPayload(successor.cursor, value);
      await app.gd.performNextStep(wf);
      expect(cursorProbe.resumedWith).toHaveLength(1);
      expectExactPayload(cursorProbe.resumedWith[0], value);
      await app.gd.assertWorkflowState(wf, 'finished');
    });

    it('a cyclic cursor fails the step with UnencodableValueError through its exception policy, and no cursor is written', async () => {
      cursorProbe.value = cyclic();
      const wf = await workflows.start(CursorValueWorkflow, hero);
      await expect(app.gd.performNextStep(wf)).rejects.toThrow(UnencodableValueError);
      const [execution] = await workflows.executionHistory(wf);
      expect(execution).toMatchObject({ state: 'failed', errorClassName: 'UnencodableValueError', cursor: null });
      expect(execution.errorMessage).toContain('Cursor cannot be stored: it contains itself');
      await app.gd.assertWorkflowState(wf, 'paused');
    });

    it('an error message with a NUL and a lone surrogate is kept exactly in the execution metadata (U+FFFD in the text column)', async () => {
      const message = 'bad byte \u0000 and \uD800 half a pair';
      failureProbe.error = new Error(message);
      const wf = await workflows.start(FailingWithMessageWorkflow, hero);
      await expect(app.gd.performNextStep(wf)).rejects.toBe(failureProbe.error);
      const [execution] = await workflows.executionHistory(wf);
      expect(execution).toMatchObject({ state: 'failed', errorClassName: 'Error' });
      expect(execution.metadata?.exception?.message).toBe(message);
      expect(execution.errorMessage).toBe('bad byte \uFFFD and \uFFFD half a pair');
      await app.gd.assertWorkflowState(wf, 'paused');
    });
  });
});
