import type { EntityManager } from 'typeorm';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import { WorkflowNotFoundError } from '../errors/workflow-not-found.error.js';
import { childrenToCancel } from '../persistence/child-queries.js';
import { newSignal } from '../persistence/new-rows.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import type { WorkflowStore } from '../persistence/workflow-store.js';
import { decodePayload, encodePayload } from '../util/payload-codec.js';
import { CHILD_FINISHED, type ChildEndState, type ChildFinishedPayload } from '../workflow/children-matcher.js';
import type { SignalRendezvous } from './signal-rendezvous.js';

/**
 * What the end of a child or of a parent does, in the transaction of that end, whichever path ended
 * it (a step's outcome, an operator's or a step's cancel, cancelIf, a wait deadline, housekeeping, a
 * parent's cascade): WorkflowStore tells this of every end of a workflow that has a parent or
 * children.
 *
 * - A child's end is delivered to its parent as a `child_finished` signal through the rendezvous, as
 *   `signal()` delivers one: the parent locked, the signal inserted (its key the child's id: a second
 *   delivery is a no-op), the parked step woken, or the signal buffered (parent paused, or not parked
 *   yet). A parent that has ended is told nothing.
 * - A canceled parent cancels its ongoing children whose `onParentCancel` is `cancel`, each ending
 *   here in turn (grandchildren too).
 *
 * Lock order: a parent's cancel holds the parent's row and then locks its children's; a child's
 * step that may end it locks its parent first too (WorkflowStore.lockStep with the parent); every
 * other end of a child (an operator's cancel, a deadline, housekeeping) holds the child's row and
 * then locks its parent's. Those can meet in opposite orders: the database then picks one as the deadlock victim,
 * which is rolled back whole and run again by TransactionRunner (every transaction that ends a
 * workflow is the engine's own and may run again: TransactionalStep runs a transactional body
 * again, its writes rolled back with it). Either order of the outcome is consistent: the child
 * ended first and the parent (canceled after) keeps its signal, or the parent canceled first and
 * the child is canceled with it.
 */
export class ChildEnd {
  /** The parents ending by cancellation in a transaction: their children being canceled need not tell them. */
  private readonly cancelingParents = new WeakMap<EntityManager, Set<string>>();

  constructor(
    private readonly store: WorkflowStore,
    private readonly rendezvous: SignalRendezvous,
    private readonly schema: SchemaCapabilities,
  ) {
    store.onWorkflowEnd((manager, workflow) => this.ended(manager, workflow));
  }

  private async ended(manager: EntityManager, workflow: WorkflowRecord): Promise<void> {
    if (workflow.parentId && !this.cancelingParents.get(manager)?.has(workflow.parentId)) await this.tellParent(manager, workflow);
    if (workflow.state === 'canceled' && workflow.hasChildren) await this.cancelChildren(manager, workflow);
  }

  private async tellParent(manager: EntityManager, child: WorkflowRecord): Promise<void> {
    const locked = await this.lockParent(manager, child.parentId!);
    if (!locked) return; // purged by housekeeping
    const { workflow: parent, waiting: parked } = locked;
    if (!parent.isOngoing()) return;
    const payload: ChildFinishedPayload = {
      childId: child.id,
      workflowClass: child.type,
      key: child.childKey!,
      state: child.state as ChildEndState,
      result: child.result ?? null,
    };
    // The payload as it reads back, as signal() keeps it.
    const signal = newSignal(manager, this.schema, this.store.now(), parent.id, { name: CHILD_FINISHED, payload: decodePayload(encodePayload(payload)), idempotencyKey: child.id });
    // A paused parent buffers: resume delivers.
    const delivers = !parent.isPaused();
    // The child's end, still pending, is written with the signal: it writes nothing of the parent's.
    const { inserted, waiting } = await this.store.insertSignal(manager, signal, delivers && !parked);
    if (inserted && delivers) await this.rendezvous.dispatch(manager, parent, signal, parked ?? waiting);
  }

  /** The parent under its row lock: locked before the child's step rows where it was (WorkflowStore.lockStep), else now. Null when it is gone. */
  private async lockParent(manager: EntityManager, parentId: string): Promise<Awaited<ReturnType<WorkflowStore['lockForSignal']>> | null> {
    const prelocked = this.store.takeLockedParent(manager, parentId);
    if (prelocked) return prelocked;
    try {
      return await this.store.lockForSignal(manager, parentId);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return null;
      throw error;
    }
  }

  private async cancelChildren(manager: EntityManager, parent: WorkflowRecord): Promise<void> {
    let canceling = this.cancelingParents.get(manager);
    if (!canceling) this.cancelingParents.set(manager, (canceling = new Set()));
    canceling.add(parent.id);
    try {
      await this.store.flush(manager);
      for (const child of await childrenToCancel(manager, parent.id)) {
        const current = await this.store.currentExecution(manager, child.id);
        // An execution in progress too: its body's end then finds it canceled and discards the outcome.
        if (current) await this.store.transitionExecution(manager, current, 'canceled', 'canceled');
        await this.store.transitionWorkflow(manager, child, 'canceled', { currentStepName: null });
      }
    } finally {
      canceling.delete(parent.id);
    }
  }
}
