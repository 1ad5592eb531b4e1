import { Inject, Injectable } from '@nestjs/common';
import { IsNull, type EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import type { StepExecution } from '../entities/step-execution.entity.js';
import { InvalidSignalError, type UnknownSignalNameError } from '../errors/signal.errors.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { GENEVA_DRIVE_OPTIONS } from '../geneva-drive.constants.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { latestRowsLock } from '../persistence/row-lock.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { WorkflowStore } from '../persistence/workflow-store.js';
import type { WorkflowDefinition } from '../registry/workflow-definition.js';
import { newSignal } from '../persistence/new-rows.js';
import { isPlainObject, prepareSignal, prepareStartSignals, show, unwaitedName, type PreparedSignal } from '../execution/signal-input.js';

export { MAX_IDENTIFIER_BYTES, type PreparedSignal } from '../execution/signal-input.js';

const SIGNAL_OPTION_KEYS = ['payload', 'idempotencyKey', 'allowUnknownName', 'manager'];


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
    return prepareStartSignals(signals, definition, this.options.maxSignalPayloadSize, this.schema.hasSignals);
  }

  /**
   * The error for a name no `waitFor` step of the class listens to — a typo would stay pending for
   * good — or undefined: the signal allows an unknown name, the class is not in this process (a
   * deploy may have removed it), or one of its steps waits with a custom matcher that names no signal.
   */
  unwaitedName(definition: WorkflowDefinition | undefined, prepared: PreparedSignal): UnknownSignalNameError | undefined {
    return unwaitedName(definition, prepared);
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
    const signal = newSignal(manager, this.schema, this.store.now(), workflowId, prepared);
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

  private prepare(input: { name: unknown; payload?: unknown; idempotencyKey?: unknown; allowUnknownName?: unknown }): PreparedSignal {
    return prepareSignal(input, this.options.maxSignalPayloadSize, this.schema.hasSignals);
  }
}
