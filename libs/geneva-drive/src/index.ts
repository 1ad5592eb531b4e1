export { GenevaDriveModule } from './geneva-drive.module.js';
export { QUEUE_PORT } from './geneva-drive.constants.js';
export type * from './interfaces/geneva-drive-options.interface.js';
export type * from './interfaces/step-options.interface.js';
export type * from './interfaces/workflow-options.interface.js';
export { Step, addStep } from './decorators/step.decorator.js';
export { ResumableStep, type ResumableStepOptions } from './decorators/resumable-step.decorator.js';
export { StepIteration } from './execution/step-iteration.js';
export { Workflow } from './decorators/workflow.decorator.js';
export { GenevaWorkflow } from './workflow/geneva-workflow.js';
export { WorkflowService, type StartOptions } from './workflow/workflow.service.js';
export { SignalService, type SignalOptions, type StartSignal } from './signals/signal.service.js';
export { SignalMatcher, type SignalMatcherLike } from './signals/signal-matcher.js';
export { HousekeepingService, type Gauge, type HousekeepingSummary } from './housekeeping/housekeeping.service.js';
export { ExecutorService, type ExecuteOptions } from './execution/executor.service.js';
export { HeroTypeNotFoundError } from './execution/hero.js';
export { ExceptionPolicy, type ExceptionAction, type ErrorMatcher, type ExceptionHandler, type ExceptionPolicyOptions } from './exception-policy/exception-policy.js';
export type { Backoff, ReattemptWait } from './exception-policy/backoff.js';
export { FlowControlSignal, isFlowControl } from './flow-control/flow-control.js';
export { GENEVA_DRIVE_ENTITIES, Signal, StepExecution, WorkflowRecord, type SignalState, type StepExecutionMetadata } from './entities/index.js';
export { GENEVA_DRIVE_MIGRATIONS, genevaDriveMigrations, type GenevaDriveMigrationsOptions } from './migrations/index.js';
export type { PrimaryKeyType } from './persistence/primary-keys.js';
export * from './errors/index.js';
export type { WorkflowState } from './state/workflow-state.js';
export type { StepExecutionState, StepOutcome } from './state/step-execution-state.js';
export {
  GENEVA_DRIVE_CHANNELS,
  GENEVA_DRIVE_TRACING_CHANNELS,
  type ExecutionEvent,
  type FinalizeEvent,
  type PreconditionEvent,
  type SignalCall,
  type SignalEvent,
  type SignalTimeoutEvent,
  type StartCall,
  type StepEvent,
} from './instrumentation/geneva-drive.events.js';
export { setJobContextPropagator, type JobContextPropagator } from './instrumentation/job-context.js';
export type { QueuePort, StepJob, StepJobHandler, StepJobHints } from './queue/queue.port.js';
export type { Duration } from './util/duration.js';
export type { GenevaDriveCliConfig } from './cli/cli-config.js';
