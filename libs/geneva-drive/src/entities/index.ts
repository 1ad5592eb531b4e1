import { Signal } from './signal.entity.js';
import { StepExecution } from './step-execution.entity.js';
import { WorkflowRecord } from './workflow.entity.js';

export { Signal, StepExecution, WorkflowRecord };
export type { SignalState } from './signal.entity.js';
export type { StepExecutionMetadata } from './step-execution.entity.js';

/** The entities to list in the application's TypeORM DataSource. @publicApi */
export const GENEVA_DRIVE_ENTITIES = [WorkflowRecord, StepExecution, Signal];
