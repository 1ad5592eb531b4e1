import type { LoggerService } from '@nestjs/common';
import type Bull from 'bull';
import type { BullQueueAdapterOptions } from '../interfaces/geneva-drive-options.interface.js';
import { handOffTurn, type DueJobStarter } from './due-job-starter.js';
import type { EnqueueOptions, QueuePort, StepJob, StepJobHandler } from '../interfaces/queue.port.js';
import { releasedJob } from './released-job.js';
import { RunLedger } from './run-ledger.js';
import { stepJobData, stepJobOptions, takeoverJob, type StepJobData } from './step-job-data.js';
import type { StepJobGate } from './step-job-gate.js';

/** Bull's settings as the queue holds them, defaults applied. */
type BullWithSettings = Bull.Queue<StepJobData> & { settings: { lockDuration: number } };

/** The states of a Bull job that will still run. */
const TO_RUN = new Set<string>(['waiting', 'delayed', 'active', 'paused']);

/**
 * Whether the job is still to run. Bull reads the state list by list, so a job that a worker takes
 * between the check of `active` and that of `waiting` reads as in none; a second read settles it.
 */
async function willRun(job: Bull.Job): Promise<boolean> {
  return TO_RUN.has(await job.getState()) || TO_RUN.has(await job.getState());
}

/**
 * Whether Bull delivers this job again because its stalled-job check found the lock of the process
 * that had it expired (a dead process, or one stuck longer than `lockDuration`): its run is then
 * taken over (StepJobGate.run). Bull 4 counts such returns in the job's hash but leaves the count
 * off the Job it hands over, so it is read (one HGET) — only for a job delivered half a lock or more
 * after it was due, as every such return is: it comes a whole `lockDuration` after the first
 * delivery (a clock skew between hosts beyond half a lock would hide it; housekeeping remains).
 */
export async function isStalledReturn(job: Bull.Job<StepJobData>): Promise<boolean> {
  const queue = job.queue as BullWithSettings;
  if (Date.now() - (job.timestamp + (job.opts.delay ?? 0)) < queue.settings.lockDuration / 2) return false;
  return Number(await queue.client.hget(queue.toKey(String(job.id)), 'stalledCounter')) > 0;
}

/**
 * Hands a job back to the queue, as a new delayed job (released-job.ts): this process does not have
 * its execution's workflow class or step, and decided nothing about it. The step's priority stays.
 */
export async function releaseBullJob(job: Bull.Job<StepJobData>, engineJobId: string): Promise<void> {
  const { id, data, delay } = releasedJob(job.data, engineJobId);
  const priority = job.opts.priority === undefined ? {} : { priority: job.opts.priority };
  await job.queue.add(data, { jobId: id, ...stepJobOptions({ executionId: data.executionId, runAt: new Date(Date.now() + delay), jobOptions: priority }) });
}

/** The RunLedger of a process that works a Bull queue: on the queue's own client, leased as long as Bull locks a job. */
export function bullRunLedger(queue: Bull.Queue<StepJobData>, logger: LoggerService): RunLedger {
  const client = queue.client as unknown as Record<string, (...args: Array<string | number>) => Promise<unknown>> & typeof queue.client;
  return new RunLedger(
    async () => ({
      defineCommand: (name, definition) => client.defineCommand(name, definition),
      run: (name, args) => client[name](...args),
      hset: (key, data) => client.hset(key, data),
      hdel: (key, ...fields) => client.hdel(key, ...fields),
    }),
    () => ({ keyPrefix: queue.toKey(''), leaseMs: (queue as BullWithSettings).settings.lockDuration }),
    logger,
  );
}

/**
 * Bull's process() names the worker on the blocking connection (CLIENT SETNAME) and drops the
 * promise. A second processor (housekeeping's repeated task) queues that command behind the first
 * one's BRPOPLPUSH, which blocks up to Bull's drainDelay; a queue closed meanwhile rejects it with
 * "Connection is closed." and, unhandled, the rejection ends a Node process. The name only labels
 * the connection in CLIENT LIST, so a failure to set it is dropped.
 */
function nameWorkerQuietly(queue: Bull.Queue<StepJobData>): void {
  const named = queue as unknown as { setWorkerName?: () => Promise<unknown> };
  const setWorkerName = named.setWorkerName;
  if (typeof setWorkerName !== 'function') return;
  named.setWorkerName = () => setWorkerName.call(queue).catch(() => undefined);
}

