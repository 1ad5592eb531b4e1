import type { EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { StepExecution } from '../entities/step-execution.entity.js';

/** A concurrency key someone waits for, as {@link waitingKeyRows} reads it. */
export interface WaitingKeyRow {
  key: string;
  /** Executions holding a slot of it (`in_progress`). */
  holding: number;
  /** Executions waiting for one (`scheduled`). */
  waiting: number;
  /** The earliest `scheduled_for` of its waiters, as the driver answers it (a string on SQLite). */
  oldestDue: unknown;
}

const WAITING = "SUM(CASE WHEN e.state = 'scheduled' THEN 1 ELSE 0 END)";

/**
 * The keys with waiters, most waiters first (then the longest due), at most `limit`: counted from
 * the executions that wait (`scheduled`) or hold (`in_progress`) with a `flow_key` — two ranges of
 * the (state, flow_key) index, never the finished history that keeps its keys. Needs the
 * flow-control migration.
 */
export async function waitingKeyRows(manager: EntityManager, limit: number): Promise<WaitingKeyRow[]> {
  const rows: Array<{ key: unknown; waiting: string | number; holding: string | number; oldest: unknown }> = await manager
    .createQueryBuilder(StepExecution, 'e')
    .select('e.flowKey', 'key')
    .addSelect(WAITING, 'waiting')
    .addSelect("SUM(CASE WHEN e.state = 'in_progress' THEN 1 ELSE 0 END)", 'holding')
    .addSelect("MIN(CASE WHEN e.state = 'scheduled' THEN e.scheduledFor END)", 'oldest')
    .where('e.state IN (:...states)', { states: ['scheduled', 'in_progress'] })
    .andWhere('e.flowKey IS NOT NULL')
    .groupBy('e.flowKey')
    .having(`${WAITING} > 0`)
    .orderBy('waiting', 'DESC')
    .addOrderBy('oldest', 'ASC')
    .addOrderBy('e.flowKey', 'ASC')
    .limit(limit)
    .getRawMany();
  // MySQL/MariaDB answer an identifier column as bytes.
  return rows.map((row) => ({ key: String(identifierText(row.key)), holding: Number(row.holding), waiting: Number(row.waiting), oldestDue: row.oldest }));
}
