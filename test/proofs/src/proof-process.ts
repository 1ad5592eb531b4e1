/**
 * The child processes of the fault proofs (test/proofs/*.e2e-spec.ts). A spec compiles this file
 * (and what it imports) with test/proofs/tsconfig.proof-process.json and forks the output with an
 * IPC channel, in one of two roles:
 *
 *  - `worker`: a geneva-drive application consuming the Bull queue (GD_PROOF_CONCURRENCY jobs at
 *    once). Reports every job it takes and finishes, so the spec can kill it while it runs steps.
 *  - `sender`: an enqueue-only application (Bull at concurrency 0) that, on { type: 'run' }, creates
 *    heroes and starts workflows (ProofWorkflow, or the classes the plan names, in turn), then
 *    signals each one once with its idempotency key after a random
 *    delay (and a share of them a second time: a redelivery). Every call is bounded by a timeout (a
 *    call that does not return in time is reported as hung) and retried with the same key when it
 *    fails; each attempt is reported.
 *
 * Environment (the jest worker's is inherited, so the database URLs and JEST_WORKER_ID match):
 *   GD_PROOF_ROLE, GD_PROOF_DB (postgres | mysql), GD_PROOF_ADAPTER (bull | bullmq), GD_PROOF_REDIS, GD_PROOF_PREFIX, GD_PROOF_QUEUE,
 *   GD_PROOF_CONCURRENCY (worker), GD_PROOF_MAX_RECOVERIES (a number, or `none`; the module's default without it).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule, QUEUE_PORT, SignalService, WorkflowService } from '../../../libs/geneva-drive/src/index.js';
import { dataSourceOptions, type DatabaseKind } from '../../utils/databases.js';
import { REDIS_QUEUE_DRIVERS, type JobEvent, type RedisAdapter } from '../../src/redis-queues.js';
import { TestHero } from '../../utils/fixtures.js';
import { GO, goKey, holdBodies, PROOF_WORKFLOWS, ProofWorkflow, releaseBodies, type BodyReport } from './proof-workflows.js';

/** What the sender is asked to do. */
export interface SendPlan {
  type: 'run';
  workflows: number;
  /** Pause between two starts. */
  startGapMs: number;
  /** Each signal goes out after a random delay up to this, counted from its workflow's start. */
  signalDelayMaxMs: number;
  /** Every n-th workflow gets its signal a second time (0: none). */
  redeliverEvery: number;
  /** A call that has not returned after this long is reported as hung (and given up). */
  callTimeoutMs: number;
  /** Tries per call (the same idempotency key each time), with a pause in between. */
  maxAttempts: number;
  retryPauseMs: number;
  /** The workflow classes started, by class name, one after the other in turn (default: ProofWorkflow alone). */
  classes?: string[];
  /** false: no signal is sent (classes that wait for none). */
  signals?: boolean;
}

/** One attempt of one call, as the sender saw it. */
export interface CallReport {
  op: 'start' | 'signal' | 'redeliver';
  workflowId: string | null;
  attempt: number;
  ok: boolean;
  /** When the attempt began (epoch ms) and how long it took. */
  startedAt: number;
  ms: number;
  error?: string;
  hung?: boolean;
  signalId?: string;
  duplicate?: boolean;
}

export type ProofChildMessage =
  | { type: 'ready'; pid: number; role: 'worker' | 'sender' }
  | { type: 'job'; pid: number; event: 'active' | 'completed' | 'failed'; jobId: string; executionId: string; error?: string }
  | BodyReport
  | { type: 'call'; pid: number; call: CallReport }
  | { type: 'done'; pid: number };

/** `hold-bodies` / `release-bodies`: a worker's bodies wait until released (see holdBodies). */
export type ProofParentMessage = SendPlan | { type: 'shutdown' } | { type: 'hold-bodies'; hold: number } | { type: 'release-bodies'; executionIds?: string[] };

