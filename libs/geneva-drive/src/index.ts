export { GenevaDriveModule } from './geneva-drive.module.js';
export { QUEUE_PORT } from './geneva-drive.constants.js';
export type {
  BullMqQueueAdapterOptions,
  BullQueueAdapterOptions,
  CustomQueueAdapterOptions,
  GenevaDriveModuleOptions,
  LocalQueueAdapterOptions,
  ManualQueueAdapterOptions,
  QueueAdapterOptions,
  RedisConnectionOptions,
} from './interfaces/geneva-drive-options.interface.js';
export type { ProgrammaticStepOptions, StepJobOptions, StepOptions, TimeoutAction, WorkflowCondition } from './workflow/step-options.interface.js';
export type { ClassExceptionPolicy, RemovedStepOptions, WorkflowOptions } from './workflow/workflow-options.interface.js';
export type { ConcurrencyOptions } from './workflow/concurrency-options.js';
export type { RateLimitOptions } from './workflow/rate-limit-options.js';
export { Step, addStep } from './workflow/step.decorator.js';
export { ResumableStep, type ResumableStepOptions } from './workflow/resumable-step.decorator.js';
export { StepIteration } from './workflow/step-iteration.js';
export { Workflow } from './workflow/workflow.decorator.js';
export { GenevaWorkflow } from './workflow/geneva-workflow.js';
export { WorkflowService, type ChildrenPageOptions, type RemovedStepInFlight, type StartOptions } from './client/workflow.service.js';
export { DeployCheck, type DeployCheckReport, type StrandedReason, type StrandedStep } from './client/deploy-check.js';
export { SignalService, type SignalOptions, type StartSignal } from './client/signal.service.js';
export { SignalMatcher, type SignalMatcherLike } from './workflow/signal-matcher.js';
export {
  CHILD_FINISHED,
  ChildrenMatcher,
  childrenOf,
  type ChildEndState,
  type ChildFinishedPayload,
  type ChildrenCount,
  type ChildrenOfOptions,
  type ChildWorkflow,
} from './workflow/children-matcher.js';
export type { ChildHandle, ChildSignal, OnParentCancel, StartChildOptions } from './workflow/start-child.js';
export { HousekeepingService, type Gauge, type HousekeepingSummary, type StepGauge } from './housekeeping/housekeeping.service.js';
export { ExecutorService, type ExecuteOptions } from './execution/executor.service.js';
export { ExceptionPolicy, type ExceptionAction, type ErrorMatcher, type ExceptionHandler, type ExceptionPolicyOptions } from './exception-policy/exception-policy.js';
export type { Backoff, ReattemptWait } from './exception-policy/backoff.js';
export { FlowControlSignal, isFlowControl } from './workflow/flow-control.js';
export { GENEVA_DRIVE_ENTITIES, Signal, StepExecution, WorkflowRecord, type SignalState, type StepExecutionMetadata } from './entities/index.js';
export { GENEVA_DRIVE_MIGRATIONS, genevaDriveMigrations, type GenevaDriveMigrationsOptions } from './migrations/index.js';
export type { PrimaryKeyType } from './migrations/primary-keys.js';
export { GenevaDriveError, isGenevaDriveError } from './errors/geneva-drive.error.js';
export { ChildrenNotMigratedError } from './errors/children-not-migrated.error.js';
export { CommitOutcomeUnknownError } from './errors/commit-outcome-unknown.error.js';
export { CursorTooLargeError } from './errors/cursor-too-large.error.js';
export { DataSourceNotFoundError } from './errors/data-source-not-found.error.js';
export { EntitiesNotRegisteredError } from './errors/entities-not-registered.error.js';
export { FlowControlNotMigratedError } from './errors/flow-control-not-migrated.error.js';
export { ConcurrencyKeyError } from './errors/concurrency-key.error.js';
export { HeroTypeNotFoundError } from './errors/hero-type-not-found.error.js';
export { InvalidHeroError } from './errors/invalid-hero.error.js';
export { InvalidOptionError } from './errors/invalid-option.error.js';
export { InvalidStateError } from './errors/invalid-state.error.js';
export { InvalidTransitionError } from './errors/invalid-transition.error.js';
export { MissingDependencyError } from './errors/missing-dependency.error.js';
export { NotInitialisedError } from './errors/not-initialised.error.js';
export { QueueConfigurationError } from './errors/queue-configuration.error.js';
export { ResultTooLargeError } from './errors/result-too-large.error.js';
export { SchemaNotMigratedError } from './errors/schema-not-migrated.error.js';
export {
  DeadlinesNotMigratedError,
  InvalidSignalError,
  NoOngoingWorkflowError,
  SignalOutcomeUnknownError,
  SignalPayloadTooLargeError,
  SignalNotReceivedError,
  SignalsNotMigratedError,
  UnknownSignalNameError,
  WorkflowNotOngoingError,
} from './errors/signal.errors.js';
export { StepConfigurationError } from './errors/step-configuration.error.js';
export { StepNotDefinedError } from './errors/step-not-defined.error.js';
export { NotTransactionalError, TransactionTimeoutError } from './errors/transactional-step.errors.js';
export { StepRecoveryLimitError } from './errors/step-recovery-limit.error.js';
export { UnencodableValueError } from './errors/unencodable-value.error.js';
export { UnknownWorkflowError } from './errors/unknown-workflow.error.js';
export { WorkflowAlreadyOngoingError } from './errors/workflow-already-ongoing.error.js';
export { WorkflowNotFoundError } from './errors/workflow-not-found.error.js';
export type { GenevaDriveCliConfig } from './interfaces/cli-config.interface.js';
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
export type { EnqueueOptions, QueuePort, StepJob, StepJobHandler, StepJobHints } from './interfaces/queue.port.js';
export type { Duration } from './util/duration.js';
