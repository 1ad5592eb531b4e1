import type { EntityManager } from 'typeorm';
import { StepExecution } from '../../entities/step-execution.entity.js';
import { WorkflowRecord } from '../../entities/workflow.entity.js';

/**
 * The statements of a resumable step's checkpoints (StepIteration), sent with no transaction and
 * no lock while its body runs: the cursor's write, and the read that tells whether to stop.
 * Dialect-neutral (TypeORM's query builder); the same statements on every database.
 */

/**
 * Writes the execution's cursor, only while the row is still `in_progress`: a stalled worker whose
 * execution housekeeping recovered meanwhile must not rewrite the closed row's cursor.
 */
export async function writeCursor(manager: EntityManager, executionId: string, encoded: string): Promise<void> {
  await manager
    .createQueryBuilder()
    .update(StepExecution)
    .set({ cursor: () => ':cursor' })
    .setParameter('cursor', encoded)
    .where('id = :id', { id: executionId })
    .andWhere('state = :inProgress', { inProgress: 'in_progress' })
    .execute();
}

/** The states of the execution and its workflow as they are now (undefined when the execution is gone). */
export async function readRunStates(manager: EntityManager, executionId: string): Promise<{ workflowState?: string; executionState?: string } | undefined> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.state', 'workflowState')
    .addSelect('e.state', 'executionState')
    .where('e.id = :id', { id: executionId })
    .getRawOne();
}