/**
 * Step jobs on Bull (Redis): any number of worker processes and hosts. The queue is the one
 * @nestjs/bull registered (see bull-queue.module.ts), consumed by a Nest-managed `@Processor` that
 * hands jobs to the engine through `gate`. The job id is the execution id, so enqueuing the same
 * execution twice is one job; finished jobs are removed so a later re-enqueue of the same execution
 * (resume, recovery) is not swallowed. Bull answers an add whose id still exists with the existing
 * job and adds nothing, so a signal's wake-up, which can come while the job that parked the step is
 * still finishing, carries an id of its own (StepJob.jobId). Each job runs once (no Bull retries):
 * what to do after a failure is the engine's exception policy, already committed.
 */
export class BullQueueAdapter implements QueuePort {
  constructor(
    readonly queue: Bull.Queue<StepJobData>,
    private readonly gate: StepJobGate,
    private readonly options: BullQueueAdapterOptions,
    private readonly logger: LoggerService,
    /** Starts a job due now in this process instead (see DueJobStarter). */
    private readonly starter: DueJobStarter,
  ) {
    nameWorkerQuietly(queue);
  }

  /**
   * Bull's add of an existing job id is a silent no-op that answers with the old job, so whether a
   * job was added is read just before, and only when asked (it costs round trips): false when a job
   * of that id is still to run (waiting, delayed, active). One that will never run — left in no list
   * by a worker that lost its job in a Redis restart, or finished — would swallow the add for good,
   * so it is removed first. The add is made in every case, so a job that leaves the queue between
   * the calls is still replaced; that job ran or is running the execution, so false stays true.
   */
  async enqueue(job: StepJob, options?: EnqueueOptions): Promise<boolean> {
    if (options?.afterCommit) await handOffTurn();
    if (this.starter.tryStart(job, (held) => this.add(held), options)) {
      await this.starter.recorded();
      return true;
    }
    let queued = false;
    if (options?.reportAdded) {
      const existing = await this.queue.getJob(job.jobId ?? job.executionId);
      queued = existing !== null && (await willRun(existing));
      if (existing && !queued) await existing.remove();
    }
    await this.add(job);
    return !queued;
  }

  private add(job: StepJob): Promise<unknown> {
    return this.queue.add(stepJobData(job), { jobId: job.jobId ?? job.executionId, ...stepJobOptions(job) });
  }

  /** Puts a dead process's run back on the queue (RunLedger), under an id of its own. */
  private addTakeover(job: StepJob): Promise<unknown> {
    const { id, data, options } = takeoverJob(job);
    return this.queue.add(data, { jobId: id, ...options });
  }

  async start(handler: StepJobHandler): Promise<void> {
    this.queue.on('error', (error) => this.logger.error(`Bull queue error: ${String(error)}`));
    this.gate.start(handler);
    await this.starter.start((job) => this.addTakeover(job));
  }

  async repeat(name: string, everyMs: number, task: () => Promise<unknown>): Promise<void> {
    if ((this.options.concurrency ?? 1) <= 0) return;
    // Settles when the queue stops. It rejects (with nothing) when the queue closes before Bull has
    // set the processor up, as when an application closes right after it starts: handled here, or
    // the unhandled rejection would end the process.
    this.queue.process(name, 1, () => task()).catch((error: unknown) => {
      if (error !== undefined) this.logger.error(`Bull could not run the repeated task ${name}: ${String(error)}`);
    });
    // Drop schedules of this task left by an earlier configuration (another period).
    for (const job of await this.queue.getRepeatableJobs()) {
      if (job.name === name && Number(job.every) !== everyMs) await this.queue.removeRepeatableByKey(job.key);
    }
    // A repeatable job: Redis holds one schedule for the whole cluster, so one worker runs each period.
    await this.queue.add(name, {} as StepJobData, { repeat: { every: everyMs }, removeOnComplete: true, removeOnFail: true });
  }

  async ping(): Promise<void> {
    await this.queue.client.ping();
  }

  async stop(): Promise<void> {
    this.gate.refuse();
    await this.starter.settle();
    await this.queue.close();
  }
}
