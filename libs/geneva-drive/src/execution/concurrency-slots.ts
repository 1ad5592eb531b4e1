import { In, type EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { ConcurrencyKeyError } from '../errors/concurrency-key.error.js';
import { freeSlot, freeUncontended, keysWithWaiters, lockFlowKey, takeUncontended, writeFlowKey, writeWaiters, type FlowKeyRow, type FlowWaiter } from '../persistence/flow-keys.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import type { TransactionRunner } from '../persistence/transaction-runner.js';
import { jobOptionsFor, type WorkflowStore } from '../persistence/workflow-store.js';
import type { WorkflowRegistry } from '../registry/workflow.registry.js';
import type { StepExecutionState } from '../state/step-execution-state.js';
import type { Prepared } from './step-run.js';

const MAX_KEY_BYTES = 255;

/**
 * Concurrency keys (`concurrency: { key, limit }`): at most `limit` executions holding a key are
 * `in_progress` at once, across every process.
 *
 * - Phase 1 of a step with a key, once every other gate passed, takes a slot ({@link admit}): the
 *   execution starts holding the key (`flow_key` set, `in_progress`). Over the limit — or behind
 *   earlier waiters — it waits instead: it stays `scheduled` with `flow_key` set (the reason it does
 *   not run), queued in the key's row, its job done: no queue slot, no timer.
 * - Every transition of such an execution goes through WorkflowStore.transitionExecution, which
 *   tells {@link left}: a holder leaving `in_progress` (completed, failed, canceled, recovered, ...)
 *   frees its slot; a waiter ending before it ran leaves the queue. Both, in that transaction, wake
 *   the waiters the free slots now admit, first in the queue first: their jobs go out with its commit
 *   (PostgreSQL's one-statement end frees the slot in its statement and wakes them once it committed).
 * - A woken waiter's phase 1 runs every gate again and takes the slot if it is still among the
 *   waiters the free slots admit; otherwise it keeps its place. A newcomer queues behind the waiters
 *   of its priority or a higher one (the step's job option `priority`, a lower number first), so
 *   waiters of one priority start in arrival order.
 *
 * The key's row is locked after the workflow's (phase 1 and every transition hold it), never before.
 */
export class ConcurrencySlots {
  constructor(
    private readonly store: WorkflowStore,
    private readonly registry: WorkflowRegistry,
    private readonly schema: SchemaCapabilities,
    private readonly transactions: TransactionRunner,
  ) {
    store.onSlotTransition((manager, execution, from, to) => this.left(manager, execution, from, to));
  }

  /**
   * Phase 1's last gate: true when the execution now holds a slot of its step's key (`flow_key` set,
   * for the start to write), false when it waits for one (`flow_key` set and queued).
   */
  async admit(manager: EntityManager, prepared: Prepared): Promise<boolean> {
    const { step, instance, execution, workflow, definition } = prepared;
    const { key: keyOf, limit } = step.concurrency!;
    const { priority } = jobOptionsFor(definition, step);
    this.schema.assertFlowControl(`concurrency on step "${step.name}"`);
    const key = validKey(step.name, keyOf(instance));
    const now = this.store.now();
    // The key's row alone: the phase's pending writes (its rows, locked already) need not go first.
    this.store.assertLocked(manager);
    // A waiter whose key changed (its hero did) leaves the old key's queue first.
    if (execution.flowKey && execution.flowKey !== key) await this.leaveQueue(manager, execution.flowKey, execution.id);
    if (execution.flowKey !== key && (await takeUncontended(manager, key, limit, now))) return this.holds(manager, execution, key);

    const row = await lockFlowKey(manager, key, now);
    const position = row.waiters.findIndex((waiter) => waiter.e === execution.id);
    const waiter: FlowWaiter = { e: execution.id, w: workflow.id, l: limit, ...(priority === undefined ? {} : { p: priority }) };
    // A newcomer's place: behind every waiter of its priority or a higher one.
    const ahead = position < 0 ? placeOf(row.waiters, waiter) : position;
    if (row.holding < limit && ahead < limit - row.holding) {
      row.waiters = row.waiters.filter((other) => other.e !== execution.id);
      row.holding++;
      await writeFlowKey(manager, key, row, now);
      return this.holds(manager, execution, key);
    }
    if (position < 0) {
      row.waiters.splice(ahead, 0, waiter);
      await writeWaiters(manager, key, row.waiters);
    }
    if (execution.flowKey !== key) await this.setKey(manager, execution, key);
    return false;
  }

  /**
   * For phase 1 without the row locks (PreparePhase.prepareUnlocked), on a step with a key and an
   * execution that never waited for one: the slot taken with the start's guarded write, which goes
   * out only while the key is uncontended (else the locked phase 1 decides). The key; where that
   * cannot be (the dialect, the schema, a key function that throws: the locked phase records it),
   * the unlocked phase is given up.
   */
  takeUnlocked(manager: EntityManager, prepared: Prepared): string {
    const { step, instance, execution } = prepared;
    if (!this.schema.hasFlowControl || execution.flowKey) return this.store.requireLocks();
    let key: string;
    try {
      key = validKey(step.name, step.concurrency!.key(instance));
    } catch {
      return this.store.requireLocks();
    }
    return this.store.changeSlot(manager, { key, take: true, limit: step.concurrency!.limit, now: this.store.now() }) ? key : this.store.requireLocks();
  }

  /**
   * Housekeeping: wakes the waiters the free slots admit, of every key whose slots nothing took or
   * freed since `cutoff`. A wake whose job was lost (the process died between the commit and the
   * enqueue) is all that leaves waiters there: a key in use changes at every start and end, and
   * newcomers queueing behind the waiter it admitted do not count as a change.
   */
  async wakeStranded(manager: EntityManager, cutoff: Date): Promise<number> {
    if (!this.schema.hasFlowControl) return 0;
    let woken = 0;
    for (const key of await keysWithWaiters(manager, cutoff)) {
      woken += await this.store.batched(manager, async () => {
        const row = await lockFlowKey(manager, key, this.store.now());
        return this.wake(manager, key, row);
      });
    }
    return woken;
  }

  /**
   * After an outcome whose write may have gone out unanswered (a lost connection), under the rows'
   * locks: if it freed the execution's slot, the waiters that lets start are woken, as its write
   * would have done next; if it did not, whatever freed the slot woke them, and this sends their
   * jobs again (a job that finds its execution started does nothing).
   */
  async wakeAfterLostEnd(manager: EntityManager, execution: StepExecution | null): Promise<void> {
    if (!this.schema.hasFlowControl || !execution?.flowKey || execution.state === 'in_progress' || execution.state === 'scheduled') return;
    const key = execution.flowKey;
    await this.wake(manager, key, await lockFlowKey(manager, key, this.store.now()));
  }

  private async holds(manager: EntityManager, execution: StepExecution, key: string): Promise<true> {
    if (execution.flowKey !== key) await this.setKey(manager, execution, key);
    return true;
  }

  private async setKey(manager: EntityManager, execution: StepExecution, key: string): Promise<void> {
    await this.store.updateRow<StepExecution>(manager, 'executions', execution.id, { flowKey: key });
    execution.flowKey = key;
  }

  /** An execution with `flow_key` moved from `from` to `to` (WorkflowStore.transitionExecution). */
  private async left(manager: EntityManager, execution: StepExecution, from: StepExecutionState, to: StepExecutionState): Promise<void> {
    const key = execution.flowKey!;
    if (from === 'in_progress') {
      // Deciding without the row locks (PostgreSQL's one-statement end): freed with the guarded
      // write, its waiters woken once that has committed.
      if (this.store.changeSlot(manager, { key, take: false, now: this.store.now(), freed: (row) => this.wakeFreed(key, row) })) return;
      this.store.assertLocked(manager);
      const now = this.store.now();
      let row = await freeSlot(manager, key, now);
      if (!row && (await freeUncontended(manager, key, now))) return; // nobody to wake
      if (!row) {
        row = await lockFlowKey(manager, key, now);
        row.holding = Math.max(0, row.holding - 1);
        await writeFlowKey(manager, key, row, now);
      }
      await this.wake(manager, key, row);
    } else if (from === 'scheduled' && to !== 'in_progress') {
      await this.leaveQueue(manager, key, execution.id);
    }
  }

  /** Takes the execution out of the key's queue, and wakes whom that lets start. */
  private async leaveQueue(manager: EntityManager, key: string, executionId: string): Promise<void> {
    this.store.assertLocked(manager);
    const now = this.store.now();
    const row = await lockFlowKey(manager, key, now);
    const waiters = row.waiters.filter((waiter) => waiter.e !== executionId);
    if (waiters.length === row.waiters.length) return;
    row.waiters = waiters;
    await writeFlowKey(manager, key, row, now);
    await this.wake(manager, key, row);
  }

  /**
   * Sends the jobs of the waiters the free slots admit, first in the queue first, with this transaction's commit
   * (under the key's lock, which the row is). A waiter that ended by a path that wrote no transition
   * (a bulk cancel) is dropped from the queue on the way; a waiter's row read as anything else may
   * be older than the queue (MySQL's snapshot) and is woken all the same: a job that finds its
   * execution not waiting does nothing. The count woken.
   */
  private async wake(manager: EntityManager, key: string, row: FlowKeyRow): Promise<number> {
    const admitted = admittedBy(row);
    if (admitted.length === 0) return 0;
    // The waiters' rows as this transaction left them.
    await this.store.flush(manager);
    const executions = await this.executionsOf(manager, admitted);
    const ended = admitted.filter((waiter) => TERMINAL.includes(executions.get(waiter.e)?.state as StepExecutionState));
    if (ended.length > 0) {
      row.waiters = row.waiters.filter((waiter) => !ended.includes(waiter));
      await writeFlowKey(manager, key, row, this.store.now());
      return this.wake(manager, key, row);
    }
    return this.sendWakes(manager, admitted, executions);
  }

  /**
   * After an unlocked end freed a slot of `key` (its write has committed, `row` as it left the key):
   * the jobs of the waiters it admits go out, their rows read as committed. A waiter that ended by
   * a path that wrote no transition is dropped from the queue, under the key's lock, by {@link wake}.
   */
  private async wakeFreed(key: string, row: FlowKeyRow): Promise<void> {
    const admitted = admittedBy(row);
    if (admitted.length === 0) return;
    const manager = this.transactions.dataSource.manager;
    const executions = await this.executionsOf(manager, admitted);
    if (admitted.some((waiter) => TERMINAL.includes(executions.get(waiter.e)?.state as StepExecutionState))) {
      await this.transactions.run((locked) => this.store.batched(locked, async () => this.wake(locked, key, await lockFlowKey(locked, key, this.store.now()))), undefined, { idempotent: true });
      return;
    }
    await this.sendWakes(manager, admitted, executions);
  }

  private async executionsOf(manager: EntityManager, waiters: readonly FlowWaiter[]): Promise<Map<string, StepExecution>> {
    return new Map((await manager.find(StepExecution, { where: { id: In(waiters.map((waiter) => waiter.e)) } })).map((e) => [e.id, e]));
  }

  /** Sends the admitted waiters' jobs (with the transaction's commit, if any); the count sent. */
  private async sendWakes(manager: EntityManager, admitted: readonly FlowWaiter[], executions: Map<string, StepExecution>): Promise<number> {
    const workflows = new Map((await manager.find(WorkflowRecord, { where: { id: In(admitted.map((waiter) => waiter.w)) } })).map((w) => [w.id, w]));
    let woken = 0;
    for (const waiter of admitted) {
      const execution = executions.get(waiter.e);
      const workflow = workflows.get(waiter.w);
      if (!execution || !workflow) continue;
      const definition = this.registry.findByName(workflow.type);
      // A job id of the wake's own: the execution's first job is done, and a queue keeps ids it ran.
      await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, definition?.step(execution.stepName)), `${execution.id}-slot-${Date.now().toString(36)}`);
      woken++;
    }
    return woken;
  }
}

