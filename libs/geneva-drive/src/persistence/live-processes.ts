import { In, type EntityManager } from 'typeorm';
import { identifierText } from '../entities/column-transformers.js';
import { ProcessRecord } from '../entities/process.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { ONGOING_WORKFLOW_STATES } from '../state/workflow-state.js';

/**
 * The process table's reads and writes (housekeeping/process-roster.ts owns the behaviour), and the
 * count of executions waiting for some process to run them, by workflow type and step.
 */

/** Writes the process's row, inserting it the first time (or after it was deleted). */
export async function recordProcess(manager: EntityManager, row: ProcessRecord): Promise<void> {
  await manager.upsert(ProcessRecord, row, { conflictPaths: ['id'], skipUpdateIfNoValuesChanged: false });
}

/** Deletes the process's row (a clean stop). */
export async function removeProcess(manager: EntityManager, id: string): Promise<void> {
  await manager.delete(ProcessRecord, { id });
}

/** Every row of the process table (a row per process: a small table). */
export function allProcesses(manager: EntityManager): Promise<ProcessRecord[]> {
  return manager.find(ProcessRecord, { order: { id: 'ASC' } });
}

/** Deletes the rows of these processes (gone without a clean stop). */
export async function forgetProcesses(manager: EntityManager, ids: string[]): Promise<void> {
  if (ids.length > 0) await manager.delete(ProcessRecord, { id: In(ids) });
}

/** One workflow type and step, and how many of its executions wait to run. */
export interface PendingStepCount {
  workflowType: string;
  stepName: string;
  count: number;
}

/**
 * `scheduled` and `waiting` executions of ongoing workflows (ready, performing, paused), counted by
 * workflow type and step: what some process must be able to run. A read of the active executions
 * only (the state index), once per housekeeping run.
 */
export async function pendingStepCounts(manager: EntityManager): Promise<PendingStepCount[]> {
  const rows: Array<{ type: unknown; step: unknown; pending: string | number }> = await manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('w.type', 'type')
    .addSelect('e.stepName', 'step')
    .addSelect('COUNT(*)', 'pending')
    .where('e.state IN (:...active)', { active: ['scheduled', 'waiting'] })
    .andWhere('w.state IN (:...ongoing)', { ongoing: [...ONGOING_WORKFLOW_STATES] })
    .groupBy('w.type')
    .addGroupBy('e.stepName')
    .getRawMany();
  // A raw read: identity strings come back as Buffers on MySQL.
  return rows.map((row) => ({ workflowType: String(identifierText(row.type)), stepName: String(identifierText(row.step)), count: Number(row.pending) }));
}
