import { In, LessThan, type EntityManager } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';

/** What a purge deleted. */
export interface Deleted {
  signals: number;
  executions: number;
  workflows: number;
}

/**
 * Up to `limit` ids of workflows finished or canceled before `cutoff`. Ids first, then deletes by id
 * (see deleteWorkflows): portable (MySQL refuses LIMIT inside IN (subquery)) and bounded.
 */
export async function stoppedBefore(manager: EntityManager, cutoff: Date, limit: number): Promise<string[]> {
  const rows = await manager.find(WorkflowRecord, {
    select: { id: true },
    where: { state: In(['finished', 'canceled']), finishedAt: LessThan(cutoff) },
    take: limit,
  });
  return rows.map((row) => row.id);
}

/** Deletes the workflows and their rows, children first (signals only where the table exists); run it in one transaction. */
export async function deleteWorkflows(manager: EntityManager, ids: string[], withSignals: boolean): Promise<Deleted> {
  const signals = withSignals ? ((await manager.delete(Signal, { workflowId: In(ids) })).affected ?? 0) : 0;
  const executions = (await manager.delete(StepExecution, { workflowId: In(ids) })).affected ?? 0;
  const workflows = (await manager.delete(WorkflowRecord, { id: In(ids) })).affected ?? 0;
  return { signals, executions, workflows };
}