/** The waiters the key's free slots admit, first in the queue first (each within the limit its step declared). */
function admittedBy(row: FlowKeyRow): FlowWaiter[] {
  const admitted = [];
  let slots = row.holding;
  for (const waiter of row.waiters) {
    if (slots >= waiter.l) break;
    admitted.push(waiter);
    slots++;
  }
  return admitted;
}

/**
 * Where a new waiter joins the queue: behind every waiter of its priority or a higher one (a lower
 * number, as the queues read a job's `priority`; none ranks as 0, ahead of any given one, as on
 * BullMQ), so that waiters of one priority keep their arrival order.
 */
function placeOf(waiters: readonly FlowWaiter[], waiter: FlowWaiter): number {
  const rank = waiter.p ?? 0;
  const behind = waiters.findIndex((other) => (other.p ?? 0) > rank);
  return behind < 0 ? waiters.length : behind;
}

const TERMINAL: readonly StepExecutionState[] = ['completed', 'failed', 'canceled', 'skipped'];

/** The key a key function (of `option`) returned, when it is one. */
export function validKey(stepName: string, key: unknown, option: 'concurrency' | 'rateLimit' = 'concurrency'): string {
  if (typeof key !== 'string' || key === '' || Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    throw new ConcurrencyKeyError(stepName, typeof key === 'string' ? `a string of ${Buffer.byteLength(key, 'utf8')} bytes` : (JSON.stringify(key) ?? String(key)), option);
  }
  return key;
}
