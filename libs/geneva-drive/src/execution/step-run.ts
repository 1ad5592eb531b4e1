import type { LoggerService } from '@nestjs/common';
import type { StepExecution } from '../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../entities/workflow.entity.js';
import type { ExceptionPolicy } from '../exception-policy/exception-policy.js';
import type { StepJobHints } from '../interfaces/queue.port.js';
import type { StepTransaction } from '../persistence/step-transaction.js';
import type { TransactionOptions } from '../persistence/transaction-runner.js';
import type { StepDefinition, WorkflowDefinition } from '../registry/workflow-definition.js';
import type { FlowControlIntent } from '../workflow/flow-control.js';
import type { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import type { StepOutputs } from './child-start.js';

/**
 * What the executor's phases hand one another while they run one step execution (see
 * ExecutorService): prepare-phase.ts starts it, step-body.ts runs its body, finalize-phase.ts
 * records the outcome through step-outcome.ts.
 */

/**
 * How to run one execution. Test helpers run resumable steps to their end (`interruptible: false`)
 * or for a number of checkpoints (`maxIterations`).
 */
export interface ExecuteOptions {
  /** Whether checkpoints may stop a resumable step (runtime and iteration budgets, shutdown). @default true */
  interruptible?: boolean;
  /** Overrides the step's `maxIterations` for this execution. */
  maxIterations?: number;
  /** The id of the queue job running the execution, recorded on it (`StepExecution.jobId`) when it starts. */
  jobId?: string;
  /** What the job carries besides the execution id: its workflow, type, step and hero (they save lookups; see StepJob.hints). */
  hints?: StepJobHints;
  /** Run the steps that come due as each finishes in this call, within the module's `chainSteps` bounds (queue workers do; test helpers run one step). */
  chain?: boolean;
}

/** Everything phase 1 hands to phases 2 and 3. */
export interface Prepared {
  executionId: string;
  workflowId: string;
  definition: WorkflowDefinition;
  step: StepDefinition;
  instance: GenevaWorkflow<any>;
  /** The rows as phase 1 left them (phase 3 checks them as it writes, or reads them again under the locks). */
  workflow: WorkflowRecord;
  execution: StepExecution;
  logger: LoggerService;
  run: ExecuteOptions;
  /** A transactional step's transaction, begun already by the COMMIT of the finalize that chained it (FinalizePhase.commitChaining). */
  transaction?: StepTransaction;
  /** What the body's last run handed over (children, a result), written with an outcome that keeps it ({@link keepsOutputs}). */
  outputs?: StepOutputs;
  /** A fan-in step's: the `child_finished` signals its gate claimed, consumed at its clean end (FanIn). */
  fanInSignals?: string[];
}

/** How far the current chain of inline steps has gone. */
export interface Chain {
  steps: number;
  startedAt: number;
}

/** `missing`: no such workflow (yet: the transaction that enqueued the job may not have committed). */
export type PrepareResult = { run: Prepared } | { done: true; error?: unknown } | { missing: true };

/** What phase 2 ended with. */
export type BodyResult =
  | { kind: 'completed' }
  | { kind: 'flow'; intent: FlowControlIntent }
  | { kind: 'exception'; error: unknown; policy: ExceptionPolicy };

/**
 * Whether the body's outputs (its children and result, a transactional body's writes) are kept with
 * this outcome: the step decided (completed, `finished()`, `skip()`). An exception, `reattempt()`,
 * `pause()` and `cancel()` keep none.
 */
export function keepsOutputs(result: BodyResult): boolean {
  return result.kind === 'completed' || (result.kind === 'flow' && (result.intent.kind === 'finished' || result.intent.kind === 'skip'));
}

/** Phase 3, as phase 1 calls it when it started an execution whose body cannot run (see PreparePhase). */
export type Finalize = (prepared: Prepared, result: BodyResult) => Promise<Prepared | null>;

export const LOOKUP_ATTEMPTS = 5;
export const LOOKUP_PAUSE_MS = 100;
export const IDEMPOTENT: TransactionOptions = { idempotent: true };

/** The fields every executor event about the execution carries. */
export function eventBase(prepared: Prepared, started: number) {
  return {
    executionId: prepared.executionId,
    workflowId: prepared.workflowId,
    workflowClass: prepared.definition.name,
    stepName: prepared.step.name,
    durationMs: performance.now() - started,
  };
}
