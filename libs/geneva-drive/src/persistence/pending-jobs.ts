import type { EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { RUNNABLE_WORKFLOW_STATES } from '../state/workflow-state.js';

/**
 * The executions that have a job due, as the rows tell: what a queue keeping its jobs in memory
 * (the local queue) rebuilds its timers from when it starts. Each comes with its workflow's type,
 * so that a process can leave alone the executions of classes or steps it does not have.
 */

/** An execution with a job due, and the type of its workflow. */
export interface PendingExecution {
  execution: StepExecution;
  workflowType: string;
}

/** `scheduled` executions of workflows that are ready or performing, with what their job needs. */
export async function scheduledOfRunnable(manager: EntityManager): Promise<PendingExecution[]> {
  const { entities, raw } = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select(['e.id', 'e.workflowId', 'e.stepName', 'e.scheduledFor', 'e.jobId'])
    .addSelect('w.type', 'workflow_type')
    .where("e.state = 'scheduled'")
    .andWhere('w.state IN (:...runnable)', { runnable: [...RUNNABLE_WORKFLOW_STATES] })
    .getRawAndEntities<RawType>();
  return withTypes(entities, raw);
}

/** Parked executions of `ready` workflows that have a deadline (its job is due then). */
export async function parkedWithDeadline(manager: EntityManager): Promise<PendingExecution[]> {
  const { entities, raw } = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select(['e.id', 'e.stepName', 'e.timeoutAt'])
    .addSelect('w.type', 'workflow_type')
    .where("e.state = 'waiting'")
    .andWhere('e.timeoutAt IS NOT NULL')
    .andWhere("w.state = 'ready'")
    .getRawAndEntities<RawType>();
  return withTypes(entities, raw);
}

/** The raw columns read beside the entity: its id (TypeORM's alias) and the workflow's type. */
type RawType = { e_id: unknown; workflow_type: unknown };

/** Each entity with the type read in its raw row, matched by id. */
function withTypes(entities: StepExecution[], raw: RawType[]): PendingExecution[] {
  const types = new Map(raw.map((row) => [String(identifierText(row.e_id)), String(identifierText(row.workflow_type))]));
  return entities.map((execution) => ({ execution, workflowType: types.get(String(execution.id)) ?? '' }));
}
