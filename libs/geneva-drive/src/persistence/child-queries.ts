import { In, MoreThan, Not, type EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { CLAIMED, CONSUMED } from '../state/signal-state.js';
import { ONGOING_WORKFLOW_STATES } from '../state/workflow-state.js';
import { isSqlite, latestRowsLock } from './row-lock.js';

/**
 * The reads and writes of child workflows (startChild, their ends, the fan-in gate, the lists), each
 * run by the caller under the parent's row lock. None is on the path of a workflow without children.
 */

/** Rows per multi-row INSERT or `IN (...)` list: far under every database's parameter limit (SQLite's 32766). */
const CHUNK = 500;

function chunks<T>(items: T[]): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += CHUNK) out.push(items.slice(start, start + CHUNK));
  return out;
}

/** The keys of the children step `stepName` of the parent started already (a completed step run again starts them once). */
export async function startedChildKeys(manager: EntityManager, parentId: string, stepName: string): Promise<Set<string>> {
  const rows = await manager.find(WorkflowRecord, { select: { id: true, childKey: true }, where: { parentId, parentStepName: stepName } });
  return new Set(rows.map((row) => row.childKey!));
}

/** Inserts the rows with one multi-row INSERT per {@link CHUNK}; their ids are read back by the callers' own reads. */
export async function insertRows(manager: EntityManager, target: typeof WorkflowRecord | typeof StepExecution, rows: object[]): Promise<void> {
  for (const chunk of chunks(rows)) {
    await manager.createQueryBuilder().insert().into(target).values(chunk as never).updateEntity(false).execute();
  }
}

/** The ids of the children of the parent's step, by key. */
export async function childIdsByKey(manager: EntityManager, parentId: string, stepName: string): Promise<Map<string, string>> {
  const rows = await manager.find(WorkflowRecord, { select: { id: true, childKey: true }, where: { parentId, parentStepName: stepName } });
  return new Map(rows.map((row) => [row.childKey!, row.id]));
}

/** The id of the one execution each of these (new) children has, by workflow id. */
export async function firstExecutionIds(manager: EntityManager, workflowIds: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const chunk of chunks(workflowIds)) {
    const rows = await manager.find(StepExecution, { select: { id: true, workflowId: true }, where: { workflowId: In(chunk) } });
    for (const row of rows) found.set(row.workflowId, row.id);
  }
  return found;
}

/**
 * The children started by the parent's step, oldest first. Read under the parent's lock, which every
 * child's end takes before it commits: no child can have ended unseen (MySQL's snapshot is taken
 * after that lock, by the transaction's first plain read).
 */
export function childrenOfStep(manager: EntityManager, parentId: string, stepName: string): Promise<WorkflowRecord[]> {
  return manager.find(WorkflowRecord, { where: { parentId, parentStepName: stepName }, order: { id: 'ASC' } });
}

/**
 * How many children the parent's step started, and how many of them have ended (finished or
 * canceled): one aggregate, no row read into Node. Under the parent's lock, as {@link childrenOfStep}.
 */
export async function countChildrenOfStep(manager: EntityManager, parentId: string, stepName: string): Promise<{ all: number; ended: number }> {
  const row = await manager
    .createQueryBuilder(WorkflowRecord, 'w')
    .select('COUNT(*)', 'all')
    .addSelect(`SUM(CASE WHEN w.state IN ('finished', 'canceled') THEN 1 ELSE 0 END)`, 'ended')
    .where('w.parentId = :parentId AND w.parentStepName = :stepName', { parentId, stepName })
    .getRawOne<{ all: unknown; ended: unknown }>();
  return { all: Number(row?.all ?? 0), ended: Number(row?.ended ?? 0) };
}

/** The parent's ongoing children that canceling it cancels, locked (they are canceled in the same transaction). */
export function childrenToCancel(manager: EntityManager, parentId: string): Promise<WorkflowRecord[]> {
  return manager.find(WorkflowRecord, {
    where: { parentId, state: In([...ONGOING_WORKFLOW_STATES]), onParentCancel: 'cancel' },
    order: { id: 'ASC' },
    // SQLite: the transaction holds the database's write lock.
    lock: isSqlite(manager) ? undefined : { mode: 'pessimistic_write' },
  });
}

/** The `child_finished` signals (named `name`) of the parent not consumed yet whose key is one of `childIds`. */
export async function unconsumedSignals(manager: EntityManager, parentId: string, name: string, childIds: string[]): Promise<Signal[]> {
  const found: Signal[] = [];
  for (const chunk of chunks(childIds)) {
    found.push(...(await manager.find(Signal, { where: { workflowId: parentId, name, idempotencyKey: In(chunk), state: Not(CONSUMED) }, lock: latestRowsLock(manager) })));
  }
  return found;
}

/** Claims the signals, as an execution attaching one does (`claimed + 1`, `pending → claimed`). */
export async function claimSignals(manager: EntityManager, ids: string[], now: Date): Promise<void> {
  for (const chunk of chunks(ids)) {
    await manager
      .createQueryBuilder()
      .update(Signal)
      .set({ claimed: () => 'claimed + 1', state: CLAIMED, claimedAt: () => 'COALESCE(claimed_at, :now)', updatedAt: now })
      .setParameter('now', now)
      .where({ id: In(chunk) })
      .execute();
  }
}

/** Consumes the signals, as a clean end of the execution attached to one does (`consumed + 1`, `→ consumed`). */
export async function consumeSignals(manager: EntityManager, ids: string[], now: Date): Promise<void> {
  for (const chunk of chunks(ids)) {
    await manager
      .createQueryBuilder()
      .update(Signal)
      .set({ consumed: () => 'consumed + 1', state: CONSUMED, consumedAt: now, updatedAt: now })
      .where({ id: In(chunk), state: Not(CONSUMED) })
      .execute();
  }
}

/** A page of the parent's children in id order (creation order), after the id `after`. */
export function pageOfChildren(manager: EntityManager, parentId: string, after: string | null, limit: number): Promise<WorkflowRecord[]> {
  return manager.find(WorkflowRecord, { where: { parentId, ...(after === null ? {} : { id: MoreThan(after) }) }, order: { id: 'ASC' }, take: limit });
}
