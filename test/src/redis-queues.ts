/**
 * The two Redis queue adapters, `bull` and `bullmq`, seen the same way by the specs that run over
 * both: the module options, a look at the queue in Redis (jobs by engine job id, counts, the engine
 * worker's events), and a handle of the test's own for wiping a prefix.
 */
import Bull from 'bull';
import { Queue as BullMqQueue, type Job as BullMqJob } from 'bullmq';
import type { Redis } from 'ioredis';
import type { BullMqQueueAdapterOptions, BullQueueAdapterOptions, QueuePort } from 'geneva-drive';
import { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { BullMqQueueAdapter, bullMqJobId, engineJobId, STEP_JOB_NAME } from '../../libs/geneva-drive/src/queue/bullmq-queue.adapter.js';
import { redisUrl } from '../utils/databases.js';

export type RedisAdapter = 'bull' | 'bullmq';
export const REDIS_ADAPTERS: RedisAdapter[] = ['bull', 'bullmq'];

/** A job as the specs check it; `id` is the engine's job id (the execution id, or a wake-up's). */
export interface QueuedJob {
  id: string;
  /** The id of the job in Redis (BullMQ's stands behind `step-`). */
  queueId: string;
  data: unknown;
  state: string;
  attempts: number | undefined;
  /** When the queue will deliver it (added at + delay). */
  dueAt: number;
}

export interface JobCounts {
  waiting: number;
  active: number;
  delayed: number;
  completed: number;
  failed: number;
}

export interface JobEvent {
  jobId: string;
  executionId: string;
}

export interface FailedJobEvent extends JobEvent {
  attemptsMade: number;
  attempts: number | undefined;
  message: string;
}

/** The queue of a running adapter, or of a handle on a name and prefix. */
export interface QueueView {
  getJob(engineJobId: string): Promise<QueuedJob | null>;
  counts(): Promise<JobCounts>;
  /** Engine job ids of the delayed jobs. */
  delayedIds(): Promise<string[]>;
  /** The repeated tasks scheduled in Redis: name and period. */
  schedules(): Promise<Array<[name: string, everyMs: number]>>;
  /** Workers connected to the queue, in any process. */
  workerCount(): Promise<number>;
  /** Makes a delayed job due now. */
  promote(engineJobId: string): Promise<void>;
  /**
   * Takes a waiting job off the queue's lists and keeps its data: the job in no list that a worker
   * leaves behind when it loses the job in a Redis restart, which no worker will ever take.
   */
  strand(engineJobId: string): Promise<void>;
  /** Adds a step job as the engine would (one attempt, removed once done) under an id of the test's choosing. */
  addStepJob(data: { executionId: string }, engineJobId: string): Promise<void>;
  /** Pauses the queue for every worker (a flag in Redis, which a server without persistence loses when killed): jobs added meanwhile wait. */
  pause(): Promise<void>;
  /** Lifts that pause. */
  resume(): Promise<void>;
  /** Jobs waiting for a worker, a paused queue's included. */
  waitingCount(): Promise<number>;
  /** Removes waiting and delayed jobs, hashes included. */
  removePending(): Promise<void>;
  /** Closes the queue's Redis connection (the lost-enqueue proofs make enqueues fail with it). */
  close(): Promise<void>;
}

export interface RedisQueueDriver {
  adapter: RedisAdapter;
  /** The id of the job in Redis for an engine job id. */
  queueJobId(engineJobId: string): string;
  options(options: { name: string; prefix?: string; concurrency?: number; redis?: string }): BullQueueAdapterOptions | BullMqQueueAdapterOptions;
  /** The running adapter's queue. */
  view(port: QueuePort): QueueView;
  /** A handle of the test's own on `name` under `prefix`. */
  handle(name: string, prefix: string): QueueView & { obliterate(): Promise<void> };
  /** The engine worker's events in this process. */
  onActive(port: QueuePort, listener: (job: JobEvent) => void): void;
  onFailed(port: QueuePort, listener: (job: FailedJobEvent) => void): void;
  onCompleted(port: QueuePort, listener: (job: JobEvent) => void): void;
  /**
   * Stops the engine worker of this process from taking jobs, other workers going on: resolves once
   * the jobs it had are done and its blocking read is cut, so it takes none after that. Bull's
   * blocking read moves a job to the active list by itself: one it gets as it is cut stays there,
   * run by nobody, until the stalled-job check. Pause the queue around it when jobs may come due.
   */
  pauseWorker(port: QueuePort): Promise<void>;
}

const bull: RedisQueueDriver = {
  adapter: 'bull',
  queueJobId: (id) => id,
  options: (options) => ({ adapter: 'bull', redis: redisUrl(), ...options }),
  view: (port) => bullView(bullQueue(port)),
  handle(name, prefix) {
    const queue = new Bull(name, redisUrl(), { prefix });
    return { ...bullView(queue), obliterate: () => queue.obliterate({ force: true }) };
  },
  onActive: (port, listener) => bullQueue(port).on('active', (job) => listener({ jobId: String(job.id), executionId: job.data.executionId })),
  onFailed: (port, listener) =>
    bullQueue(port).on('failed', (job, error) =>
      listener({ jobId: String(job.id), executionId: job.data.executionId, attemptsMade: job.attemptsMade, attempts: job.opts.attempts, message: error.message }),
    ),
  onCompleted: (port, listener) => bullQueue(port).on('completed', (job) => listener({ jobId: String(job.id), executionId: job.data.executionId })),
  // Local: the flag in Redis would pause every worker.
  pauseWorker: (port) => bullQueue(port).pause(true),
};

function bullQueue(port: QueuePort): Bull.Queue<{ executionId: string }> {
  if (!(port instanceof BullQueueAdapter)) throw new Error(`expected the bull adapter, got ${port.constructor.name}`);
  return port.queue;
}

function bullView(queue: Bull.Queue): QueueView {
  return {
    async getJob(id) {
      const job = await queue.getJob(id);
      if (!job) return null;
      return { id: String(job.id), queueId: String(job.id), data: job.data, state: await job.getState(), attempts: job.opts.attempts, dueAt: job.timestamp + (job.opts.delay ?? 0) };
    },
    counts: () => queue.getJobCounts(),
    delayedIds: async () => (await queue.getDelayed()).map((job) => String(job.id)),
    schedules: async () => (await queue.getRepeatableJobs()).map((job) => [job.name, Number(job.every)]),
    workerCount: async () => (await queue.getWorkers()).length,
    promote: async (id) => (await queue.getJob(id))!.promote(),
    async strand(id) {
      await queue.client.lrem(queue.toKey('wait'), 0, id);
    },
    async addStepJob(data, id) {
      await queue.add(data, { jobId: id, attempts: 1, removeOnComplete: true, removeOnFail: true });
    },
    pause: () => queue.pause(),
    resume: () => queue.resume(),
    waitingCount: () => queue.getWaitingCount(),
    async removePending() {
      await queue.clean(0, 'delayed');
      await queue.clean(0, 'wait');
    },
    close: () => queue.close(),
  };
}

const bullMq: RedisQueueDriver = {
  adapter: 'bullmq',
  queueJobId: bullMqJobId,
  options: (options) => ({ adapter: 'bullmq', redis: redisUrl(), ...options }),
  view: (port) => bullMqView(bullMqAdapter(port).queue),
  handle(name, prefix) {
    const queue = new BullMqQueue(name, { connection: { url: redisUrl() }, prefix });
    return { ...bullMqView(queue), obliterate: () => queue.obliterate({ force: true }) };
  },
  onActive: (port, listener) => bullMqWorker(port).on('active', (job: BullMqJob) => listener({ jobId: engineJobId(String(job.id)), executionId: job.data.executionId })),
  onFailed: (port, listener) =>
    bullMqWorker(port).on('failed', (job: BullMqJob | undefined, error: Error) => {
      if (job) listener({ jobId: engineJobId(String(job.id)), executionId: job.data.executionId, attemptsMade: job.attemptsMade, attempts: job.opts.attempts, message: error.message });
    }),
  onCompleted: (port, listener) => bullMqWorker(port).on('completed', (job: BullMqJob) => listener({ jobId: engineJobId(String(job.id)), executionId: job.data.executionId })),
  pauseWorker: (port) => bullMqWorker(port).pause(),
};

function bullMqAdapter(port: QueuePort): BullMqQueueAdapter {
  if (!(port instanceof BullMqQueueAdapter)) throw new Error(`expected the bullmq adapter, got ${port.constructor.name}`);
  return port;
}

function bullMqWorker(port: QueuePort) {
  const worker = bullMqAdapter(port).worker;
  if (!worker) throw new Error('the bullmq adapter has no worker in an enqueue-only process');
  return worker;
}

function bullMqView(queue: BullMqQueue): QueueView {
  return {
    async getJob(id) {
      const job = await queue.getJob(bullMqJobId(id));
      if (!job) return null;
      return { id, queueId: String(job.id), data: job.data, state: await job.getState(), attempts: job.opts.attempts, dueAt: job.timestamp + (job.opts.delay ?? 0) };
    },
    async counts() {
      // BullMQ keeps jobs with a priority apart from the plain waiting ones.
      const counts = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'completed', 'failed');
      return { waiting: counts.waiting + counts.prioritized, active: counts.active, delayed: counts.delayed, completed: counts.completed, failed: counts.failed };
    },
    delayedIds: async () => (await queue.getDelayed()).map((job) => engineJobId(String(job.id))),
    schedules: async () => (await queue.getJobSchedulers()).map((scheduler) => [scheduler.name, Number(scheduler.every)]),
    workerCount: async () => (await queue.getWorkers()).length,
    promote: async (id) => (await queue.getJob(bullMqJobId(id)))!.promote(),
    async strand(id) {
      // The backend's client is ioredis behind BullMQ's narrower interface, which has no list commands.
      const client = (await queue.getBackend().client) as unknown as Redis;
      await client.lrem(queue.toKey('wait'), 0, bullMqJobId(id));
      await client.zrem(queue.toKey('prioritized'), bullMqJobId(id));
    },
    async addStepJob(data, id) {
      await queue.add(STEP_JOB_NAME, data, { jobId: bullMqJobId(id), attempts: 1, removeOnComplete: true, removeOnFail: true });
    },
    pause: () => queue.pause(),
    resume: () => queue.resume(),
    async waitingCount() {
      // A paused BullMQ queue keeps its jobs in the wait list; those with a priority stand apart.
      const counts = await queue.getJobCounts('waiting', 'prioritized');
      return counts.waiting + counts.prioritized;
    },
    async removePending() {
      await queue.clean(0, 0, 'delayed');
      await queue.clean(0, 0, 'wait');
      await queue.clean(0, 0, 'prioritized');
    },
    close: () => queue.close(),
  };
}

export const REDIS_QUEUE_DRIVERS: Record<RedisAdapter, RedisQueueDriver> = { bull, bullmq: bullMq };
