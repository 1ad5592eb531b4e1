/**
 * The child processes of the signals race spec (test/e2e/signals-race.e2e-spec.ts). The spec compiles
 * this file (and what it imports) with `test/tsconfig.signal-race.json` and forks the output with an
 * IPC channel, in one of two roles:
 *
 *  - `worker`: a geneva-drive application consuming the Bull queue (GD_RACE_CONCURRENCY jobs at once).
 *    Reports every job it finished; the SignalRaceWorkflow bodies it runs report their warmup.
 *  - `sender`: an enqueue-only application (Bull at concurrency 0) that only calls
 *    `SignalService.signal()`, with its own DataSource pool:
 *      { type: 'signal' }  after `baseDelay + random 0-40 ms`, signals one workflow (and redelivers
 *                          the same key once more when asked). `baseDelay` calibrates itself toward
 *                          an even race: it shrinks after a signal found the step parked and grows
 *                          after one was buffered, so each side wins about half the time whatever
 *                          the machine's speed (the randomness of both sides is untouched).
 *      { type: 'arm' }     opens `calls` pooled connections, then waits for
 *      { type: 'go', at }  and fires `calls` concurrent signal() calls at the wall-clock instant
 *                          `at` (the same for every sender: a barrier); reports them all.
 *
 * Environment (the jest worker's is inherited, so the database URLs and JEST_WORKER_ID match):
 *   GD_RACE_ROLE, GD_RACE_DB (sqlite | postgres | mysql), GD_RACE_REDIS, GD_RACE_PREFIX,
 *   GD_RACE_QUEUE, GD_RACE_CONCURRENCY (worker), GD_RACE_SQLITE_FILE (the spec's SQLite file).
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { getDataSourceToken, TypeOrmModule } from '@nestjs/typeorm';
import type Bull from 'bull';
import type { DataSource, DataSourceOptions } from 'typeorm';
import { GenevaDriveModule, QUEUE_PORT, SignalService, type Signal } from '../../libs/geneva-drive/src/index.js';
import type { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { GO, SIGNAL_RACE_WORKFLOWS, type WarmupMessage } from './signal-race-workflows.js';

/** What one signal() call returned (or threw), as the calling process saw it. */
export interface SignalCall {
  pid: number;
  workflowId: string;
  key: string;
  /** The payload this call sent. */
  sentPayload: unknown;
  startedAt: number;
  finishedAt: number;
  /** The delay before the call (race signals), ms. */
  delayMs?: number;
  error?: string;
  result?: {
    id: string;
    state: Signal['state'];
    claimed: number;
    consumed: number;
    duplicateDelivery: boolean;
    payload: unknown;
    idempotencyKey: string | null;
  };
}

export type RaceChildMessage =
  | { type: 'ready'; pid: number; role: 'worker' | 'sender' }
  | { type: 'job'; pid: number; event: 'completed' | 'failed'; jobId: string; executionId: string; error?: string }
  | WarmupMessage
  | { type: 'sent'; pid: number; redelivery: boolean; call: SignalCall; baseDelayMs: number }
  | { type: 'armed'; pid: number; burstId: number }
  | { type: 'burst'; pid: number; burstId: number; calls: SignalCall[] };

export type RaceParentMessage =
  | { type: 'signal'; workflowId: string; key: string; payload: Record<string, unknown>; redeliverPayload?: Record<string, unknown> }
  | { type: 'arm'; burstId: number; workflowId: string; key: string; calls: number }
  | { type: 'go'; burstId: number; at: number }
  | { type: 'shutdown' };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`signal-race-process: ${name} is not set`);
  return value;
}

function send(message: RaceChildMessage): void {
  process.send?.(message);
}

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const preciseNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const random0to40 = () => Math.floor(Math.random() * 41);

