import { In, type EntityManager, type SelectQueryBuilder } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { RUNNABLE_WORKFLOW_STATES } from '../state/workflow-state.js';

/**
 * What housekeeping recovers, read page by page in id order: executions stuck `in_progress` or
 * `scheduled` past a cutoff on a runnable workflow, parked executions whose deadline job was lost,
 * the rows of a run a dead process left, and a step's recoveries in a row. The dashboard and the CLI
 * count the stuck executions with the same criteria ({@link countStuck}).
 */

/** How many rows of a step's history {@link consecutiveRecoveries} reads at a time. */
const RECOVERY_PAGE = 100;

export type StuckState = 'in_progress' | 'scheduled';

/** Executions stuck in `state` since before `cutoff` (started, or due) of a workflow that is ready or performing. */
function stuck(manager: EntityManager, state: StuckState, cutoff: Date): SelectQueryBuilder<StepExecution> {
  const query = manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .where('e.state = :state', { state })
    .andWhere(state === 'in_progress' ? 'e.startedAt < :cutoff' : 'e.scheduledFor < :cutoff', { cutoff })
    .andWhere('w.state IN (:...runnable)', { runnable: [...RUNNABLE_WORKFLOW_STATES] });
  // A scheduled execution waiting for a concurrency key (its `flow_key` set) is not stuck: the end of a holder wakes it.
  if (state === 'scheduled' && manager.connection.getMetadata(StepExecution).findColumnWithPropertyName('flowKey')?.isSelect) query.andWhere('e.flowKey IS NULL');
  return query;
}

/** One page of stuck executions (see {@link stuck}), after the id `after` (null: from the first). */
export function stuckPage(manager: EntityManager, state: StuckState, cutoff: Date, limit: number, after: string | null): Promise<StepExecution[]> {
  const query = stuck(manager, state, cutoff)
    .select(['e.id', 'e.workflowId'])
    .orderBy('e.id', 'ASC')
    // limit, not take: the join selects nothing, so one plain LIMIT query (take would add a DISTINCT pre-query).
    .limit(limit);
  if (after !== null) query.andWhere('e.id > :after', { after });
  return query.getMany();
}

/** How many executions housekeeping would recover as stuck in `state` (see {@link stuck}). */
export function countStuck(manager: EntityManager, state: StuckState, cutoff: Date): Promise<number> {
  return stuck(manager, state, cutoff).getCount();
}

/**
 * One page of parked executions of `ready` workflows whose deadline passed before `cutoff`: an
 * indexed range read of (state, timeout_at), never a scan of every parked row.
 */
export function overdueDeadlinePage(manager: EntityManager, cutoff: Date, limit: number, after: string | null): Promise<StepExecution[]> {
  const query = manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select(['e.id'])
    .where('e.state = :waiting', { waiting: 'waiting' })
    .andWhere('e.timeoutAt < :cutoff', { cutoff })
    .andWhere('w.state = :ready', { ready: 'ready' })
    .orderBy('e.id', 'ASC')
    .limit(limit);
  if (after !== null) query.andWhere('e.id > :after', { after });
  return query.getMany();
}

/** The execution a job ran, with what a takeover walks from it (of `workflowId` when given). */
export function runHead(manager: EntityManager, executionId: string, workflowId?: string): Promise<StepExecution | null> {
  return manager.findOne(StepExecution, {
    where: workflowId === undefined ? { id: executionId } : { id: executionId, workflowId },
    select: { id: true, workflowId: true, state: true, jobId: true, createdAt: true },
  });
}

/** Up to `limit` executions of the workflow created after `head`, oldest first. */
export function executionsAfter(manager: EntityManager, head: StepExecution, limit: number): Promise<StepExecution[]> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .select(['e.id', 'e.workflowId', 'e.state', 'e.jobId', 'e.createdAt'])
    .where('e.workflowId = :workflowId', { workflowId: head.workflowId })
    .andWhere('(e.createdAt > :createdAt OR (e.createdAt = :createdAt AND e.id > :id))', { createdAt: head.createdAt, id: head.id })
    .orderBy('e.createdAt', 'ASC')
    .addOrderBy('e.id', 'ASC')
    .limit(limit)
    .getMany();
}

/**
 * How many times in a row `stepName` was recovered from a dead worker: its `recovered` rows, newest
 * first, until a row that shows the step got through (success, continued, skipped) or was stopped
 * (failed, canceled — and so resumed or skipped by an operator since). Reattempted rows are passed
 * over: a body that throws between crashes is no less poisonous. Counting the history, not a
 * counter carried from row to row, holds whatever successor came between (a reattempt, a resumable
 * step's continuation), needs no schema change, and orders by creation time then id like every
 * history walk, so integer and uuid keys alike.
 */
export async function consecutiveRecoveries(manager: EntityManager, workflowId: string, stepName: string): Promise<number> {
  let count = 0;
  for (let skip = 0; ; skip += RECOVERY_PAGE) {
    const rows = await manager.find(StepExecution, {
      where: { workflowId, stepName, state: In(['completed', 'failed', 'canceled', 'skipped']) },
      select: { id: true, outcome: true, createdAt: true },
      order: { createdAt: 'DESC', id: 'DESC' },
      skip,
      take: RECOVERY_PAGE,
    });
    for (const row of rows) {
      if (row.outcome === 'recovered') count++;
      else if (row.outcome !== 'reattempted') return count;
    }
    if (rows.length < RECOVERY_PAGE) return count;
  }
}
