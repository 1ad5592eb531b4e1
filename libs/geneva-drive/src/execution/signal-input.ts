import { InvalidSignalError, SignalPayloadTooLargeError, SignalsNotMigratedError, UnknownSignalNameError } from '../errors/signal.errors.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { decodePayload, encodedSize, encodePayload, hasUnstorableCharacters } from '../util/payload-codec.js';

/**
 * A signal's arguments, validated and encoded before any lock or write: for `signal()`, for
 * `start()`'s and `startChild()`'s `signals`.
 */

/** A validated signal: its payload as it will be stored and read back. */
export interface PreparedSignal {
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
  /** Stored even when no step of the class waits for its name. */
  allowUnknownName: boolean;
}

/**
 * `name` and `idempotency_key` are varchar(255): 255 characters on PostgreSQL and MySQL/MariaDB,
 * unbounded on SQLite. Counting UTF-8 bytes makes one limit that fits every database and any
 * binary column: 255 ASCII characters, fewer in other scripts.
 */
export const MAX_IDENTIFIER_BYTES = 255;

const START_SIGNAL_KEYS = ['name', 'payload', 'idempotencyKey', 'allowUnknownName'];

export const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
export const show = (value: unknown) => (typeof value === 'string' ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value) : String(value));

/**
 * Validates and encodes one signal. The payload becomes what the row will read back (Dates stay
 * Dates, dropped members are gone). Without the signals migration there is nowhere to record it:
 * SignalsNotMigratedError, before anything is written. `limit`: maxSignalPayloadSize.
 */
export function prepareSignal(
  input: { name: unknown; payload?: unknown; idempotencyKey?: unknown; allowUnknownName?: unknown },
  limit: number | null,
  hasSignals: boolean,
): PreparedSignal {
  if (typeof input.name !== 'string' || input.name.trim() === '') throw new InvalidSignalError('name', `A signal needs a non-empty name, got ${show(input.name)}`);
  checkIdentifier('name', 'Signal name', input.name);
  const idempotencyKey = keyOf(input.idempotencyKey);
  const allowUnknownName = input.allowUnknownName ?? false;
  if (typeof allowUnknownName !== 'boolean') throw new InvalidSignalError('options', `allowUnknownName must be a boolean, got ${show(allowUnknownName)}`);
  const encoded = encodePayload(input.payload === undefined ? {} : input.payload, 'Signal payload');
  const size = encodedSize(encoded);
  if (limit !== null && size > limit) throw new SignalPayloadTooLargeError(size, limit);
  if (!hasSignals) throw new SignalsNotMigratedError(`Delivering signal "${input.name}"`);
  return { name: input.name, payload: decodePayload(encoded), idempotencyKey, allowUnknownName };
}

/**
 * The `signals` of `start` (and `startChild`): a list of `{ name, payload?, idempotencyKey?,
 * allowUnknownName? }`, each validated (its name against the class's `waitFor` steps too) before
 * anything is written.
 */
export function prepareStartSignals(signals: unknown, definition: WorkflowDefinition, limit: number | null, hasSignals: boolean): PreparedSignal[] {
  if (signals === undefined) return [];
  if (!Array.isArray(signals)) throw new InvalidSignalError('signals', `start() signals must be an array, got ${show(signals)}`);
  return signals.map((entry: unknown) => {
    if (!isPlainObject(entry)) throw new InvalidSignalError('signals', `Each of start()'s signals must be an object, got ${show(entry)}`);
    const unknown = Object.keys(entry).filter((key) => !START_SIGNAL_KEYS.includes(key));
    if (unknown.length > 0) throw new InvalidSignalError('signals', `Unknown key(s) in a signal given to start(): ${unknown.join(', ')}`);
    const prepared = prepareSignal(entry as { name: unknown }, limit, hasSignals);
    const unwaited = unwaitedName(definition, prepared);
    if (unwaited) throw unwaited;
    return prepared;
  });
}

/**
 * The error for a name no `waitFor` step of the class listens to — a typo would stay pending for
 * good — or undefined: the signal allows an unknown name, the class is not in this process (a
 * deploy may have removed it), or one of its steps waits with a custom matcher that names no signal.
 */
export function unwaitedName(definition: WorkflowDefinition | undefined, prepared: PreparedSignal): UnknownSignalNameError | undefined {
  if (!definition || prepared.allowUnknownName) return undefined;
  const matchers = definition.steps.flatMap((step) => (step.waitFor ? [step.waitFor] : []));
  if (matchers.some((matcher) => !matcher.signalName)) return undefined;
  const names = [...new Set(matchers.map((matcher) => matcher.signalName!))];
  return names.includes(prepared.name) ? undefined : new UnknownSignalNameError(definition.name, prepared.name, names);
}

/**
 * Why `value` cannot be an identifier (a name or key the engine compares and indexes: it must fit the
 * column and be text every database stores as is), or null when it can.
 */
export function identifierProblem(value: string): string | null {
  if (value.includes('\0')) return 'must not contain a NUL character';
  if (hasUnstorableCharacters(value)) return 'must not contain a lone UTF-16 surrogate';
  const bytes = Buffer.byteLength(value, 'utf8');
  return bytes > MAX_IDENTIFIER_BYTES ? `is ${bytes} bytes long (UTF-8), over the limit of ${MAX_IDENTIFIER_BYTES} bytes` : null;
}

/** A key is a non-blank string or a safe integer (stored in its decimal form); absent is null. */
function keyOf(key: unknown): string | null {
  if (key === undefined || key === null) return null;
  if (typeof key === 'number') {
    if (!Number.isSafeInteger(key)) throw new InvalidSignalError('idempotencyKey', `idempotencyKey must be a non-empty string or a safe integer, got ${show(key)}`);
    return String(key);
  }
  if (typeof key !== 'string' || key.trim() === '') {
    throw new InvalidSignalError('idempotencyKey', `idempotencyKey must be a non-empty string or a safe integer, got ${typeof key === 'string' ? show(key) : typeof key}`);
  }
  checkIdentifier('idempotencyKey', 'idempotencyKey', key);
  return key;
}

function checkIdentifier(argument: 'name' | 'idempotencyKey', what: string, value: string): void {
  const problem = identifierProblem(value);
  if (problem) throw new InvalidSignalError(argument, `${what} ${problem}`);
}
