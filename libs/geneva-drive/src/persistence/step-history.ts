import { In, type EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { ACTIVE_EXECUTION_STATES } from '../state/step-execution-state.js';

/**
 * Reads of a workflow's executions as a history: newest or oldest first by creation time, then id,
 * so integer and uuid keys order alike. Plain reads: a caller inside a batched phase flushes first
 * (WorkflowStore.flush).
 */

/** The workflow's active execution (scheduled, waiting or in progress), if any. */
export function activeExecution(manager: EntityManager, workflowId: string): Promise<StepExecution | null> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .where('e.workflowId = :workflowId', { workflowId })
    .andWhere('e.state IN (:...states)', { states: ACTIVE_EXECUTION_STATES })
    .orderBy('e.createdAt', 'DESC')
    .addOrderBy('e.id', 'DESC')
    .getOne();
}

/** Cancels the workflow's preserved `scheduled`/`waiting` executions (see WorkflowStore.supersedeActive). */
export async function cancelPreserved(manager: EntityManager, workflowId: string, now: Date): Promise<void> {
  await manager
    .createQueryBuilder()
    .update(StepExecution)
    .set({ state: 'canceled', outcome: 'canceled', canceledAt: now, finishedAt: now, updatedAt: now })
    .where('workflow_id = :workflowId', { workflowId })
    .andWhere('state IN (:...states)', { states: ['scheduled', 'waiting'] })
    .execute();
}

/** The step of the workflow's most recent execution among `stepNames`, or null. */
export async function latestExecutedOf(manager: EntityManager, workflowId: string, stepNames: readonly string[]): Promise<string | null> {
  const latest = await manager.findOne(StepExecution, {
    where: { workflowId, stepName: In([...stepNames]) },
    select: { id: true, stepName: true, createdAt: true },
    order: { createdAt: 'DESC', id: 'DESC' },
  });
  return latest?.stepName ?? null;
}

/** The step's latest execution (its metadata), or null. */
export function latestExecutionOf(manager: EntityManager, workflowId: string, stepName: string): Promise<Pick<StepExecution, 'id' | 'metadata'> | null> {
  return manager.findOne(StepExecution, { where: { workflowId, stepName }, select: { id: true, metadata: true }, order: { createdAt: 'DESC', id: 'DESC' } });
}

/** The latest execution of the step that a successor should continue: completed as `continued`, or failed with a cursor; and not continued yet. */
export function unfinishedChainOf(manager: EntityManager, workflowId: string, stepName: string): Promise<StepExecution | null> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .where('e.workflowId = :workflowId AND e.stepName = :stepName', { workflowId, stepName })
    .andWhere("((e.state = 'completed' AND e.outcome = 'continued') OR (e.state = 'failed' AND e.cursor IS NOT NULL))")
    .andWhere((qb) => `NOT EXISTS ${qb.subQuery().select('1').from(StepExecution, 's').where('s.continues_from_id = e.id').getQuery()}`)
    .orderBy('e.createdAt', 'DESC')
    .addOrderBy('e.id', 'DESC')
    .getOne();
}
