import type { LoggerService } from '@nestjs/common';
import type { Job, Queue, Worker } from 'bullmq';
import { handOffTurn, type DueJobStarter } from './due-job-starter.js';
import type { EnqueueOptions, QueuePort, StepJob, StepJobHandler } from '../interfaces/queue.port.js';
import { releasedJob } from './released-job.js';
import { RunLedger } from './run-ledger.js';
import { stepJobData, stepJobOptions, takeoverJob, type StepJobData } from './step-job-data.js';
import type { StepJobGate } from './step-job-gate.js';

/** BullMQ refuses job ids that are integers (execution ids are): a step job's id is the engine's behind this. */
const JOB_ID_PREFIX = 'step-';

/** The name of step jobs; repeated tasks (housekeeping) are named after themselves. */
export const STEP_JOB_NAME = 'step';

/** The BullMQ job id of an engine job id (the execution id or StepJob.jobId). */
export function bullMqJobId(engineJobId: string): string {
  return `${JOB_ID_PREFIX}${engineJobId}`;
}

/** The engine job id a BullMQ job id stands for. */
export function engineJobId(bullMqJobId: string): string {
  return bullMqJobId.startsWith(JOB_ID_PREFIX) ? bullMqJobId.slice(JOB_ID_PREFIX.length) : bullMqJobId;
}

/**
 * Hands a job back to the queue, as a new delayed job (released-job.ts): this process does not have
 * its execution's workflow class or step, and decided nothing about it. The step's priority stays.
 */
export async function releaseBullMqJob(queue: Queue<StepJobData>, job: Job<StepJobData>, engineJobId: string): Promise<void> {
  const { id, data, delay } = releasedJob(job.data, engineJobId);
  const priority = job.opts.priority ? { priority: job.opts.priority } : {};
  await queue.add(STEP_JOB_NAME, data, { jobId: bullMqJobId(id), ...stepJobOptions({ executionId: data.executionId, runAt: new Date(Date.now() + delay), jobOptions: priority }) });
}

/** What the adapter needs of the engine's consumer (bullmq-queue.module.ts): its worker, and where repeated tasks go. */
export interface BullMqStepConsumer {
  readonly worker: Worker;
  readonly tasks: Map<string, () => Promise<unknown>>;
}

/** The RunLedger of a process that works a BullMQ queue: on the queue's client, leased as long as its worker locks a job. */
export function bullMqRunLedger(queue: Queue<StepJobData>, consumer: BullMqStepConsumer, logger: LoggerService): RunLedger {
  return new RunLedger(
    async () => {
      const client = await queue.getBackend().client;
      return {
        defineCommand: (name, definition) => client.defineCommand(name, definition),
        run: (name, args) => client.runCommand(name, args),
        hset: (key, data) => client.hset(key, data),
        hdel: (key, ...fields) => client.hdel(key, ...fields),
      };
    },
    () => ({ keyPrefix: queue.toKey(''), leaseMs: consumer.worker.opts.lockDuration ?? 30_000 }),
    logger,
  );
}

/** The states of a BullMQ job that will still run. */
const TO_RUN = new Set<string>(['waiting', 'waiting-children', 'prioritized', 'delayed', 'active']);

/**
 * Step jobs on BullMQ (Redis), the counterpart of BullQueueAdapter: the queue is the one
 * @nestjs/bullmq registered, consumed by a Nest-managed `@Processor` worker that hands step jobs to
 * the engine through `gate` and runs repeated tasks by job name. One job per engine job id (BullMQ,
 * like Bull, answers an add of an existing id with the existing job), one attempt, removed once
 * done. An enqueue-only process (concurrency 0) has no consumer.
 */
export class BullMqQueueAdapter implements QueuePort {
  constructor(
    readonly queue: Queue<StepJobData>,
    private readonly gate: StepJobGate,
    private readonly consumer: BullMqStepConsumer | null,
    private readonly logger: LoggerService,
    /** Starts a job due now in this process instead (see DueJobStarter). */
    private readonly starter: DueJobStarter,
  ) {}

  /** The engine's worker in this process, none in an enqueue-only one. */
  get worker(): Worker | undefined {
    return this.consumer?.worker;
  }

  /**
   * As BullQueueAdapter.enqueue: a job due now may start here; whether the job was added is read just
   * before the add, and only when asked, and a job of that id that will never run is removed first.
   */
  async enqueue(job: StepJob, options?: EnqueueOptions): Promise<boolean> {
    if (options?.afterCommit) await handOffTurn();
    if (this.starter.tryStart(job, (held) => this.add(held), options)) {
      await this.starter.recorded();
      return true;
    }
    let queued = false;
    if (options?.reportAdded) {
      const existing = await this.queue.getJob(bullMqJobId(job.jobId ?? job.executionId));
      queued = existing !== undefined && TO_RUN.has(await existing.getState());
      if (existing && !queued) await existing.remove();
    }
    await this.add(job);
    return !queued;
  }

  private add(job: StepJob): Promise<unknown> {
    return this.queue.add(STEP_JOB_NAME, stepJobData(job), { jobId: bullMqJobId(job.jobId ?? job.executionId), ...stepJobOptions(job) });
  }

  /** Puts a dead process's run back on the queue (RunLedger), under an id of its own. */
  private addTakeover(job: StepJob): Promise<unknown> {
    const { id, data, options } = takeoverJob(job);
    return this.queue.add(STEP_JOB_NAME, data, { jobId: bullMqJobId(id), ...options });
  }

  async start(handler: StepJobHandler): Promise<void> {
    this.queue.on('error', (error) => this.logger.error(`BullMQ queue error: ${String(error)}`));
    this.worker?.on('error', (error) => this.logger.error(`BullMQ worker error: ${String(error)}`));
    this.gate.start(handler);
    await this.starter.start((job) => this.addTakeover(job));
  }

  /** A job scheduler: Redis holds one schedule per name for the whole cluster, so one worker runs each period; upserting replaces an earlier period. */
  async repeat(name: string, everyMs: number, task: () => Promise<unknown>): Promise<void> {
    if (!this.consumer) return;
    this.consumer.tasks.set(name, task);
    await this.queue.upsertJobScheduler(name, { every: everyMs }, { name, data: {} as StepJobData, opts: { removeOnComplete: true, removeOnFail: true } });
  }

  /** A cheap read: BullMQ's datastore-neutral client has no ping. */
  async ping(): Promise<void> {
    await this.queue.count();
  }

  /** Refuses jobs not yet handed over and waits for the running ones; @nestjs/bullmq closes the queue at shutdown. */
  async stop(): Promise<void> {
    this.gate.refuse();
    await this.starter.settle();
    await this.consumer?.worker.close();
  }
}
