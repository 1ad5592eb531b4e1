import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { CommitOutcomeUnknownError } from '../errors/commit-outcome-unknown.error.js';
import { SignalOutcomeUnknownError, WorkflowNotOngoingError } from '../errors/signal.errors.js';
import { deliveryDisposition, publish, traced } from '../instrumentation/geneva-drive.events.js';
import { TransactionRunner } from '../persistence/transaction-runner.js';
import { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { idOf, WorkflowStore } from '../persistence/workflow-store.js';
import { WorkflowRegistry } from '../registry/workflow.registry.js';
import { SignalHero } from './signal-hero.js';
import { SignalIntake, type PreparedSignal } from './signal-intake.js';
import { newSignal } from '../persistence/new-rows.js';
import { nameOnlyWaits } from '../registry/name-only-waits.js';
import { SignalMatcher } from '../workflow/signal-matcher.js';
import { SignalRendezvous } from '../execution/signal-rendezvous.js';

/** Options of `SignalService.signal`. @publicApi */
export interface SignalOptions<Payload = Record<string, unknown>> {
  /** The event data; read back exactly (Dates stay Dates). @default {} */
  payload?: Payload;
  /** Redelivery key (a webhook's event id): a second call with it returns the first row, flagged `duplicateDelivery`. */
  idempotencyKey?: string | number;
  /**
   * Store the signal even when no step of the workflow's class waits for its name (for a step a later
   * version adds). Without it such a name is refused with `UnknownSignalNameError`: a typo would
   * otherwise stay pending for good. @default false
   */
  allowUnknownName?: boolean;
  /** Join the caller's transaction: the signal commits (and its wake-up is enqueued) only with the caller's writes. */
  manager?: EntityManager;
}

/** One signal of a workflow-with-signals start. @publicApi */
export interface StartSignal {
  name: string;
  payload?: unknown;
  idempotencyKey?: string | number;
  /** As `SignalOptions.allowUnknownName`. */
  allowUnknownName?: boolean;
}

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
    private readonly intake: SignalIntake,
    private readonly heroes: SignalHero, // [signal-hero hook]
    private readonly registry: WorkflowRegistry,
  ) {}

  /**
   * Records `name` for the workflow and wakes the step waiting for it, in one transaction, and
   * returns the stored row (its payload as it reads back). A redelivery of a known `idempotencyKey`
   * returns the original row with `duplicateDelivery` set and changes nothing. Throws, before
   * anything is written: `InvalidSignalError` for invalid arguments (its subclass
   * `UnknownSignalNameError` for a name no step of the class waits for, unless `allowUnknownName`),
   * `UnencodableValueError` for a
   * payload too deep or cyclic, `SignalPayloadTooLargeError`, `WorkflowNotOngoingError` for a new
   * signal to a finished or canceled workflow, and `SignalsNotMigratedError` on a database that has
   * not run the signals migration (everything that does not involve signals keeps working there).
   */
  signal<Payload>(workflow: WorkflowRecord | string, definition: SignalMatcher<Payload>, options?: SignalOptions<NoInfer<Payload>>): Promise<Signal<Payload>>;
  signal<Payload = Record<string, unknown>>(workflow: WorkflowRecord | string, name: string, options?: SignalOptions<Payload>): Promise<Signal<Payload>>;
  async signal<Payload>(workflow: WorkflowRecord | string, nameOrDefinition: string | SignalMatcher<Payload>, options: SignalOptions<Payload> = {}): Promise<Signal<Payload>> {
    const name = signalNameOf(nameOrDefinition);
    return traced('signal', () => ({ workflowId: String(idOf(workflow)), name }), async () => {
      const { workflowId, prepared } = this.intake.prepareCall(workflow, name, options);
      let workflowClass: string | undefined;
      /** The row this attempt inserted (not a redelivery's): what to look for after a lost COMMIT. */
      let written: Signal | undefined;
      const deliver = async () => {
        written = undefined;
        const alone = options?.manager === undefined ? await this.#deliverAlone(workflowId, classOf(workflow), prepared, (signal) => (written = signal)) : null;
        if (alone) {
          workflowClass = alone.workflowClass;
          return alone;
        }
        // Batched: a wake's claim and the execution it schedules are written together.
        return this.transactions.run((manager) => this.store.batched(manager, async () => {
          written = undefined;
          const { workflow: record, waiting: parked } = await this.store.lockForSignal(manager, workflowId);
          workflowClass = record.type;
          const unwaited = this.intake.unwaitedName(this.registry.findByName(record.type), prepared);
          // A redelivery of a signal stored before a deploy removed its step answers as before.
          if (unwaited && !(await this.intake.findExisting(manager, record.id, prepared))) throw unwaited;
          const terminal = !record.isOngoing();
          if (terminal && prepared.idempotencyKey === null) throw new WorkflowNotOngoingError(record.id, record.state, name);
          // A paused workflow buffers: resume delivers.
          const delivers = !record.isPaused() && this.schema.hasSignals;
          const { signal, duplicate, waiting } = terminal
            ? { signal: await this.intake.findExisting(manager, record.id, prepared), duplicate: true, waiting: [] }
            : await this.intake.insert(manager, record.id, prepared, delivers && !parked);
          if (!signal) throw new WorkflowNotOngoingError(record.id, record.state, name);
          if (!duplicate) written = signal;
          signal.duplicateDelivery = duplicate;
          const woken = duplicate || !delivers ? 0 : await this.rendezvous.dispatch(manager, record, signal, parked ?? waiting);
          return { signal, woken };
        }), options?.manager);
      };
      const result = await deliver()
        .catch(async (error: unknown) => {
          if (!(error instanceof CommitOutcomeUnknownError)) throw error;
          // The answer to COMMIT was lost. The workflow lock, which the lost transaction held, waits
          // for it to end however it ends; then the row says whether it committed: if so, the
          // wake-ups it could not send are sent; if not, nothing was written and it is delivered again.
          const found = !written
            ? null // a redelivery writes nothing: delivering again answers the same
            : await this.transactions
                .run((manager) => this.store.batched(manager, async () => {
                  const { workflow: record } = await this.store.lockForSignal(manager, workflowId);
                  const signal = await this.intake.findWritten(manager, written!, prepared);
                  if (!signal) return null;
                  signal.duplicateDelivery = false;
                  return { signal, woken: await this.rendezvous.resendWakes(manager, record, signal) };
                }), undefined, { idempotent: true })
                .catch((unreachable: unknown) => {
                  throw new SignalOutcomeUnknownError(workflowId, name, unreachable);
                });
          return (
            found ??
            deliver().catch((again: unknown) => {
              throw again instanceof CommitOutcomeUnknownError ? new SignalOutcomeUnknownError(workflowId, name, again) : again;
            })
          );
        })
        .catch((error: unknown) => {
          if (error instanceof WorkflowNotOngoingError) publish('signal', () => ({ workflowId, workflowClass, signalId: null, name, duplicate: false, woken: 0, disposition: 'rejected' }));
          throw error;
        });
      publish('signal', () => ({
        workflowId,
        workflowClass,
        signalId: result.signal.id,
        name,
        duplicate: result.signal.duplicateDelivery,
        woken: result.woken,
        disposition: deliveryDisposition(result.signal.duplicateDelivery, result.woken),
      }));
      return result.signal as Signal<Payload>;
    });
  }

  /**
   * [signal-hero hook] Delivers `name` to the hero's ongoing workflow of this class — to each of them,
   * with `allowMultiple` — as `signal()` would, in one transaction, and returns the rows (oldest
   * workflow first). The hero is an entity or, when the workflow declares its hero class, its id. An
   * `idempotencyKey` deduplicates per workflow. `NoOngoingWorkflowError` when there is none.
   */
  signalHero<Payload>(
    workflowClass: abstract new (...args: any[]) => unknown,
    hero: object | string | number,
    definition: SignalMatcher<Payload>,
    options?: SignalOptions<NoInfer<Payload>>,
  ): Promise<Array<Signal<Payload>>>;
  signalHero<Payload = Record<string, unknown>>(
    workflowClass: abstract new (...args: any[]) => unknown,
    hero: object | string | number,
    name: string,
    options?: SignalOptions<Payload>,
  ): Promise<Array<Signal<Payload>>>;
  signalHero<Payload>(
    workflowClass: abstract new (...args: any[]) => unknown,
    hero: object | string | number,
    nameOrDefinition: string | SignalMatcher<Payload>,
    options: SignalOptions<Payload> = {},
  ): Promise<Array<Signal<Payload>>> {
    const name = signalNameOf(nameOrDefinition);
    return this.heroes.deliver(workflowClass as never, hero, name, options?.manager, (workflowId, manager) => this.signal(workflowId, name, { ...options, manager }) as Promise<Signal<Payload>>);
  }

  /**
   * A signal whose workflow decides it by name alone, delivered in one round trip where the dialect
   * can (HotPathSql.deliverSignal), with its wake-ups sent once that has committed; null where it
   * cannot or the workflow needs the transaction, with nothing written (and nothing sent when the
   * caller's record names a class that does: `type`). `sending` receives the row
   * before it is sent: when the answer is lost (CommitOutcomeUnknownError), its id tells whether it
   * committed. A message the server refused wrote nothing: the transaction then decides.
   */
  async #deliverAlone(workflowId: string, type: string | undefined, prepared: PreparedSignal, sending: (signal: Signal) => void): Promise<{ signal: Signal; woken: number; workflowClass: string } | null> {
    const manager = this.transactions.dataSource.manager;
    const sql = this.store.sql(manager);
    // Enqueued in the transaction (`enqueueAfterCommit: false`), a wake-up that fails to go rolls the
    // signal back; a message commits before it is known.
    if (!sql.deliversSignalsAlone || !this.schema.hasSignals || !this.store.enqueueAfterCommit) return null;
    const routes = nameOnlyWaits(this.registry.all(), prepared.name);
    if (routes.size === 0 || (type !== undefined && !routes.has(type))) return null;
    const signal = newSignal(manager, this.schema, this.store.now(), workflowId, prepared);
    sending(signal);
    const delivered = await sql.deliverSignal({ signal, routes }).catch((error: unknown) => {
      if (error instanceof CommitOutcomeUnknownError) throw error;
      return null;
    });
    if (!delivered) return null;
    await this.rendezvous.sendWakes(manager, delivered.workflow, delivered.signal, delivered.woken);
    delivered.signal.duplicateDelivery = delivered.duplicate;
    return { signal: delivered.signal, woken: delivered.woken.length, workflowClass: delivered.workflow.type };
  }

  /** The workflow's signals, oldest first (none on a database without the signals migration). */
  list(workflow: WorkflowRecord | string): Promise<Signal[]> {
    const workflowId = this.schema.canonicalId(idOf(workflow));
    if (!this.schema.hasSignals || workflowId === null) return Promise.resolve([]);
    return this.transactions.dataSource.manager.find(Signal, { where: { workflowId }, order: { createdAt: 'ASC', id: 'ASC' } });
  }
}

/**
 * A signal's name, given as is or by its definition (a `SignalMatcher`, whose payload type it
 * carries). Whatever else a caller passed goes on to validation, as a name would.
 */
function signalNameOf<Payload>(nameOrDefinition: string | SignalMatcher<Payload>): string {
  return nameOrDefinition instanceof SignalMatcher ? nameOrDefinition.signalName : nameOrDefinition;
}

/** The class a caller's record names (a workflow's class never changes), or undefined for an id. */
function classOf(workflow: WorkflowRecord | string): string | undefined {
  return typeof workflow === 'object' && workflow !== null && typeof workflow.type === 'string' ? workflow.type : undefined;
}
