/**
 * The three measurements of SPEC §6. Each one checks the database afterwards, so a run that skipped
 * work (a signal that woke nothing, a step that never ran) fails instead of reporting a fast no-op.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { In, type DataSource } from 'typeorm';
import { Signal, StepExecution, WorkflowRecord, type SignalService, type WorkflowService } from 'geneva-drive';
import { BenchHero, BenchSignalWorkflow, BenchStepsWorkflow, PARKED_STEP, probe, SIGNAL_WORKFLOW, STEPS_WORKFLOW, WAKE_SIGNAL, type QueryRecorder } from './app.js';
import type { BulkWriter } from './bulk.js';
import type { BenchOptions, Sizes } from './config.js';
import { forEachLimited, median, summarize, waitUntil, type Summary } from './stats.js';

export interface BenchContext {
  app: INestApplicationContext;
  dataSource: DataSource;
  workflows: WorkflowService;
  signals: SignalService;
  bulk: BulkWriter;
  recorder: QueryRecorder;
  options: BenchOptions;
  sizes: Sizes;
  random: () => number;
}

/** How long one woken step may take to start and to finish before the bench gives up. */
const STEP_TIMEOUT_MS = 30_000;
/** start() calls in flight at once while the queue runs the steps. */
const STARTERS = 16;

// ------------------------------------------------------------------ steps/second

export interface ThroughputResult {
  workflows: number;
  steps: number;
  /** First start() to the moment the database shows every workflow finished. */
  wallMs: number;
  /** Part of wallMs spent until the last start() returned (steps run meanwhile). */
  startsMs: number;
  stepsPerSecond: number;
  workflowsPerSecond: number;
}

/**
 * N workflows × 3 no-op steps, started through WorkflowService and run by the queue adapter (the
 * real job path: enqueue after commit → queue → ExecutorService), timed from the first start() until
 * a poll of the database sees all N finished.
 */
