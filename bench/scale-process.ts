/**
 * One process of the scale scenario (scale.ts forks it): the bench application on the bench
 * database and a Redis queue (Bull or BullMQ) of the scenario's own prefix, either as the sender
 * (queue concurrency 0: it only calls start() and signal(), and enqueues) or as a worker (runs the
 * steps, and reports how many of the shape's workflows parked and finished).
 *
 * Environment: GD_SCALE_ROLE (sender | worker), GD_SCALE_DB (postgres | mysql), GD_SCALE_QUEUE
 * (bull | bullmq), GD_SCALE_PREFIX, GD_SCALE_CONCURRENCY, and GD_BENCH_DATABASE as the parent's.
 * To the parent: { type: 'ready' }, { type: 'progress', parked, finished } (running totals, at most
 * every PROGRESS_MS), { type: 'reply', id, result | error }. From the parent: requests
 * { id, command: 'heroes' (n) | 'start' (signal) | 'signal' | 'cpu' | 'shutdown' }.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { subscribe } from 'node:diagnostics_channel';
import { cpuUsage } from 'node:process';
import { DataSource } from 'typeorm';
import { GENEVA_DRIVE_CHANNELS, SignalService, WorkflowService, type FinalizeEvent, type PreconditionEvent } from 'geneva-drive';
import { BenchHero, BenchLogger, BenchModule, BenchPaymentWorkflow, PAYMENT_SIGNAL, PAYMENT_WORKFLOW } from './app.js';
import { BulkWriter } from './bulk.js';
import { databaseOptions, redisQueue, type DatabaseKind, type RedisQueueKind } from './config.js';
import { forEachLimited } from './stats.js';
import type { ForkedMessage } from './forked-process.js';

export type ScaleRequest =
  | { id: number; command: 'heroes'; n: number }
  | { id: number; command: 'start'; signal: boolean }
  | { id: number; command: 'signal'; ids: string[] }
  | { id: number; command: 'cpu' }
  | { id: number; command: 'shutdown' };

export type ScaleProgress = { type: 'progress'; parked: number; finished: number };
export type ScaleMessage = ForkedMessage | ScaleProgress;

/** Calls in flight at once in the sender, as in the one-process shape. */
const LANES = 16;
const PROGRESS_MS = 5;

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`scale-process: ${name} is not set`);
  return value;
}

function send(message: ScaleMessage): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const role = env('GD_SCALE_ROLE');
  const db = env('GD_SCALE_DB') as DatabaseKind;
  const concurrency = role === 'sender' ? 0 : Number(env('GD_SCALE_CONCURRENCY'));
  const logger = new BenchLogger();
  const app = await NestFactory.createApplicationContext(
    BenchModule.register({ database: databaseOptions(db), queue: redisQueue(env('GD_SCALE_QUEUE') as RedisQueueKind, concurrency, env('GD_SCALE_PREFIX')).options, logger }),
    { logger: false },
  );
  const workflows = app.get(WorkflowService);
  const signals = app.get(SignalService);
  const bulk = new BulkWriter(app.get(DataSource), db);

  const totals = { parked: 0, finished: 0 };
  let reported = { ...totals };
  if (role === 'worker') {
    subscribe(GENEVA_DRIVE_CHANNELS.precondition, (message) => {
      const event = message as PreconditionEvent;
      if (event.workflowClass === PAYMENT_WORKFLOW && event.outcome === 'waiting') totals.parked++;
    });
    subscribe(GENEVA_DRIVE_CHANNELS.finalize, (message) => {
      const event = message as FinalizeEvent;
      if (event.workflowClass === PAYMENT_WORKFLOW && event.workflowState === 'finished') totals.finished++;
    });
    // Batched: one IPC message per workflow would cost the worker more than the step does.
    setInterval(() => {
      if (totals.parked === reported.parked && totals.finished === reported.finished) return;
      reported = { ...totals };
      send({ type: 'progress', ...reported });
    }, PROGRESS_MS).unref();
  }

  let heroes: BenchHero[] = [];
  const handle = async (request: ScaleRequest): Promise<unknown> => {
    switch (request.command) {
      case 'heroes':
        heroes = (await bulk.insertHeroes(request.n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
        return heroes.length;
      case 'start': {
        const ids: string[] = [];
        await forEachLimited(heroes, LANES, async (hero, i) => {
          const workflow = await workflows.start(BenchPaymentWorkflow, hero);
          ids.push(workflow.id);
          if (request.signal) await signals.signal(workflow, PAYMENT_SIGNAL, { payload: { seq: i }, idempotencyKey: `evt-${workflow.id}` });
        });
        return ids;
      }
      case 'signal':
        await forEachLimited(request.ids, LANES, async (id, i) => {
          await signals.signal(id, PAYMENT_SIGNAL, { payload: { seq: i }, idempotencyKey: `evt-${id}` });
        });
        return request.ids.length;
      case 'cpu': {
        const cpu = cpuUsage();
        return (cpu.user + cpu.system) / 1000;
      }
      case 'shutdown':
        await app.close();
        setImmediate(() => process.exit(0));
        return { errors: logger.errors };
    }
  };
  process.on('message', (request: ScaleRequest) => {
    handle(request).then(
      (result) => send({ type: 'reply', id: request.id, result }),
      (error: unknown) => send({ type: 'reply', id: request.id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
  // The bench that forked this process is gone: nothing would ever stop it.
  process.on('disconnect', () => process.exit(1));
  send({ type: 'ready' });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
