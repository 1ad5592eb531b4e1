import { Inject, Injectable } from '@nestjs/common';
import { IsNull, type EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import { InvalidSignalError, SignalPayloadTooLargeError, SignalsNotMigratedError, UnknownSignalNameError } from '../errors/signal.errors.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { latestRowsLock } from '../persistence/row-lock.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { WorkflowStore } from '../persistence/workflow-store.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { decodePayload, encodedSize, encodePayload, hasUnstorableCharacters } from '../util/payload-codec.js';
import { PENDING } from '../state/signal-state.js';

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

const SIGNAL_OPTION_KEYS = ['payload', 'idempotencyKey', 'allowUnknownName', 'manager'];
const START_SIGNAL_KEYS = ['name', 'payload', 'idempotencyKey', 'allowUnknownName'];

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const show = (value: unknown) => (typeof value === 'string' ? JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value) : String(value));

/**
 * Validation, encoding and the insert of a signal row, shared by `signal()` and signal-with-start.
 * Engine-internal: not exported from the package.
 */
@Injectable()
export class SignalIntake {
  constructor(
    private readonly store: WorkflowStore,
    private readonly schema: SchemaCapabilities,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
  ) {}

  /** The arguments of `signal(workflow, name, options)`, validated before any lock or write. */
  prepareCall(workflow: unknown, name: unknown, options: unknown): { workflowId: string; prepared: PreparedSignal } {
    const workflowId = typeof workflow === 'string' ? workflow : isPlainObject(workflow) ? workflow.id : undefined;
    // A string is an id, even an empty one: find('') and signal('') alike answer WorkflowNotFoundError.
    if (typeof workflowId !== 'string') {
      throw new InvalidSignalError('workflow', `signal() needs a WorkflowRecord or a workflow id, got ${show(workflow)}`);
    }
    if (options !== undefined && !isPlainObject(options)) throw new InvalidSignalError('options', `signal() options must be an object, got ${show(options)}`);
    const given = options ?? {};
    const unknown = Object.keys(given).filter((key) => !SIGNAL_OPTION_KEYS.includes(key));
    if (unknown.length > 0) throw new InvalidSignalError('options', `Unknown signal option(s): ${unknown.join(', ')}`);
    const prepared = this.prepare({ name, ...given });
    // An id no key could have names no workflow (and would be a database error on PostgreSQL).
    const canonical = this.schema.canonicalId(workflowId);
    if (canonical === null) throw new WorkflowNotFoundError(workflowId);
    return { workflowId: canonical, prepared };
  }

  /**
   * The `signals` of `start`: a list of `{ name, payload?, idempotencyKey?, allowUnknownName? }`,
   * each validated (its name against the class's `waitFor` steps too) before anything is written.
   */
  prepareStartSignals(signals: unknown, definition: WorkflowDefinition): PreparedSignal[] {
    if (signals === undefined) return [];
    if (!Array.isArray(signals)) throw new InvalidSignalError('signals', `start() signals must be an array, got ${show(signals)}`);
    return signals.map((entry: unknown) => {
      if (!isPlainObject(entry)) throw new InvalidSignalError('signals', `Each of start()'s signals must be an object, got ${show(entry)}`);
      const unknown = Object.keys(entry).filter((key) => !START_SIGNAL_KEYS.includes(key));
      if (unknown.length > 0) throw new InvalidSignalError('signals', `Unknown key(s) in a signal given to start(): ${unknown.join(', ')}`);
      const prepared = this.prepare(entry as { name: unknown });
      const unwaited = this.unwaitedName(definition, prepared);
      if (unwaited) throw unwaited;
      return prepared;
    });
  }

  /**
   * The error for a name no `waitFor` step of the class listens to — a typo would stay pending for
   * good — or undefined: the signal allows an unknown name, the class is not in this process (a
   * deploy may have removed it), or one of its steps waits with a custom matcher that names no signal.
   */
  unwaitedName(definition: WorkflowDefinition | undefined, prepared: PreparedSignal): UnknownSignalNameError | undefined {
    if (!definition || prepared.allowUnknownName) return undefined;
    const matchers = definition.steps.flatMap((step) => (step.waitFor ? [step.waitFor] : []));
    if (matchers.some((matcher) => !matcher.signalName)) return undefined;
    const names = [...new Set(matchers.map((matcher) => matcher.signalName!))];
    return names.includes(prepared.name) ? undefined : new UnknownSignalNameError(definition.name, prepared.name, names);
  }

