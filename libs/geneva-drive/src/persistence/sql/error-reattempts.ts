import { In, type EntityManager } from 'typeorm';
import { StepExecution } from '../../entities/step-execution.entity.js';

/**
 * Error-driven reattempts of `stepName` since its last clean completion (flow-control reattempts
 * do not count): the history of the step, newest first, read until a `success` or `recovered` row.
 * Ordered by creation time and id, so it works with any key type. A read beside the store: the
 * caller writes its phase's pending writes first (WorkflowStore.flush).
 */
export async function consecutiveErrorReattempts(manager: EntityManager, workflowId: string, stepName: string): Promise<number> {
  const rows = await manager.find(StepExecution, {
    where: { workflowId, stepName, state: In(['completed', 'failed']) },
    select: { id: true, state: true, outcome: true, metadata: true, createdAt: true },
    order: { createdAt: 'DESC', id: 'DESC' },
  });
  let count = 0;
  for (const row of rows) {
    if (row.outcome === 'success' || row.outcome === 'recovered') break; // a clean completion resets the count
    const reason = row.metadata?.reattemptReason;
    if (row.outcome === 'reattempted' ? reason !== 'flow_control' : row.state === 'failed' && reason !== undefined) count++;
  }
  return count;
}
