import { Inject, Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity.js';
import { Signal } from '../entities/signal.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { SignalPayloadTooLargeError, SignalsNotMigratedError, WorkflowNotOngoingError } from '../errors/signal.errors.js';
import { GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { publish } from '../instrumentation/geneva-drive.events.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { latestRowsLock } from '../persistence/row-lock.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { isUniqueViolation } from '../persistence/unique-violation.js';
import { idOf, WorkflowStore } from '../persistence/workflow-store.js';
import { encodedSize, encodePayload } from '../util/payload-codec.js';
import { SignalRendezvous } from './signal-rendezvous.js';

/** Options of `SignalService.signal`. @publicApi */
export interface SignalOptions<Payload = Record<string, unknown>> {
  /** The event data; read back exactly (Dates stay Dates). @default {} */
  payload?: Payload;
  /** Redelivery key (a webhook's event id): a second call with it returns the first row, flagged `duplicateDelivery`. */
  idempotencyKey?: string | number;
  /** Join the caller's transaction: the signal commits (and its wake-up is enqueued) only with the caller's writes. */
  manager?: EntityManager;
}

/** One signal of a workflow-with-signals start. @publicApi */
export interface StartSignal {
  name: string;
  payload?: unknown;
  idempotencyKey?: string | number;
}

const SIGNAL_OPTION_KEYS = ['payload', 'idempotencyKey', 'manager'];

/**
 * Delivers external events to workflows. The signal row is written before anything is dispatched,
 * so it does not matter whether the step that waits for it has parked yet.
 * @publicApi
 */
@Injectable()
export class SignalService {
  constructor(
    private readonly transactions: TransactionRunner,
    private readonly store: WorkflowStore,
    private readonly rendezvous: SignalRendezvous,
    private readonly schema: SchemaCapabilities,
    @Inject(GENEVA_DRIVE_OPTIONS) private readonly options: ResolvedGenevaDriveOptions,
  ) {}

  /**
   * Records `name` for the workflow and wakes the step waiting for it, in one transaction. A
   * redelivery of a known `idempotencyKey` returns the original row with `duplicateDelivery` set and
   * changes nothing. Throws `WorkflowNotOngoingError` for a new signal to a finished or canceled
   * workflow, and `SignalPayloadTooLargeError` before writing anything. On a database that has not
   * run the signals migration there is no table to record it in: `SignalsNotMigratedError`, before
   * anything is written (everything that does not involve signals keeps working there).
   */
  async signal<Payload = Record<string, unknown>>(
    workflow: WorkflowRecord | string,
    name: string,
    options: SignalOptions<Payload> = {},
  ): Promise<Signal<Payload>> {
    const prepared = this.prepareSignal({ name, payload: options.payload, idempotencyKey: options.idempotencyKey }, Object.keys(options));
    const workflowId = idOf(workflow);
    const result = await this.transactions.run(async (manager) => {
      const record = await this.store.lockWorkflow(manager, workflowId);
      const terminal = !record.isOngoing();
      if (terminal && prepared.idempotencyKey === null) throw new WorkflowNotOngoingError(record.id, record.state, name);
      const { signal, duplicate } = terminal
        ? { signal: await this.findExisting(manager, record.id, prepared), duplicate: true }
        : await this.insert(manager, record.id, prepared);
      if (!signal) throw new WorkflowNotOngoingError(record.id, record.state, name);
      signal.duplicateDelivery = duplicate;
      // A paused workflow buffers: resume delivers.
      const woken = duplicate || record.isPaused() ? 0 : await this.rendezvous.dispatch(manager, record, signal);
      return { signal, woken };
    }, options.manager);
    publish('signal', () => ({
      workflowId,
      signalId: result.signal.id,
      name,
      duplicate: result.signal.duplicateDelivery,
      woken: result.woken,
    }));
    return result.signal as Signal<Payload>;
  }

  /** The workflow's signals, oldest first (none on a database without the signals migration). */
  list(workflow: WorkflowRecord | string): Promise<Signal[]> {
    const workflowId = this.schema.canonicalId(idOf(workflow));
    if (!this.schema.hasSignals || workflowId === null) return Promise.resolve([]);
    return this.transactions.dataSource.manager.find(Signal, { where: { workflowId }, order: { createdAt: 'ASC', id: 'ASC' } });
  }

  /**
   * Validates and encodes a signal before any lock or write. Without the signals migration there is
   * nowhere to record it: SignalsNotMigratedError, before anything is written.
   */
  prepareSignal(input: StartSignal, optionKeys: string[] = []): PreparedSignal {
    const unknown = optionKeys.filter((key) => !SIGNAL_OPTION_KEYS.includes(key));
    if (unknown.length > 0) throw new TypeError(`Unknown signal option(s): ${unknown.join(', ')}`);
    if (typeof input.name !== 'string' || input.name.trim() === '') throw new TypeError('A signal needs a non-empty name');
    const key = input.idempotencyKey;
    if (key !== undefined && key !== null && typeof key !== 'string' && typeof key !== 'number') throw new TypeError('idempotencyKey must be a string or a number');
    const encoded = encodePayload(input.payload === undefined ? {} : input.payload);
    const limit = this.options.maxSignalPayloadSize;
    const size = encodedSize(encoded);
    if (limit !== null && size > limit) throw new SignalPayloadTooLargeError(size, limit);
    if (!this.schema.hasSignals) throw new SignalsNotMigratedError(`Delivering signal "${input.name}"`);
    return { name: input.name, payload: input.payload === undefined ? {} : input.payload, idempotencyKey: key === undefined || key === null ? null : String(key) };
  }

  /**
   * Inserts a keyed signal inside a savepoint: a unique violation (a redelivery) rolls back only the
   * savepoint, so neither this transaction nor a caller's enclosing one is poisoned; the original
   * row is returned.
   */
  async insert(manager: EntityManager, workflowId: string, prepared: PreparedSignal): Promise<{ signal: Signal; duplicate: boolean }> {
    const now = this.store.now();
    const signal = this.schema.withNewId(manager.create(Signal, {
      workflowId,
      name: prepared.name,
      idempotencyKey: prepared.idempotencyKey,
      state: 'pending',
      payload: prepared.payload as Record<string, unknown>,
      claimed: 0,
      consumed: 0,
      claimedAt: null,
      consumedAt: null,
      createdAt: now,
      updatedAt: now,
    }));
    const values = signal as QueryDeepPartialEntity<Signal>;
    if (prepared.idempotencyKey === null) {
      // Without a key nothing can collide (NULL keys are distinct in the unique index): no savepoint.
      await manager.insert(Signal, values);
    } else {
      try {
        await manager.transaction((savepoint) => savepoint.insert(Signal, values));
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        const existing = await this.findExisting(manager, workflowId, prepared);
        if (!existing) throw error;
        return { signal: existing, duplicate: true };
      }
    }
    signal.id = String(signal.id);
    return { signal, duplicate: false };
  }

  private findExisting(manager: EntityManager, workflowId: string, prepared: PreparedSignal): Promise<Signal | null> {
    if (prepared.idempotencyKey === null) return Promise.resolve(null);
    return manager.findOne(Signal, {
      where: { workflowId, name: prepared.name, idempotencyKey: prepared.idempotencyKey },
      lock: latestRowsLock(manager),
    });
  }
}

export interface PreparedSignal {
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
}
