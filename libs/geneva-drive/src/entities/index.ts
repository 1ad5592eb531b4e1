import { ProcessRecord } from './process.entity.js';
import { Signal } from './signal.entity.js';
import { StepExecution } from './step-execution.entity.js';
import { WorkflowRecord } from './workflow.entity.js';

export { ProcessRecord, Signal, StepExecution, WorkflowRecord };
export type { SignalState } from './signal.entity.js';
export type { StepExecutionMetadata } from './step-execution.entity.js';

/**
 * The entities to list in the application's TypeORM DataSource. `ProcessRecord` (the process table)
 * is optional: without it, or without its migration, everything works but housekeeping's report of
 * executions no live process can run.
 * @publicApi
 */
export const GENEVA_DRIVE_ENTITIES = [WorkflowRecord, StepExecution, Signal, ProcessRecord];