/**
 * Bull's (and BullMQ's) stall detection, shortened: a killed worker's active job is handed back to
 * the queue after about 3 s instead of up to a minute (30 s lock + 30 s check), and so are the runs
 * it started itself (the run ledger's lease is as long as the lock), so that the proof's time holds
 * many kills. A job may stall many times (Bull's default is once, after which it fails): a job handed
 * back after a kill can land on the next worker killed.
 */
const BULL_STALL_SETTINGS = { lockDuration: 3_000, lockRenewTime: 1_000, stalledInterval: 1_500, maxStalledCount: 100 };
const BULLMQ_STALL_SETTINGS = { lockDuration: 3_000, stalledInterval: 1_500, maxStalledCount: 100 };
/**
 * BullMQ's queue client keeps a command through 20 reconnects at least a second apart, so an outage
 * of the proof's length would only delay the sender's enqueues; with one retry they fail in it and
 * are lost, as Bull's do, which is what the proof is about.
 */
const BULLMQ_SENDER_CONNECTION = { maxRetriesPerRequest: 1 };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`proof-process: ${name} is not set`);
  return value;
}

function send(message: ProofChildMessage): void {
  process.send?.(message);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Runs `call` once, bounded by `timeoutMs`. */
async function attempt<T>(timeoutMs: number, call: () => Promise<T>): Promise<{ value?: T; error?: string; hung?: boolean; startedAt: number; ms: number }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), timeoutMs)));
  try {
    const value = await Promise.race([call(), timeout]);
    if (value === 'hung') return { hung: true, error: `no answer after ${timeoutMs} ms`, startedAt: started, ms: Date.now() - started };
    return { value: value as T, startedAt: started, ms: Date.now() - started };
  } catch (error) {
    return { error: String(error), startedAt: started, ms: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<void> {
  const role = required('GD_PROOF_ROLE') as 'worker' | 'sender';
  const kind = required('GD_PROOF_DB') as DatabaseKind;
  const driver = REDIS_QUEUE_DRIVERS[(process.env.GD_PROOF_ADAPTER ?? 'bull') as RedisAdapter];
  const concurrency = role === 'worker' ? Number(process.env.GD_PROOF_CONCURRENCY ?? '3') : 0;
  const own = { redis: required('GD_PROOF_REDIS'), prefix: required('GD_PROOF_PREFIX'), name: required('GD_PROOF_QUEUE'), concurrency };
  const queue = driver.options(own);
  const queueSettings =
    queue.adapter === 'bull' ? { settings: BULL_STALL_SETTINGS } : role === 'worker' ? { worker: BULLMQ_STALL_SETTINGS } : { redis: { url: own.redis, ...BULLMQ_SENDER_CONNECTION } };

  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...dataSourceOptions(kind), migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({
        queue: { ...queue, ...queueSettings },
        housekeeping: false,
        ...(process.env.GD_PROOF_CHAIN === '0' ? { chainSteps: false as const } : {}),
        // A worker's takeover of a dead worker's runs applies the recovery limit too.
        ...(process.env.GD_PROOF_MAX_RECOVERIES === undefined ? {} : { maxRecoveries: process.env.GD_PROOF_MAX_RECOVERIES === 'none' ? null : Number(process.env.GD_PROOF_MAX_RECOVERIES) }),
      }),
    ],
    providers: [...PROOF_WORKFLOWS],
  })
  class ProofModule {}

  const app = await NestFactory.createApplicationContext(ProofModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
  let closing: Promise<void> | undefined;
  const shutdown = (code: number) => {
    closing ??= app
      .close()
      .catch((error) => console.error('proof-process: close failed', error))
      .finally(() => process.exit(code));
  };
  // The parent is gone (killed, crashed): do not linger as an orphan.
  process.on('disconnect', () => shutdown(1));

  if (role === 'worker') {
    const port = app.get(QUEUE_PORT);
    const report = (event: 'active' | 'completed' | 'failed') => (job: JobEvent & { message?: string }) =>
      send({ type: 'job', pid: process.pid, event, jobId: job.jobId, executionId: job.executionId, ...(job.message ? { error: job.message } : {}) });
    driver.onActive(port, report('active'));
    driver.onCompleted(port, report('completed'));
    driver.onFailed(port, report('failed'));
    process.on('message', (message: ProofParentMessage) => {
      if (message.type === 'shutdown') shutdown(0);
      if (message.type === 'hold-bodies') holdBodies(message.hold);
      if (message.type === 'release-bodies') releaseBodies(message.executionIds);
    });
    send({ type: 'ready', pid: process.pid, role });
    return;
  }

  const workflows = app.get(WorkflowService);
  const signals = app.get(SignalService);
  const heroes = app.get<DataSource>(getDataSourceToken()).getRepository(TestHero);

  /** Tries `call` up to plan.maxAttempts times; reports each attempt; resolves with the value of the one that worked. */
  const withRetries = async <T>(plan: SendPlan, op: CallReport['op'], workflowId: string | null, call: () => Promise<T>, describe: (value: T) => Partial<CallReport>) => {
    for (let n = 1; n <= plan.maxAttempts; n++) {
      const result = await attempt(plan.callTimeoutMs, call);
      const ok = result.error === undefined;
      send({
        type: 'call',
        pid: process.pid,
        call: { op, workflowId, attempt: n, ok, startedAt: result.startedAt, ms: result.ms, ...(ok ? describe(result.value as T) : { error: result.error, hung: result.hung }) },
      });
      if (ok) return result.value as T;
      await sleep(plan.retryPauseMs);
    }
    return undefined;
  };

  const deliver = (plan: SendPlan, workflowId: string, op: 'signal' | 'redeliver') =>
    withRetries(
      plan,
      op,
      workflowId,
      () => signals.signal(workflowId, GO, { payload: { workflowId, op }, idempotencyKey: goKey(workflowId) }),
      (signal) => ({ signalId: String(signal.id), duplicate: signal.duplicateDelivery }),
    );

  const run = async (plan: SendPlan) => {
    const deliveries: Promise<unknown>[] = [];
    const classes = (plan.classes ?? [ProofWorkflow.name]).map((name) => {
      const found = PROOF_WORKFLOWS.find((cls) => cls.name === name);
      if (!found) throw new Error(`proof-process: no proof workflow class named ${name}`);
      return found;
    });
    for (let i = 0; i < plan.workflows; i++) {
      // A hero row and its workflow; a start that failed is tried again for the same hero.
      const hero = await heroes.save(heroes.create({ name: `proof ${process.pid} ${i}` }));
      const workflowClass = classes[i % classes.length];
      const wf = await withRetries(plan, 'start', null, () => workflows.start(workflowClass, hero), (record) => ({ workflowId: record.id }));
      if (wf && plan.signals !== false) {
        const index = i;
        deliveries.push(
          (async () => {
            await sleep(Math.floor(Math.random() * plan.signalDelayMaxMs));
            await deliver(plan, wf.id, 'signal');
            if (plan.redeliverEvery > 0 && index % plan.redeliverEvery === 0) {
              await sleep(Math.floor(Math.random() * plan.signalDelayMaxMs));
              await deliver(plan, wf.id, 'redeliver');
            }
          })(),
        );
      }
      await sleep(plan.startGapMs);
    }
    await Promise.all(deliveries);
    send({ type: 'done', pid: process.pid });
  };

  process.on('message', (message: ProofParentMessage) => {
    if (message.type === 'shutdown') return shutdown(0);
    if (message.type === 'run') void run(message);
  });
  send({ type: 'ready', pid: process.pid, role });
}

main().catch((error) => {
  console.error('proof-process: failed to start', error);
  process.exit(1);
});
