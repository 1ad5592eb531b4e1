import type { LoggerService } from '@nestjs/common';
import { StepNotDefinedError } from '../errors/step-not-defined.error.js';
import { parkedWithDeadline, scheduledOfRunnable, type PendingExecution } from '../persistence/pending-jobs.js';
import { missingHere } from '../registry/runnable-steps.js';
import type { WorkflowRegistry } from '../registry/workflow.registry.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import type { TransactionRunner } from '../persistence/transaction-runner.js';
import { ContextLogger } from '../instrumentation/context-logger.js';
import { deadlineJobId, isDeadlineJob } from './deadline-job.js';
import type { QueuePort, StepJob, StepJobHandler, StepJobHints } from '../interfaces/queue.port.js';

interface ReadyJob {
  executionId: string;
  jobId: string;
  hints?: StepJobHints;
}

// setTimeout cannot wait longer than 2^31-1 ms (~24.8 days); longer waits re-arm.
const MAX_TIMER_MS = 2_147_483_647;

/**
 * Runs step jobs in this process with timers. Restart-safe: at start it rebuilds its timers from
 * the scheduled executions of runnable workflows, and the deadlines of their parked ones, so nothing
 * is lost with the process. For the embedded default and development; use Bull to run several
 * processes. Its timers keep the process alive (a worker-only application context keeps running)
 * until the application is closed.
 *
 * Executions of a workflow class or step this process does not have (another version's: see
 * registry/runnable-steps.ts) are left alone: the boot scan arms no timer for them, and a job of
 * theirs enqueued here (the handler ends with StepNotDefinedError, having decided nothing) is
 * dropped — no other process reads this queue, so handing it back would only loop here. A process
 * that has the class runs them from its own boot scan, or housekeeping's stuck-scheduled sweep.
 */
export class LocalQueueAdapter implements QueuePort {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly intervals: NodeJS.Timeout[] = [];
  private readonly ready: Array<ReadyJob & { key: string }> = [];
  private readonly running = new Set<Promise<void>>();
  private handler: StepJobHandler | undefined;
  private stopped = false;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly concurrency: number,
    private readonly logger: LoggerService,
    private readonly schema: SchemaCapabilities,
    private readonly registry: WorkflowRegistry,
  ) {}

  async enqueue(job: StepJob): Promise<boolean> {
    if (this.stopped) return false;
    return this.arm({ executionId: job.executionId, jobId: job.jobId ?? job.executionId, hints: job.hints }, job.runAt.getTime());
  }

  async start(handler: StepJobHandler): Promise<void> {
    this.handler = handler;
    this.stopped = false;
    const due = this.ownedOnly(await scheduledOfRunnable(this.transactions.dataSource.manager), 'scheduled');
    // A woken execution keeps its wake-up job id; any other stands for its first job.
    for (const execution of due) {
      this.arm({ executionId: execution.id, jobId: execution.jobId ?? execution.id, hints: { workflowId: execution.workflowId } }, execution.scheduledFor.getTime());
    }
    if (this.schema.hasDeadlines) {
      const parked = this.ownedOnly(await parkedWithDeadline(this.transactions.dataSource.manager), 'parked');
      for (const execution of parked) this.arm({ executionId: execution.id, jobId: deadlineJobId(execution.id) }, execution.timeoutAt!.getTime());
    }
  }

  /** The executions this process has the class and step of; one warning per class (or class and step) for the others, left untouched. */
  private ownedOnly(pending: PendingExecution[], what: 'scheduled' | 'parked'): PendingExecution['execution'][] {
    const left = new Map<string, number>();
    const owned: PendingExecution['execution'][] = [];
    for (const { execution, workflowType } of pending) {
      const missing = missingHere(this.registry, workflowType, execution.stepName);
      if (missing === null) owned.push(execution);
      else {
        const key = missing === 'class' ? `workflow ${workflowType} (not registered in this process)` : `step "${execution.stepName}" of workflow ${workflowType} (not defined in this process)`;
        left.set(key, (left.get(key) ?? 0) + 1);
      }
    }
    for (const [key, count] of left) {
      this.logger.warn(`${count} ${what} execution(s) of ${key} left untouched at boot: a process that has it runs them`);
    }
    return owned;
  }

  async repeat(name: string, everyMs: number, task: () => Promise<unknown>): Promise<void> {
    const interval = setInterval(() => {
      task().catch((error) => this.logger.error(`${name} failed: ${String(error)}`));
    }, everyMs);
    this.intervals.push(interval);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const interval of this.intervals.splice(0)) clearInterval(interval);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.ready.length = 0;
    await Promise.allSettled([...this.running]);
  }

  /**
   * Arms a timer for the execution; false when one is already armed or due (one job per execution at
   * a time: duplicates collapse). A deadline job is keyed apart: it waits beside the step's own jobs.
   */
  private arm(job: ReadyJob, at: number): boolean {
    const key = isDeadlineJob(job.jobId) ? job.jobId : job.executionId;
    if (this.timers.has(key) || this.ready.some((ready) => ready.key === key)) return false;
    const delay = at - Date.now();
    if (delay <= 0) {
      // Due now: no timer between the commit that enqueued it and its start.
      this.ready.push({ ...job, key });
      this.drain();
      return true;
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      if (delay > MAX_TIMER_MS) return void this.arm(job, at);
      this.ready.push({ ...job, key });
      this.drain();
    }, Math.min(delay, MAX_TIMER_MS));
    this.timers.set(key, timer);
    return true;
  }

  private drain(): void {
    while (!this.stopped && this.handler && this.running.size < this.concurrency && this.ready.length > 0) {
      const { executionId, jobId, hints } = this.ready.shift()!;
      const run = this.handler(executionId, jobId, hints)
        .catch(async (error) => {
          // Another version's execution, untouched: dropped (the warning was given once, not per job).
          if (error instanceof StepNotDefinedError) return;
          const logger = await ContextLogger.forExecution(this.logger, this.transactions.dataSource.manager, executionId);
          logger.warn(`Step job ${jobId} ended with ${String(error)}`);
        })
        .finally(() => {
          this.running.delete(run);
          this.drain();
        });
      this.running.add(run);
    }
  }
}
