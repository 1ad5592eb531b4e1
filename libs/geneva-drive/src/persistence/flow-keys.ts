import type { EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { isMysqlFamily } from './row-lock.js';

/** What {@link takeUncontended}'s refusal leaves as LAST_INSERT_ID on MySQL/MariaDB (no key has an auto-increment id). */
const REFUSED = 4294967295;

/** One row per key: how many executions hold it, who waits for it (in queue order), and its rate window. */
const TABLE = 'geneva_drive_flow_keys';

/** An execution waiting for a slot of a key: its id, its workflow's id, the limit its step declared, and its step's priority if it has one. */
export interface FlowWaiter {
  e: string;
  w: string;
  l: number;
  p?: number;
}

/** A key's row as read under its lock. */
export interface FlowKeyRow {
  holding: number;
  waiters: FlowWaiter[];
}

/**
 * The SQL of the concurrency keys' table (`geneva_drive_flow_keys`). Every function runs in the
 * caller's transaction, which holds the lock of the workflow whose execution takes, frees or waits
 * for a slot: a key's row is always locked after a workflow's, never before one, so the two kinds of
 * lock cannot meet in opposite orders. One key's row is the only place its count and its queue live:
 * nothing counts executions on the hot path.
 */

/**
 * Takes a slot when the key is uncontended — fewer than `limit` holders and nobody waiting — in one
 * statement that creates the row if need be (an upsert whose update is guarded). False when it did
 * not (contended): {@link lockFlowKey} decides.
 */
export async function takeUncontended(manager: EntityManager, key: string, limit: number, now: Date): Promise<boolean> {
  if (isMysqlFamily(manager)) {
    // The answer counts found rows, not changed ones (1 for a new row and for one left as it was):
    // a refusal sets LAST_INSERT_ID, which the answer carries, and nothing else does here.
    const result = (await manager.query(
      `INSERT INTO ${TABLE} (flow_key, holding, waiters, created_at, updated_at) VALUES (?, 1, '[]', ?, ?) ON DUPLICATE KEY UPDATE ` +
        `updated_at = IF(holding < ? AND waiters = '[]', ?, updated_at), ` +
        `holding = IF(holding < ? AND waiters = '[]', holding + 1, holding + 0 * LAST_INSERT_ID(${REFUSED}))`,
      [key, now, now, limit, now, limit],
    )) as { insertId?: number | string };
    return Number(result.insertId) !== REFUSED;
  }
  const [p1, p2, p3, p4] = placeholders(manager, 4);
  const rows: unknown[] = await manager.query(
    `INSERT INTO ${TABLE} (flow_key, holding, waiters, created_at, updated_at) VALUES (${p1}, 1, '[]', ${p2}, ${p3}) ` +
      `ON CONFLICT (flow_key) DO UPDATE SET holding = ${TABLE}.holding + 1, updated_at = excluded.updated_at ` +
      `WHERE ${TABLE}.holding < ${p4} AND ${TABLE}.waiters = '[]' RETURNING holding`,
    [key, at(manager, now), at(manager, now), limit],
  );
  return rows.length > 0;
}

/**
 * Frees a slot in one statement, answering the row as it leaves it (PostgreSQL, SQLite: RETURNING),
 * under its lock until the transaction ends. Null on MySQL/MariaDB: {@link freeUncontended}, else
 * {@link lockFlowKey}, then.
 */
export async function freeSlot(manager: EntityManager, key: string, now: Date): Promise<FlowKeyRow | null> {
  if (isMysqlFamily(manager)) return null;
  const [p1, p2] = placeholders(manager, 2);
  const rows = returned<{ holding: unknown; waiters: unknown }>(
    await manager.query(
      `UPDATE ${TABLE} SET holding = CASE WHEN holding > 0 THEN holding - 1 ELSE 0 END, updated_at = ${p1} WHERE flow_key = ${p2} RETURNING holding, waiters`,
      [at(manager, now), key],
    ),
  );
  return rows.length === 0 ? { holding: 0, waiters: [] } : toRow(rows[0]);
}

/**
 * MySQL/MariaDB, where {@link freeSlot} answers null: frees a slot in one statement while nobody
 * waits for the key (there is no one to wake). False, with nothing changed, otherwise.
 */
export async function freeUncontended(manager: EntityManager, key: string, now: Date): Promise<boolean> {
  if (!isMysqlFamily(manager)) return false;
  const result = (await manager.query(`UPDATE ${TABLE} SET holding = holding - 1, updated_at = ? WHERE flow_key = ? AND holding > 0 AND waiters = '[]'`, [now, key])) as {
    affectedRows?: number;
  };
  return result.affectedRows === 1;
}

/** The key's row under its lock, created empty when the key is new. */
export async function lockFlowKey(manager: EntityManager, key: string, now: Date): Promise<FlowKeyRow> {
  return toRow(await lockedRow<{ holding: unknown; waiters: unknown }>(manager, key, now, 'holding, waiters'));
}

/** `columns` of the key's row, read under its lock; the row created empty when the key is new. */
async function lockedRow<T>(manager: EntityManager, key: string, now: Date, columns: string): Promise<T> {
  if (isMysqlFamily(manager)) {
    // The row first: an INSERT IGNORE of a row that exists takes a shared lock, which two
    // transactions then both hold and both ask to upgrade (a deadlock on every contended key).
    const select = `SELECT ${columns} FROM ${TABLE} WHERE flow_key = ? FOR UPDATE`;
    let rows: T[] = await manager.query(select, [key]);
    if (rows.length === 0) {
      await manager.query(`INSERT IGNORE INTO ${TABLE} (flow_key, holding, waiters, created_at, updated_at) VALUES (?, 0, '[]', ?, ?)`, [key, now, now]);
      rows = await manager.query(select, [key]);
    }
    return rows[0];
  }
  // A no-op update of the row it finds: its lock (PostgreSQL's row lock; SQLite's transaction holds the database's).
  const [p1, p2, p3] = placeholders(manager, 3);
  const rows: T[] = await manager.query(
    `INSERT INTO ${TABLE} (flow_key, holding, waiters, created_at, updated_at) VALUES (${p1}, 0, '[]', ${p2}, ${p3}) ` +
      `ON CONFLICT (flow_key) DO UPDATE SET updated_at = ${TABLE}.updated_at RETURNING ${columns}`,
    [key, at(manager, now), at(manager, now)],
  );
  return rows[0];
}

/** Writes the row {@link lockFlowKey} locked. */
export async function writeFlowKey(manager: EntityManager, key: string, row: FlowKeyRow, now: Date): Promise<void> {
  const [p1, p2, p3, p4] = placeholders(manager, 4);
  await manager.query(`UPDATE ${TABLE} SET holding = ${p1}, waiters = ${p2}, updated_at = ${p3} WHERE flow_key = ${p4}`, [row.holding, JSON.stringify(row.waiters), at(manager, now), key]);
}

/**
 * Writes the queue of the row {@link lockFlowKey} locked when a waiter joins it, and nothing else:
 * `updated_at` keeps the time a slot was last taken or freed, which the sweep of lost wakes reads,
 * so that newcomers queueing behind a waiter whose wake was lost do not hide it.
 */
export async function writeWaiters(manager: EntityManager, key: string, waiters: FlowWaiter[]): Promise<void> {
  const [p1, p2] = placeholders(manager, 2);
  await manager.query(`UPDATE ${TABLE} SET waiters = ${p1} WHERE flow_key = ${p2}`, [JSON.stringify(waiters), key]);
}

/**
 * The keys someone waits for whose slots nothing took or freed since `cutoff` (housekeeping's sweep
 * of lost wakes: every wake writes the row it frees a slot in; a waiter joining the queue does not,
 * see {@link writeWaiters}): one row per key, never the executions.
 */
export async function keysWithWaiters(manager: EntityManager, cutoff: Date): Promise<string[]> {
  const [p1] = placeholders(manager, 1);
  const rows: Array<{ flow_key: unknown }> = await manager.query(`SELECT flow_key FROM ${TABLE} WHERE waiters <> '[]' AND updated_at < ${p1} ORDER BY flow_key`, [at(manager, cutoff)]);
  // MySQL/MariaDB answer an identifier column as bytes.
  return rows.map((row) => String(identifierText(row.flow_key)));
}

/**
 * A key's rate window (`rate_window`, the rate-limits migration's): the times, in epoch
 * milliseconds and ascending, of its latest starts (`s`) and of its latest claims (`c`: the starts
 * and the times promised to executions scheduled for a later window).
 */
export interface RateWindow {
  s: number[];
  c: number[];
}

/** The key's rate window under the lock of its row, the row created when the key is new. */
export async function lockRateWindow(manager: EntityManager, key: string, now: Date): Promise<RateWindow> {
  const { rate_window: text } = await lockedRow<{ rate_window: unknown }>(manager, key, now, 'rate_window');
  return text === null || text === undefined ? { s: [], c: [] } : (JSON.parse(String(text)) as RateWindow);
}

/** Writes the window {@link lockRateWindow} locked. */
export async function writeRateWindow(manager: EntityManager, key: string, window: RateWindow, now: Date): Promise<void> {
  const [p1, p2, p3] = placeholders(manager, 3);
  await manager.query(`UPDATE ${TABLE} SET rate_window = ${p1}, updated_at = ${p2} WHERE flow_key = ${p3}`, [JSON.stringify(window), at(manager, now), key]);
}

/** The rows an UPDATE ... RETURNING answers (TypeORM's PostgreSQL driver answers an UPDATE with [rows, count]). */
function returned<T>(result: unknown): T[] {
  return Array.isArray(result) && Array.isArray(result[0]) ? (result[0] as T[]) : (result as T[]);
}

/** A key's row as the driver answers it (`waiters` is JSON text). */
export function toRow(row: { holding: unknown; waiters: unknown }): FlowKeyRow {
  return { holding: Number(row.holding), waiters: JSON.parse(String(row.waiters)) as FlowWaiter[] };
}

/** A date as the driver binds it: SQLite keeps TypeORM's `YYYY-MM-DD HH:MM:SS.SSS` (UTC) text. */
function at(manager: EntityManager, date: Date): Date | string {
  return manager.connection.options.type === 'better-sqlite3' ? date.toISOString().replace('T', ' ').replace('Z', '') : date;
}

/** `n` placeholders, numbered on PostgreSQL; elsewhere positional, so they must appear in the parameters' order. */
function placeholders(manager: EntityManager, n: number): string[] {
  const postgres = manager.connection.options.type === 'postgres';
  return Array.from({ length: n }, (_, i) => (postgres ? `$${i + 1}` : '?'));
}
