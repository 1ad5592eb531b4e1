/**
 * The shape across cores: one sender process (queue concurrency 0: it only calls start() and
 * signal()) and two worker processes that run the steps, all separate OS processes forked from
 * bench/dist/scale-process.js, on the bench database and a Redis prefix of their own (the run's
 * --queue, Bull or BullMQ). Both arrival orders, timed here in the parent from the request to the
 * sender until the workers' batched reports (every few ms) add up to every workflow finished; then
 * checked in the database.
 */
import { fileURLToPath } from 'node:url';
import { removeKeys } from './config.js';
import { ForkedProcess } from './forked-process.js';
import { openWindow, type WindowCost } from './load.js';
import type { ScaleProgress, ScaleRequest } from './scale-process.js';
import { afterRates, round, verify, type ShapeRun } from './shape.js';
import { BenchCheckError, type BenchContext } from './scenarios.js';

const ENTRY = fileURLToPath(new URL('./scale-process.js', import.meta.url));
const WORKERS = 2;
const TIMEOUT_MS = 180_000;

/** A forked process of the scenario, and the running totals it reports. */
class ScaleChild extends ForkedProcess<ScaleRequest, ScaleProgress> {
  readonly totals = { parked: 0, finished: 0 };

  constructor(role: 'sender' | 'worker', env: Record<string, string>) {
    super(role, ENTRY, { ...env, GD_SCALE_ROLE: role });
  }

  protected override onMessage(message: ScaleProgress): void {
    this.totals.parked = message.parked;
    this.totals.finished = message.finished;
  }
}

export interface ScaleRun extends ShapeRun {
  /** Node CPU per workflow of each process (sender first, then the workers). */
  nodeCpuMsPerWorkflowByProcess: number[];
}

export interface ScaleResult {
  workers: number;
  concurrencyPerWorker: number;
  signalFirst: ScaleRun[];
  signalAfter: ScaleRun[];
}

/** `runs` timed runs of both arrival orders, `n` workflows each, with 1 sender and 2 worker processes. */
export async function measureScale(ctx: BenchContext, n: number, runs: number): Promise<ScaleResult> {
  const prefix = `gd_bench_scale_${process.pid}_${Date.now().toString(36)}`;
  const env = { GD_SCALE_DB: ctx.options.db, GD_SCALE_QUEUE: ctx.options.queue, GD_SCALE_PREFIX: prefix, GD_SCALE_CONCURRENCY: String(ctx.options.concurrency) };
  const sender = new ScaleChild('sender', env);
  const workers = Array.from({ length: WORKERS }, () => new ScaleChild('worker', env));
  const all = [sender, ...workers];
  const result: ScaleResult = { workers: WORKERS, concurrencyPerWorker: ctx.options.concurrency, signalFirst: [], signalAfter: [] };
  try {
    await Promise.all(all.map((child) => child.booted()));
    const total = (key: 'parked' | 'finished') => workers.reduce((sum, worker) => sum + worker.totals[key], 0);
    const reach = async (key: 'parked' | 'finished', target: number): Promise<number> => {
      const deadline = Date.now() + TIMEOUT_MS;
      while (total(key) < target) {
        for (const child of all) child.assertAlive();
        if (Date.now() > deadline) throw new BenchCheckError(`the worker processes reported ${total(key)} of ${target} workflows ${key} after ${TIMEOUT_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      return performance.now();
    };
    const cpu = () => Promise.all(all.map((child) => child.request<number>({ command: 'cpu' })));

    for (let run = 1; run <= runs; run++) {
      console.log(`scale, run ${run} of ${runs}: ${n} workflows signal first, then ${n} signal after, 1 sender + ${WORKERS} workers ...`);
      for (const order of ['signalFirst', 'signalAfter'] as const) {
        await sender.request({ command: 'heroes', n });
        const base = { parked: total('parked'), finished: total('finished') };
        const window = await openWindow(ctx.dataSource, ctx.options.db);
        const cpuBefore = await cpu();
        const started = performance.now();
        const ids = await sender.request<string[]>({ command: 'start', signal: order === 'signalFirst' });
        let rates: Omit<ShapeRun, 'workflows' | 'load' | 'nodeCpuMsPerWorkflow' | 'serverCpuMsPerWorkflow'>;
        if (order === 'signalFirst') {
          const end = await reach('finished', base.finished + n);
          rates = { wallMs: end - started, workflowsPerSecond: n / ((end - started) / 1000) };
        } else {
          const lastParkedAt = await reach('parked', base.parked + n);
          const wakeStartedAt = performance.now();
          await sender.request({ command: 'signal', ids });
          const end = await reach('finished', base.finished + n);
          rates = afterRates(n, started, lastParkedAt, wakeStartedAt, end);
        }
        const byProcess = (await cpu()).map((ms, i) => round((ms - cpuBefore[i]) / n));
        const cost: WindowCost = await window.close();
        await verify(ctx, ids);
        result[order].push({
          workflows: n,
          load: { start: cost.loadStart, end: cost.loadEnd },
          nodeCpuMsPerWorkflow: round(byProcess.reduce((sum, ms) => sum + ms, 0)),
          nodeCpuMsPerWorkflowByProcess: byProcess,
          ...(cost.serverCpuMs === undefined ? {} : { serverCpuMsPerWorkflow: round(cost.serverCpuMs / n) }),
          ...rates,
        });
      }
    }
    const shutdowns = await Promise.all(all.map((child) => child.request<{ errors: string[] }>({ command: 'shutdown' })));
    const errors = shutdowns.flatMap((reply) => reply.errors);
    if (errors.length > 0) throw new BenchCheckError(`the scale processes logged ${errors.length} engine error(s); first: ${errors[0]}`);
    return result;
  } finally {
    for (const child of all) child.kill();
    await removeKeys(prefix);
  }
}
