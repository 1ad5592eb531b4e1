import type { EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { ACTIVE_EXECUTION_STATES } from '../state/step-execution-state.js';
import { ONGOING_WORKFLOW_STATES } from '../state/workflow-state.js';

/** How many ongoing workflows of a class stand at a step. */
export interface StepInFlight {
  workflowType: string;
  stepName: string;
  workflows: number;
}

/**
 * The steps ongoing workflows stand at, per class: the step of the workflow's active execution
 * (scheduled, parked or in progress), or, with none (paused by a failure or a pause from a step),
 * the step `resume` would run again (`nextStepName`). Finished and canceled workflows are not read.
 * The one read behind `removedStepsInFlight`, the pre-deploy check and its boot warning.
 */
export async function stepsInFlight(manager: EntityManager, workflowTypes?: readonly string[]): Promise<StepInFlight[]> {
  if (workflowTypes !== undefined && workflowTypes.length === 0) return [];
  const step = 'COALESCE(e.stepName, w.nextStepName)';
  const query = manager
    .createQueryBuilder(WorkflowRecord, 'w')
    .leftJoin(StepExecution, 'e', 'e.workflowId = w.id AND e.state IN (:...active)', { active: [...ACTIVE_EXECUTION_STATES] })
    .select('w.type', 'type')
    .addSelect(step, 'step')
    .addSelect('COUNT(*)', 'workflows')
    .where('w.state IN (:...ongoing)', { ongoing: [...ONGOING_WORKFLOW_STATES] })
    .andWhere(`${step} IS NOT NULL`);
  if (workflowTypes !== undefined) query.andWhere('w.type IN (:...types)', { types: [...workflowTypes] });
  const rows: Array<{ type: unknown; step: unknown; workflows: string | number }> = await query.groupBy('w.type').addGroupBy(step).orderBy('w.type').addOrderBy(step).getRawMany();
  // A raw read: no entity transformer.
  return rows.map((row) => ({ workflowType: String(identifierText(row.type)), stepName: String(identifierText(row.step)), workflows: Number(row.workflows) }));
}
