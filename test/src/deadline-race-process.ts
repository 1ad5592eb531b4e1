/**
 * The child processes of the signal-vs-deadline race (test/proofs/deadline-race.e2e-spec.ts),
 * compiled with `test/tsconfig.deadline-race.json` and forked with an IPC channel, in one of two roles:
 *
 *  - `worker`: a geneva-drive application consuming the Bull queue: it runs the steps and the
 *    deadline jobs (Bull fires each at its step's `timeout_at`). Reports every job it finished.
 *  - `sender`: an enqueue-only application (Bull at concurrency 0) that, told a workflow and its
 *    deadline, calls `SignalService.signal()` at `deadline + offset`, so the signal and the deadline
 *    job meet. `offset` is random (±25 ms) around a base that calibrates itself toward an even race:
 *    it moves earlier after the deadline won (the signal was buffered) and later after the signal won
 *    (it woke the step), so each side wins about half the time whatever the machine's speed.
 *
 * Environment: GD_RACE_ROLE, GD_RACE_DB, GD_RACE_REDIS, GD_RACE_PREFIX, GD_RACE_QUEUE,
 * GD_RACE_SQLITE_FILE (the spec's SQLite file); the jest worker's is inherited.
 */
import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import type Bull from 'bull';
import type { DataSourceOptions } from 'typeorm';
import { GenevaDriveModule, QUEUE_PORT, SignalService } from '../../libs/geneva-drive/src/index.js';
import type { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { dataSourceOptions, type DatabaseKind } from '../utils/databases.js';
import { DEADLINE_RACE_WORKFLOWS, GO } from './deadline-race-workflows.js';

/** One signal() call at a deadline, as the sender saw it. */
export interface DeadlineSignalCall {
  workflowId: string;
  /** When the call started, relative to the deadline (ms; negative: before it). */
  offsetMs: number;
  signalId?: string;
  /** `claimed`: the signal woke the parked step; `pending`: the deadline had won, the signal is buffered. */
  state?: string;
  error?: string;
}

export type DeadlineRaceChildMessage =
  | { type: 'ready'; pid: number }
  | { type: 'job'; pid: number; event: 'completed' | 'failed'; jobId: string; error?: string }
  | { type: 'sent'; pid: number; call: DeadlineSignalCall; baseOffsetMs: number };

export type DeadlineRaceParentMessage = { type: 'signal'; workflowId: string; deadline: number } | { type: 'shutdown' };

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`deadline-race-process: ${name} is not set`);
  return value;
}

const send = (message: DeadlineRaceChildMessage) => process.send?.(message);
/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
const preciseNow = () => performance.timeOrigin + performance.now();

async function main(): Promise<void> {
  const role = required('GD_RACE_ROLE') as 'worker' | 'sender';
  const kind = required('GD_RACE_DB') as DatabaseKind;
  const sqliteFile = process.env.GD_RACE_SQLITE_FILE;
  const database = { ...dataSourceOptions(kind), ...(kind === 'sqlite' && sqliteFile ? { database: sqliteFile } : {}) } as DataSourceOptions;

  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...database, migrations: [], migrationsRun: false }),
      GenevaDriveModule.forRoot({
        queue: { adapter: 'bull', redis: required('GD_RACE_REDIS'), prefix: required('GD_RACE_PREFIX'), name: required('GD_RACE_QUEUE'), concurrency: role === 'worker' ? 4 : 0 },
        housekeeping: false,
      }),
    ],
    providers: [...DEADLINE_RACE_WORKFLOWS],
  })
  class DeadlineRaceModule {}

  const app = await NestFactory.createApplicationContext(DeadlineRaceModule, { logger: process.env.GD_TEST_LOGS ? undefined : ['error'] });
  let closing: Promise<void> | undefined;
  const shutdown = (code: number) => {
    closing ??= app
      .close()
      .catch((error) => console.error('deadline-race-process: close failed', error))
      .finally(() => process.exit(code));
  };
  process.on('disconnect', () => shutdown(1));

  if (role === 'worker') {
    const queue = (app.get(QUEUE_PORT) as BullQueueAdapter).queue as Bull.Queue<{ executionId: string }>;
    queue.on('completed', (job) => send({ type: 'job', pid: process.pid, event: 'completed', jobId: String(job.id) }));
    queue.on('failed', (job, error) => send({ type: 'job', pid: process.pid, event: 'failed', jobId: String(job.id), error: String(error) }));
    process.on('message', (message: DeadlineRaceParentMessage) => {
      if (message.type === 'shutdown') shutdown(0);
    });
    send({ type: 'ready', pid: process.pid });
    return;
  }

  const signals = app.get(SignalService);
  let baseOffsetMs = 0;
  const signalAtDeadline = async (workflowId: string, deadline: number) => {
    const at = deadline + baseOffsetMs + (Math.random() * 50 - 25);
    // A timer to just before the instant, then a spin for the last two milliseconds.
    await new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, at - preciseNow() - 2)));
    while (preciseNow() < at);
    const call: DeadlineSignalCall = { workflowId, offsetMs: preciseNow() - deadline };
    try {
      const signal = await signals.signal(workflowId, GO, { idempotencyKey: `go-${workflowId}` });
      call.signalId = String(signal.id);
      call.state = signal.state;
      if (signal.state === 'claimed') baseOffsetMs = Math.min(200, baseOffsetMs + 2);
      else baseOffsetMs = Math.max(-200, baseOffsetMs - 2);
    } catch (error) {
      call.error = String(error);
    }
    send({ type: 'sent', pid: process.pid, call, baseOffsetMs });
  };
  process.on('message', (message: DeadlineRaceParentMessage) => {
    if (message.type === 'shutdown') return shutdown(0);
    void signalAtDeadline(message.workflowId, message.deadline);
  });
  send({ type: 'ready', pid: process.pid });
}

main().catch((error) => {
  console.error('deadline-race-process: failed to start', error);
  process.exit(1);
});