async function main(): Promise<void> {
  const role = required('GD_RACE_ROLE') as 'worker' | 'sender';
  const kind = required('GD_RACE_DB') as DatabaseKind;
  const sqliteFile = process.env.GD_RACE_SQLITE_FILE;
  const database = { ...dataSourceOptions(kind), ...(kind === 'sqlite' && sqliteFile ? { database: sqliteFile } : {}) } as DataSourceOptions;

  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...database, migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({
        queue: {
          adapter: 'bull',
          redis: required('GD_RACE_REDIS'),
          prefix: required('GD_RACE_PREFIX'),
          name: required('GD_RACE_QUEUE'),
          concurrency: role === 'worker' ? Number(process.env.GD_RACE_CONCURRENCY ?? '3') : 0,
        },
        housekeeping: false,
        // Every chain runs to its end, however loaded the machine: the job counts the spec asserts are exact.
        chainSteps: { maxSteps: 10, maxDuration: '10m' },
      }),
    ],
    providers: [...SIGNAL_RACE_WORKFLOWS],
  })
  class RaceModule {}

  const app = await NestFactory.createApplicationContext(RaceModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
  let closing: Promise<void> | undefined;
  const shutdown = (code: number) => {
    closing ??= app
      .close()
      .catch((error) => console.error('signal-race-process: close failed', error))
      .finally(() => process.exit(code));
  };
  // The parent is gone (killed, crashed): do not linger as an orphan.
  process.on('disconnect', () => shutdown(1));

  if (role === 'worker') {
    const queue = (app.get(QUEUE_PORT) as BullQueueAdapter).queue as Bull.Queue<{ executionId: string }>;
    queue.on('completed', (job) => send({ type: 'job', pid: process.pid, event: 'completed', jobId: String(job.id), executionId: job.data.executionId }));
    queue.on('failed', (job, error) =>
      send({ type: 'job', pid: process.pid, event: 'failed', jobId: String(job.id), executionId: job.data.executionId, error: String(error) }),
    );
    process.on('message', (message: RaceParentMessage) => {
      if (message.type === 'shutdown') shutdown(0);
    });
    send({ type: 'ready', pid: process.pid, role });
    return;
  }

  const signals = app.get(SignalService);
  const dataSource = app.get<DataSource>(getDataSourceToken());
  const call = async (workflowId: string, key: string, payload: Record<string, unknown>, delayMs?: number): Promise<SignalCall> => {
    const startedAt = preciseNow();
    try {
      const signal = await signals.signal(workflowId, GO, { payload, idempotencyKey: key });
      return {
        pid: process.pid,
        workflowId,
        key,
        sentPayload: payload,
        startedAt,
        finishedAt: preciseNow(),
        delayMs,
        result: {
          id: String(signal.id),
          state: signal.state,
          claimed: Number(signal.claimed),
          consumed: Number(signal.consumed),
          duplicateDelivery: signal.duplicateDelivery,
          payload: signal.payload,
          idempotencyKey: signal.idempotencyKey,
        },
      };
    } catch (error) {
      const code = (error as { code?: string; driverError?: { code?: string } }).driverError?.code ?? (error as { code?: string }).code;
      return { pid: process.pid, workflowId, key, sentPayload: payload, startedAt, finishedAt: preciseNow(), delayMs, error: `${String(error)}${code ? ` [${code}]` : ''}` };
    }
  };

  // The self-calibrating part of the race delay (see the header). It may go below zero when this
  // side is the slower one (SQLite's busy wait): the delay is then 0 for part of the random range.
  let baseDelayMs = 15;
  const raceSignal = async (message: Extract<RaceParentMessage, { type: 'signal' }>) => {
    const delayMs = Math.max(0, baseDelayMs + random0to40());
    await sleep(delayMs);
    const first = await call(message.workflowId, message.key, message.payload, delayMs);
    if (first.result?.state === 'claimed') baseDelayMs = Math.max(-40, baseDelayMs - 1);
    else if (first.result?.state === 'pending') baseDelayMs = Math.min(200, baseDelayMs + 1);
    send({ type: 'sent', pid: process.pid, redelivery: false, call: first, baseDelayMs });
    if (!message.redeliverPayload) return;
    // The redelivery lands at a random point of the workflow's life: woken, running, or finished.
    await sleep(Math.floor(Math.random() * 81));
    send({ type: 'sent', pid: process.pid, redelivery: true, call: await call(message.workflowId, message.key, message.redeliverPayload), baseDelayMs });
  };

  const armed = new Map<number, Extract<RaceParentMessage, { type: 'arm' }>>();
  process.on('message', (message: RaceParentMessage) => {
    switch (message.type) {
      case 'shutdown':
        return shutdown(0);
      case 'signal':
        void raceSignal(message);
        return;
      case 'arm':
        // Open `calls` connections of the pool now, so the burst does not wait for connects (SQLite
        // has one connection per process, and the engine serialises its transactions on it).
        void Promise.all(
          Array.from({ length: kind === 'sqlite' ? 1 : message.calls }, () =>
            dataSource.transaction(async (m) => {
              await m.query('SELECT 1');
              await sleep(30);
            }),
          ),
        ).then(
          () => {
            armed.set(message.burstId, message);
            send({ type: 'armed', pid: process.pid, burstId: message.burstId });
          },
          (error) => console.error('signal-race-process: arming failed', error),
        );
        return;
      case 'go': {
        const burst = armed.get(message.burstId);
        if (!burst) throw new Error(`burst ${message.burstId} was not armed`);
        armed.delete(message.burstId);
        // Every sender fires at the same instant `at` (one clock for all): a timer to just before it,
        // then a spin for the last two milliseconds, so IPC delivery order does not stagger them.
        setTimeout(() => {
          while (preciseNow() < message.at);
          void Promise.all(
            Array.from({ length: burst.calls }, (_, i) => call(burst.workflowId, burst.key, { sender: process.pid, call: i })),
          ).then((calls) => send({ type: 'burst', pid: process.pid, burstId: burst.burstId, calls }));
        }, Math.max(0, message.at - preciseNow() - 2));
        return;
      }
    }
  });
  send({ type: 'ready', pid: process.pid, role });
}

main().catch((error) => {
  console.error('signal-race-process: failed to start', error);
  process.exit(1);
});