export async function measureThroughput(ctx: BenchContext): Promise<ThroughputResult> {
  const n = ctx.sizes.throughputWorkflows;
  const heroes = (await ctx.bulk.insertHeroes(n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
  const bodiesBefore = probe.noopSteps;
  const finished = () => ctx.dataSource.getRepository(WorkflowRecord).count({ where: { type: STEPS_WORKFLOW, state: 'finished' } });

  const started = performance.now();
  await forEachLimited(heroes, STARTERS, async (hero) => {
    await ctx.workflows.start(BenchStepsWorkflow, hero);
  });
  const startsMs = performance.now() - started;
  await waitUntil(async () => (await finished()) === n, {
    timeoutMs: Math.max(60_000, n * 3 * 25),
    intervalMs: 10,
    describe: async () => `${await finished()} of ${n} ${STEPS_WORKFLOW} workflows finished`,
  });
  const wallMs = performance.now() - started;

  // Every step ran exactly once and completed: 3N executions, all completed/success, 3N bodies.
  const executions = await ctx.dataSource
    .getRepository(StepExecution)
    .createQueryBuilder('e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('e.state', 'state')
    .addSelect('e.outcome', 'outcome')
    .addSelect('COUNT(*)', 'count')
    .where('w.type = :type', { type: STEPS_WORKFLOW })
    .groupBy('e.state')
    .addGroupBy('e.outcome')
    .getRawMany<{ state: string; outcome: string | null; count: string | number }>();
  const byState = Object.fromEntries(executions.map((row) => [`${row.state}/${row.outcome}`, Number(row.count)]));
  assert(
    executions.length === 1 && byState['completed/success'] === 3 * n,
    `expected ${3 * n} completed/success executions of ${STEPS_WORKFLOW}, found ${JSON.stringify(byState)}`,
  );
  assert(probe.noopSteps - bodiesBefore === 3 * n, `expected ${3 * n} step bodies to run, ${probe.noopSteps - bodiesBefore} did`);

  return { workflows: n, steps: 3 * n, wallMs, startsMs, stepsPerSecond: (3 * n) / (wallMs / 1000), workflowsPerSecond: n / (wallMs / 1000) };
}

// ------------------------------------------------------------------ signal → step start

export interface LatencyResult {
  signals: number;
  warmup: number;
  /** From just before signal() to the first line of the woken step's body. */
  signalToStepStart: Summary;
  /** The signal() call alone (record, lock, wake, commit). */
  signalCall: Summary;
}

/**
 * Workflows parked for real (started through the API, parked by the queue's first run of their
 * waitFor step), then woken one at a time: each measurement runs on an otherwise idle engine, and
 * the next signal is sent only once the previous step's outcome is committed. With `chains` above
 * one, that many such sequences run side by side (the load of as many keys handed on at once).
 */
export async function measureLatency(ctx: BenchContext, chains = 1): Promise<LatencyResult> {
  const { latencySignals: measured, latencyWarmup: warmup } = ctx.sizes;
  const total = warmup + measured;
  const heroes = (await ctx.bulk.insertHeroes(total)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
  const records: WorkflowRecord[] = new Array(total);
  await forEachLimited(heroes, STARTERS, async (hero, index) => {
    records[index] = await ctx.workflows.start(BenchSignalWorkflow, hero);
  });
  await waitUntil(async () => (await parkedCount(ctx)) === total, {
    timeoutMs: Math.max(60_000, total * 50),
    describe: async () => `${await parkedCount(ctx)} of ${total} ${SIGNAL_WORKFLOW} workflows parked`,
  });

  const latency: number[] = [];
  const call: number[] = [];
  const chain = async (first: number) => {
    for (let i = first; i < total; i += chains) {
      const workflow = records[i];
      const t0 = performance.now();
      const signal = await ctx.signals.signal(workflow, WAKE_SIGNAL, { payload: { seq: i } });
      signalsSent++;
      const t1 = performance.now();
      const bodyStartedAt = await confirmWoken(workflow.id, signal, i);
      if (i >= warmup) {
        latency.push(bodyStartedAt - t0);
        call.push(t1 - t0);
      }
    }
  };
  await Promise.all(Array.from({ length: chains }, (_, first) => chain(first)));

  await verifySignalWorkflows(ctx, { woken: signalsSent, parked: 0 });
  const finished = await ctx.dataSource.getRepository(WorkflowRecord).count({ where: { id: In(records.map((r) => r.id)), state: 'finished' } });
  assert(finished === total, `expected the ${total} signaled workflows to be finished, ${finished} are`);
  return { signals: measured, warmup, signalToStepStart: summarize(latency), signalCall: summarize(call) };
}

/** Signals sent by this run (all of them must end consumed). */
let signalsSent = 0;

/**
 * The woken body saw this very signal, and its outcome was committed: the workflow finished.
 * Returns when the body began (performance.now()).
 */
async function confirmWoken(workflowId: string, signal: Signal, seq: number): Promise<number> {
  assert(!signal.duplicateDelivery, `signal to workflow ${workflowId} came back as a duplicate delivery`);
  assert(signal.state === 'claimed', `signal to workflow ${workflowId} is ${signal.state} after signal(): it woke nothing`);
  const body = await probe.bodyStarts.wait(workflowId, STEP_TIMEOUT_MS, 'the woken step body');
  assert(body.seq === seq && body.signalId === signal.id, `workflow ${workflowId}'s body saw signal ${body.signalId} (seq ${String(body.seq)}), not ${signal.id} (seq ${seq})`);
  const outcome = await probe.finalized.wait(workflowId, STEP_TIMEOUT_MS, 'the woken step outcome');
  assert(outcome.workflowState === 'finished' && outcome.stepState === 'completed', `workflow ${workflowId} ended ${outcome.workflowState}/${outcome.stepState}, not finished/completed`);
  return body.at;
}

// ------------------------------------------------------------------ signal() cost vs parked population

export interface PopulationPoint {
  parked: number;
  /** Seconds to bulk-insert the parked workflows added for this point. */
  setupSeconds: number;
  signalCall: Summary;
  /** SQL statements one signal() issued (median over the measured calls; BEGIN/COMMIT included). */
  statementsPerSignal: number;
}

export interface PopulationResult {
  signalsPerPoint: number;
  warmup: number;
  small: PopulationPoint;
  large: PopulationPoint;
  /** median signal() at the large population / at the small one. */
  ratio: number;
  /** The statements of one signal() at the large population, with their plans when --explain. */
  statements: Array<{ sql: string; plan?: string[] }>;
}

/**
 * signal() to workflows picked at random among `small` parked ones, then among `large`: with
 * nothing polling and every lookup indexed, the median must not move with the population.
 */
export async function measurePopulation(ctx: BenchContext): Promise<PopulationResult> {
  const { smallPopulation, largePopulation, populationSignals, populationWarmup } = ctx.sizes;
  const wokenBefore = probe.wokenBodies;
  const parked: string[] = [];
  let sent = 0;
  let lastStatements: Array<{ query: string; parameters: unknown[] }> = [];

  const grow = async (target: number): Promise<number> => {
    const started = performance.now();
    parked.push(...(await ctx.bulk.insertParked(target - parked.length, SIGNAL_WORKFLOW, BenchHero.name, PARKED_STEP, new Date(Date.now() - 60_000))));
    await ctx.bulk.analyze();
    const seconds = (performance.now() - started) / 1000;
    const count = await parkedCount(ctx);
    assert(count === target, `expected ${target} parked workflows after the bulk insert, found ${count}`);
    return seconds;
  };

  const measure = async (setupSeconds: number): Promise<PopulationPoint> => {
    const population = parked.length;
    const samples: number[] = [];
    const statementCounts: number[] = [];
    for (let i = 0; i < populationWarmup + populationSignals; i++) {
      const index = Math.floor(ctx.random() * parked.length);
      const workflowId = parked[index];
      parked[index] = parked[parked.length - 1];
      parked.pop();
      const seq = sent++;
      ctx.recorder.recording = [];
      const t0 = performance.now();
      const signal = await ctx.signals.signal(workflowId, WAKE_SIGNAL, { payload: { seq } });
      const elapsed = performance.now() - t0;
      signalsSent++;
      const statements = ctx.recorder.recording;
      ctx.recorder.recording = null;
      await confirmWoken(workflowId, signal, seq);
      if (i >= populationWarmup) {
        samples.push(elapsed);
        statementCounts.push(statements.length);
        lastStatements = statements;
      }
    }
    return { parked: population, setupSeconds, signalCall: summarize(samples), statementsPerSignal: median(statementCounts) };
  };

  const small = await measure(await grow(smallPopulation));
  const large = await measure(await grow(largePopulation));

  const woken = probe.wokenBodies - wokenBefore;
  assert(woken === sent, `sent ${sent} signals but ${woken} parked bodies ran`);
  await verifySignalWorkflows(ctx, { woken: signalsSent, parked: parked.length });

  const statements: PopulationResult['statements'] = [];
  for (const s of lastStatements) statements.push({ sql: s.query, ...(ctx.options.explain ? { plan: await explain(ctx, s.query, s.parameters) } : {}) });
  return { signalsPerPoint: populationSignals, warmup: populationWarmup, small, large, ratio: large.signalCall.p50 / small.signalCall.p50, statements };
}

// ------------------------------------------------------------------ checks

function parkedCount(ctx: BenchContext): Promise<number> {
  return ctx.dataSource.getRepository(StepExecution).count({ where: { stepName: PARKED_STEP, state: 'waiting' } });
}

/**
 * Totals over every BenchSignalWorkflow so far: `woken` signals sent, each consumed, each woken
 * workflow finished with one completed execution; `parked` still waiting, none lost in between.
 */
async function verifySignalWorkflows(ctx: BenchContext, expected: { woken: number; parked: number }): Promise<void> {
  const signals = ctx.dataSource.getRepository(Signal);
  const workflows = ctx.dataSource.getRepository(WorkflowRecord);
  const executions = ctx.dataSource.getRepository(StepExecution);
  const found = {
    // This workflow's signals: other scenarios of the run (the shape's) send signals of their own.
    signals: await signals.count({ where: { name: WAKE_SIGNAL } }),
    consumed: await signals.count({ where: { name: WAKE_SIGNAL, state: 'consumed', consumed: 1, claimed: 1 } }),
    finished: await workflows.count({ where: { type: SIGNAL_WORKFLOW, state: 'finished' } }),
    completed: await executions.count({ where: { stepName: PARKED_STEP, state: 'completed', outcome: 'success' } }),
    parkedExecutions: await parkedCount(ctx),
    parkedWorkflows: await workflows.count({ where: { type: SIGNAL_WORKFLOW, state: 'ready' } }),
    otherExecutions: await executions.count({ where: { stepName: PARKED_STEP, state: In(['scheduled', 'in_progress', 'failed', 'canceled', 'skipped']) } }),
  };
  const want = {
    signals: expected.woken,
    consumed: expected.woken,
    finished: expected.woken,
    completed: expected.woken,
    parkedExecutions: expected.parked,
    parkedWorkflows: expected.parked,
    otherExecutions: 0,
  };
  assert(JSON.stringify(found) === JSON.stringify(want), `database check failed: expected ${JSON.stringify(want)}, found ${JSON.stringify(found)}`);
}

async function explain(ctx: BenchContext, sql: string, parameters: unknown[]): Promise<string[] | undefined> {
  if (!/^\s*(SELECT|UPDATE|DELETE)\b/i.test(sql)) return undefined;
  switch (ctx.options.db) {
    case 'sqlite': {
      const rows: Array<{ detail: string }> = await ctx.dataSource.query(`EXPLAIN QUERY PLAN ${sql}`, parameters);
      return rows.map((row) => row.detail);
    }
    case 'postgres': {
      const rows: Array<{ 'QUERY PLAN': string }> = await ctx.dataSource.query(`EXPLAIN ${sql}`, parameters);
      return rows.map((row) => row['QUERY PLAN']);
    }
    case 'mysql': {
      const rows: Array<Record<string, unknown>> = await ctx.dataSource.query(`EXPLAIN ${sql}`, parameters);
      return rows.map((row) => `table=${String(row.table)} type=${String(row.type)} key=${String(row.key)} rows=${String(row.rows)} extra=${String(row.Extra)}`);
    }
  }
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new BenchCheckError(message);
}

/** The bench's own verification failed: the numbers would not mean what they say. */
export class BenchCheckError extends Error {}
