import type { EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { StepRecoveryLimitError } from '../errors/step-recovery-limit.error.js';

/**
 * The gauges' reads, per workflow type: what housekeeping reports (and the metrics export), what the
 * dashboard and the CLI show. One definition each, so every surface counts the same rows.
 */

/** A gauge: a total and the same count per workflow type. @publicApi */
export interface Gauge {
  total: number;
  byWorkflow: Record<string, number>;
}

/** A gauge of counts per workflow type. */
export function gaugeOf(byWorkflow: Record<string, number>): Gauge {
  return { total: Object.values(byWorkflow).reduce((sum, n) => sum + n, 0), byWorkflow };
}

/**
 * Parked (`waiting`) executions, and of those the ones parked before `overdueBefore` (null: not
 * counted, `overdue` null), in one read.
 */
export async function waitingGauges(manager: EntityManager, overdueBefore: Date | null): Promise<{ waiting: Gauge; overdue: Gauge | null }> {
  const query = manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.type', 'type')
    .addSelect('COUNT(*)', 'waiting');
  if (overdueBefore !== null) query.addSelect('SUM(CASE WHEN e.waitingSince < :overdueBefore THEN 1 ELSE 0 END)', 'overdue').setParameter('overdueBefore', overdueBefore);
  const rows: Array<{ type: unknown; waiting: string | number; overdue?: string | number | null }> = await query
    .where('e.state = :waiting', { waiting: 'waiting' })
    .groupBy('w.type')
    .getRawMany();
  const waiting: Gauge = { total: 0, byWorkflow: {} };
  const overdue: Gauge = { total: 0, byWorkflow: {} };
  for (const row of rows) {
    const type = String(identifierText(row.type)); // a raw read: no entity transformer
    waiting.byWorkflow[type] = Number(row.waiting);
    waiting.total += Number(row.waiting);
    overdue.byWorkflow[type] = Number(row.overdue ?? 0);
    overdue.total += Number(row.overdue ?? 0);
  }
  return { waiting, overdue: overdueBefore === null ? null : overdue };
}

/** Paused workflows whose latest execution is the one the recovery limit failed (nothing came after it). */
export async function recoveryLimitPausedGauge(manager: EntityManager): Promise<Gauge> {
  const rows: Array<{ type: string; paused: string | number }> = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.type', 'type')
    .addSelect('COUNT(*)', 'paused')
    .where('w.state = :paused', { paused: 'paused' })
    .andWhere('e.state = :failed', { failed: 'failed' })
    .andWhere('e.errorClassName = :limit', { limit: StepRecoveryLimitError.name })
    .andWhere((qb) => {
      const later = qb.subQuery().select('1').from(StepExecution, 'l').where('l.workflow_id = e.workflow_id').andWhere('l.created_at > e.created_at');
      return `NOT EXISTS ${later.getQuery()}`;
    })
    .groupBy('w.type')
    .getRawMany();
  const gauge: Gauge = { total: 0, byWorkflow: {} };
  for (const row of rows) {
    gauge.byWorkflow[row.type] = Number(row.paused);
    gauge.total += Number(row.paused);
  }
  return gauge;
}

/** Paused workflows by type: a read of the (type, state, id) index. */
export async function pausedGauge(manager: EntityManager): Promise<Gauge> {
  const rows: Array<{ type: unknown; paused: string | number }> = await manager
    .createQueryBuilder(WorkflowRecord, 'w')
    .select('w.type', 'type')
    .addSelect('COUNT(*)', 'paused')
    .where('w.state = :paused', { paused: 'paused' })
    .groupBy('w.type')
    .getRawMany();
  const gauge: Gauge = { total: 0, byWorkflow: {} };
  for (const row of rows) {
    gauge.byWorkflow[String(identifierText(row.type))] = Number(row.paused);
    gauge.total += Number(row.paused);
  }
  return gauge;
}

/**
 * Parked executions with a deadline, and those whose deadline passed before `overdueBefore` on a
 * `ready` workflow (their job was lost: see overdueDeadlines), per workflow type.
 */
export async function deadlineGauges(manager: EntityManager, overdueBefore: Date): Promise<{ withDeadline: Record<string, number>; overdue: Record<string, number> }> {
  const rows: Array<{ type: unknown; parked: string | number; overdue: string | number | null }> = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.type', 'type')
    .addSelect('COUNT(*)', 'parked')
    .addSelect("SUM(CASE WHEN e.timeoutAt < :cutoff AND w.state = 'ready' THEN 1 ELSE 0 END)", 'overdue')
    .where('e.state = :waiting', { waiting: 'waiting' })
    .andWhere('e.timeoutAt IS NOT NULL')
    .setParameter('cutoff', overdueBefore)
    .groupBy('w.type')
    .getRawMany();
  const withDeadline: Record<string, number> = {};
  const overdue: Record<string, number> = {};
  for (const row of rows) {
    const type = String(identifierText(row.type)); // a raw read: no entity transformer
    withDeadline[type] = Number(row.parked);
    overdue[type] = Number(row.overdue ?? 0);
  }
  return { withDeadline, overdue };
}

/** A gauge per workflow type and step: a total and `byWorkflow[type][step]`. @publicApi */
export interface StepGauge {
  total: number;
  byWorkflow: Record<string, Record<string, number>>;
}

/**
 * Executions of steps with a concurrency key waiting for a slot (`scheduled` with a `flow_key`) and
 * holding one (`in_progress` with a `flow_key`), per workflow type and step (the step declares the
 * key: key values are unbounded, and are not counted apart). Two ranges of the (state, flow_key)
 * index, never the history. Needs the flow-control migration.
 */
export async function flowKeyGauges(manager: EntityManager): Promise<{ waiting: StepGauge; holding: StepGauge }> {
  const rows: Array<{ type: unknown; step: unknown; waiting: string | number; holding: string | number }> = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.type', 'type')
    .addSelect('e.stepName', 'step')
    .addSelect("SUM(CASE WHEN e.state = 'scheduled' THEN 1 ELSE 0 END)", 'waiting')
    .addSelect("SUM(CASE WHEN e.state = 'in_progress' THEN 1 ELSE 0 END)", 'holding')
    .where('e.state IN (:...states)', { states: ['scheduled', 'in_progress'] })
    .andWhere('e.flowKey IS NOT NULL')
    .groupBy('w.type')
    .addGroupBy('e.stepName')
    .getRawMany();
  const waiting: StepGauge = { total: 0, byWorkflow: {} };
  const holding: StepGauge = { total: 0, byWorkflow: {} };
  for (const row of rows) {
    // A raw read: no entity transformer.
    const type = String(identifierText(row.type));
    const step = String(identifierText(row.step));
    for (const [gauge, count] of [[waiting, Number(row.waiting)], [holding, Number(row.holding)]] as const) {
      (gauge.byWorkflow[type] ??= {})[step] = count;
      gauge.total += count;
    }
  }
  return { waiting, holding };
}
