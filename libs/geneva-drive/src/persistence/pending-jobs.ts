import type { EntityManager } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { RUNNABLE_WORKFLOW_STATES } from '../state/workflow-state.js';

/**
 * The executions that have a job due, as the rows tell: what a queue keeping its jobs in memory
 * (the local queue) rebuilds its timers from when it starts.
 */

/** `scheduled` executions of workflows that are ready or performing, with what their job needs. */
export function scheduledOfRunnable(manager: EntityManager): Promise<StepExecution[]> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select(['e.id', 'e.workflowId', 'e.scheduledFor', 'e.jobId'])
    .where("e.state = 'scheduled'")
    .andWhere('w.state IN (:...runnable)', { runnable: [...RUNNABLE_WORKFLOW_STATES] })
    .getMany();
}

/** Parked executions of `ready` workflows that have a deadline (its job is due then). */
export function parkedWithDeadline(manager: EntityManager): Promise<StepExecution[]> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select(['e.id', 'e.timeoutAt'])
    .where("e.state = 'waiting'")
    .andWhere('e.timeoutAt IS NOT NULL')
    .andWhere("w.state = 'ready'")
    .getMany();
}