  /**
   * Inserts the signal; a redelivery of a known key writes nothing (and raises nothing, so a
   * caller's enclosing transaction is not poisoned) and returns the original row. With
   * `withWaiting`, the workflow's parked executions come back too, read by the same statement where
   * the dialect allows (the rendezvous dispatches to them).
   */
  async insert(
    manager: EntityManager,
    workflowId: string,
    prepared: PreparedSignal,
    withWaiting = false,
  ): Promise<{ signal: Signal; duplicate: boolean; waiting: StepExecution[] }> {
    const now = this.store.now();
    const signal = this.schema.withNewId(manager.create(Signal, {
      workflowId,
      name: prepared.name,
      idempotencyKey: prepared.idempotencyKey,
      state: PENDING,
      payload: prepared.payload as Record<string, unknown>,
      claimed: 0,
      consumed: 0,
      claimedAt: null,
      consumedAt: null,
      createdAt: now,
      updatedAt: now,
    }));
    const { inserted, waiting } = await this.store.sql(manager).insertSignal(manager, signal, withWaiting);
    if (inserted) return { signal, duplicate: false, waiting };
    const existing = await this.findExisting(manager, workflowId, prepared);
    if (!existing) throw new Error(`Signal "${prepared.name}" of workflow ${workflowId} was neither written nor found`);
    return { signal: existing, duplicate: true, waiting: [] };
  }

  /**
   * The row `written` as stored, locked, or null when its insert did not commit. Matched on what it
   * is, not on its id alone: an id whose insert did not commit may be given again (a sequence step
   * lost in a crash) to another signal.
   */
  findWritten(manager: EntityManager, written: Signal, prepared: PreparedSignal): Promise<Signal | null> {
    return manager.findOne(Signal, {
      where: { id: written.id, workflowId: written.workflowId, name: prepared.name, idempotencyKey: prepared.idempotencyKey ?? IsNull() },
      lock: latestRowsLock(manager),
    });
  }

  /** The row an earlier delivery of this keyed signal wrote, locked; null for a keyless signal. */
  findExisting(manager: EntityManager, workflowId: string, prepared: PreparedSignal): Promise<Signal | null> {
    if (prepared.idempotencyKey === null) return Promise.resolve(null);
    return manager.findOne(Signal, {
      where: { workflowId, name: prepared.name, idempotencyKey: prepared.idempotencyKey },
      lock: latestRowsLock(manager),
    });
  }

  /**
   * Validates and encodes one signal. The payload becomes what the row will read back (Dates stay
   * Dates, dropped members are gone). Without the signals migration there is nowhere to record it:
   * SignalsNotMigratedError, before anything is written.
   */
  private prepare(input: { name: unknown; payload?: unknown; idempotencyKey?: unknown; allowUnknownName?: unknown }): PreparedSignal {
    if (typeof input.name !== 'string' || input.name.trim() === '') throw new InvalidSignalError('name', `A signal needs a non-empty name, got ${show(input.name)}`);
    checkIdentifier('name', 'Signal name', input.name);
    const idempotencyKey = keyOf(input.idempotencyKey);
    const allowUnknownName = input.allowUnknownName ?? false;
    if (typeof allowUnknownName !== 'boolean') throw new InvalidSignalError('options', `allowUnknownName must be a boolean, got ${show(allowUnknownName)}`);
    const encoded = encodePayload(input.payload === undefined ? {} : input.payload, 'Signal payload');
    const limit = this.options.maxSignalPayloadSize;
    const size = encodedSize(encoded);
    if (limit !== null && size > limit) throw new SignalPayloadTooLargeError(size, limit);
    if (!this.schema.hasSignals) throw new SignalsNotMigratedError(`Delivering signal "${input.name}"`);
    return { name: input.name, payload: decodePayload(encoded), idempotencyKey, allowUnknownName };
  }
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

/** Identifiers are compared and indexed: they must fit the column and be text every database stores as is. */
function checkIdentifier(argument: 'name' | 'idempotencyKey', what: string, value: string): void {
  if (value.includes('\0')) throw new InvalidSignalError(argument, `${what} must not contain a NUL character`);
  if (hasUnstorableCharacters(value)) throw new InvalidSignalError(argument, `${what} must not contain a lone UTF-16 surrogate`);
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > MAX_IDENTIFIER_BYTES) throw new InvalidSignalError(argument, `${what} is ${bytes} bytes long (UTF-8), over the limit of ${MAX_IDENTIFIER_BYTES} bytes`);
}
