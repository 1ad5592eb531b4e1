/**
 * The comparison workload: BenchPaymentWorkflow (`a` → `b` waiting for `payment_confirmed`, no-op
 * bodies) in both arrival orders, signals one at a time and all at once, a real parked population
 * left idle, and what one workflow costs in SQL statements and Redis commands. Every run checks the
 * database afterwards, like the other scenarios.
 */
import { loadavg } from 'node:os';
import { memoryUsage } from 'node:process';
import { In } from 'typeorm';
import { Redis } from 'ioredis';
import { Signal, StepExecution, WorkflowRecord, type Signal as SignalRow } from 'geneva-drive';
import { BenchEffect, BenchHero, DEADLINE_SHAPE, PAYMENT_SHAPE, PAYMENT_SIGNAL, PAYMENT_WORKFLOW, probe, type PaymentShape } from './app.js';
import { openWindow, type WindowCost } from './load.js';
import { PhaseTracker } from './phases.js';
import { assert, type BenchContext } from './scenarios.js';
import type { Sizes } from './config.js';
import { forEachLimited, summarize, type Summary } from './stats.js';
import { profiled } from './profile.js';

/** Calls in flight at once (start() and signal()), as in the other throughput scenario. */
const LANES = 16;
const TIMEOUT_MS = 120_000;
/** Pause between the last park mark and the first of the signals sent one at a time. */
const SETTLE_MS = 1_000;
/** PostgreSQL's longest delay in reporting a backend's statistics (10 s), and a margin. */
const PG_STATS_FLUSH_MS = 11_000;

/**
 * Budgets of the hot path, per workflow of this shape (BEGIN/COMMIT counted). The bench fails when
 * a count exceeds its budget: the counts are deterministic, unlike the timings. PostgreSQL's is what
 * it costs now plus one (15 / 19; the goal was 20 / 24), so that a statement more is seen. SQLite's
 * and MySQL's signal-after are what they cost now. Each step's phase 1 reads the hero in a statement
 * of its own once the row locks are held (one statement more per step than when the locking read
 * joined it, 14 / 17 on PostgreSQL): a locking read's snapshot predates its wait for the locks, so
 * the hero it joined could be older than the commit the step acts on. PostgreSQL's `signal()` then
 * became one message (12 / 15 plus the signal ids taken 64 at a time: budget 13 / 16), and a job
 * started in the process whose statement scheduled it (start()'s, the signal's message) begins on
 * the rows that statement left (11 / 13), and a chained gate's signals are read with its hero
 * (10 / 12). Then messages that carry several statements: the hero read rides on the guarded start,
 * the locked finalize's BEGIN on its lock read and its last writes on its COMMIT (7 / 8 round trips:
 * budget 8 / 9; a message counts once). A chained finalize then began its transaction with the
 * outcome's guarded write and the next step's hero and signals read after it (6 / 7: budget 7 / 8),
 * and then a chained step that decides nothing in Node started by a statement in that outcome's
 * message, which commits with it (5 / 6: budget 6 / 7).
 */
export const STATEMENT_BUDGET: Record<'postgres' | 'mysql' | 'sqlite', { signalFirst: number; signalAfter: number }> = {
  postgres: { signalFirst: 6, signalAfter: 7 },
  mysql: { signalFirst: 30, signalAfter: 32 },
  sqlite: { signalFirst: 32, signalAfter: 38 },
};
/**
 * Statements per workflow of the ledger shape whose `b` is transactional and inserts one row
 * through `this.manager` (BEGIN/COMMIT counted), gated like STATEMENT_BUDGET: what it costs now
 * (PostgreSQL 9 / 10, MySQL 27 / 32, SQLite 33 / 38) plus half a statement, so that one statement
 * more per workflow fails the run while a few workflows whose `b` parked before its signal arrived
 * (a race of the signal-first order, a few statements each) do not. The plain ledger shape costs
 * 6 / 7 on PostgreSQL (its `b` starts in `a`'s outcome message; the transactional `b` does not),
 * 27 / 33 and 33 / 39: the difference, and where it comes from, is in docs/BENCHMARKS.md.
 */
export const LEDGER_STATEMENT_BUDGET: Record<'postgres' | 'mysql' | 'sqlite', { signalFirst: number; signalAfter: number }> = {
  postgres: { signalFirst: 9.5, signalAfter: 10.5 },
  mysql: { signalFirst: 27.5, signalAfter: 32.5 },
  sqlite: { signalFirst: 33.5, signalAfter: 38.5 },
};

/**
 * Redis commands, by queue adapter, gated on what does not depend on the machine's speed. A job that
 * the enqueuing process starts itself (a slot free, or a place held for one) costs the run ledger's
 * HSET, and a share of the HDEL that drops the runs ended within 25 ms together, which let another
 * worker take it over should that process die: the shape run one workflow at a time, where every job
 * finds a slot, costs at most 2 commands per workflow signal first (one job) and 4 signal after (two)
 * — fewer as more ends share an HDEL, which depends on the machine's speed — gated at half a command
 * more than that most (the workers' idle polls, a few per run, stay under it; one command more per
 * workflow does not). A job that goes through Redis costs the queue's own commands: Bull
 * about 21–22, BullMQ about 34. How many jobs of a burst outrun the process's slots and go through
 * Redis depends on how fast the bodies end, i.e. on the machine: the burst's commands per workflow
 * are printed with that split, not gated; the commands per job that went through Redis are, where at
 * least {@link MIN_QUEUED_JOBS} did (so that the workers' idle polls weigh little).
 */
export const REDIS_BUDGET = {
  bull: { oneAtATime: { signalFirst: 2.5, signalAfter: 4.5 }, perQueuedJob: 23 },
  bullmq: { oneAtATime: { signalFirst: 2.5, signalAfter: 4.5 }, perQueuedJob: 36 },
};
export const MIN_QUEUED_JOBS = 20;

/** Redis commands per job that went through Redis (the run ledger's apart), when enough did to tell. */
export function commandsPerQueuedJob(redis: RedisCount): number | undefined {
  return redis.jobsOnQueue >= MIN_QUEUED_JOBS ? round((redis.total - redis.ledger) / redis.jobsOnQueue) : undefined;
}

/** The Redis queue of a bench run, whose commands are counted. */
export interface RedisTarget {
  adapter: 'bull' | 'bullmq';
  prefix: string;
  url: string;
}

/** 1-minute load average as a timed run began and as it ended. */
export interface RunLoad {
  start: number;
  end: number;
}

export interface ShapeRun {
  workflows: number;
  load: RunLoad;
  /** CPU per workflow over the run: this process (sender and worker), and the database server (not on SQLite). */
  nodeCpuMsPerWorkflow: number;
  serverCpuMsPerWorkflow?: number;
  /** First start() to the last workflow finished. */
  wallMs: number;
  workflowsPerSecond: number;
  /** Signal-after only: first start() to the last `b` parked, and the rate of parking. */
  parkMs?: number;
  parkedPerSecond?: number;
  /** Signal-after only: first signal() to the last workflow finished. */
  wakeMs?: number;
  wokenPerSecond?: number;
}

export interface SignalsResult {
  signals: number;
  load: RunLoad;
  /** Each signal() call's start to its woken body's first line, all calls fired at once. */
  signalToStepStart: Summary;
  signalCall: Summary;
}

export interface CostCount {
  workflows: number;
  statementsPerWorkflow: number;
  /** Statements per workflow by kind (verb and table; FOR UPDATE marked), most frequent first. */
  statementsByKind: Record<string, number>;
  /** Bull and BullMQ only: Redis commands per workflow seen by MONITOR on this run's keys, by command. */
  redisCommandsPerWorkflow?: number;
  redisByCommand?: Record<string, number>;
  redis?: RedisCount;
}

export interface IdleResult {
  parked: number;
  /** Seconds the parked population was left alone. */
  idleSeconds: number;
  /** Seconds from the first start() to the last park, through the API and the queue, and the rate. */
  parkSeconds: number;
  parkedPerSecond: number;
  load: RunLoad;
  nodeCpuPercent: number;
  /** CPU of the database server: PostgreSQL's backends of the bench database, or the whole mariadbd (absent on SQLite). */
  serverCpuPercent?: number;
  /** PostgreSQL only: commits per second in the bench database. */
  xactCommitPerSecond?: number;
  /** Statements this process issued while idle, the process table's heartbeat apart. */
  statementsWhileIdle: number;
  /** The process table's heartbeat statements in the window (one per 30 s, whatever is parked). */
  heartbeatStatements: number;
  /** Bull only: Redis commands on this run's keys while idle. */
  redisCommandsWhileIdle?: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
}

async function heroes(ctx: BenchContext, n: number): Promise<BenchHero[]> {
  return (await ctx.bulk.insertHeroes(n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
}

/**
 * One engine as the timed runs of the shape drive it: geneva-drive (shapeEngine below) or a peer
 * (dbos-peer.ts). The same code times both, so both are measured alike.
 */
export interface ShapeEngine {
  /** Names its CPU profiles (`--profile`). */
  readonly name: string;
  /** `n` start calls, whatever they need prepared outside the clock (geneva-drive's heroes); each resolves to the workflow's id. */
  starts(n: number): Promise<Array<() => Promise<string>>>;
  /** Sends `payment_confirmed` with `seq` in its payload, under `idempotencyKey` when given. */
  signal(id: string, seq: number, idempotencyKey?: string): Promise<void>;
  /** performance.now() as `b` parked, and as its body began; the workflow's end. */
  parked(id: string, timeoutMs: number): Promise<number>;
  body(id: string): Promise<number>;
  finished(id: string): Promise<unknown>;
  /** A measured window: this process's CPU and the engine's database backends. */
  openWindow(): Promise<{ close: () => Promise<WindowCost> }>;
  /** Throws unless every workflow of `ids` finished once and consumed its signal once. */
  verify(ids: string[]): Promise<void>;
}

/** geneva-drive running `shape` through this bench's application. */
export function shapeEngine(ctx: BenchContext, shape: PaymentShape = PAYMENT_SHAPE): ShapeEngine {
  return {
    name: 'geneva-drive',
    starts: async (n) => (await heroes(ctx, n)).map((hero) => async () => (await ctx.workflows.start(shape.workflowClass, hero)).id),
    signal: async (id, seq, idempotencyKey) => {
      await ctx.signals.signal(id, PAYMENT_SIGNAL, { payload: { seq }, ...(idempotencyKey === undefined ? {} : { idempotencyKey }) });
    },
    parked: (id, timeoutMs) => probe.paymentParked.wait(id, timeoutMs, 'the parked step'),
    body: (id) => probe.paymentBodies.wait(id, TIMEOUT_MS, 'the woken body'),
    finished: (id) => probe.paymentFinished.wait(id, TIMEOUT_MS, 'the finished workflow'),
    openWindow: () => openWindow(ctx.dataSource, ctx.options.db),
    verify: (ids) => verify(ctx, ids, shape),
  };
}

/** Starts and signals each workflow right away: the signal is buffered and `b` runs without parking. */
async function signalFirst(engine: ShapeEngine, starts: Array<() => Promise<string>>): Promise<string[]> {
  const ids: string[] = [];
  const done: Array<Promise<unknown>> = [];
  await forEachLimited(starts, LANES, async (start, i) => {
    const id = await start();
    ids.push(id);
    done.push(engine.finished(id));
    await engine.signal(id, i, `evt-${id}`);
  });
  await Promise.all(done);
  return ids;
}

/** Starts every workflow, waits until all have parked, then signals them all. */
async function signalAfter(engine: ShapeEngine, starts: Array<() => Promise<string>>): Promise<{ ids: string[]; lastParkedAt: number; wakeStartedAt: number }> {
  const ids = await startAll(starts);
  const parkedAt = await Promise.all(ids.map((id) => engine.parked(id, TIMEOUT_MS)));
  const done = ids.map((id) => engine.finished(id));
  const wakeStartedAt = performance.now();
  await forEachLimited(ids, LANES, async (id, i) => {
    await engine.signal(id, i, `evt-${id}`);
  });
  await Promise.all(done);
  return { ids, lastParkedAt: Math.max(...parkedAt), wakeStartedAt };
}

function load(cost: WindowCost): RunLoad {
  return { start: cost.loadStart, end: cost.loadEnd };
}

function cpuPerWorkflow(cost: WindowCost, n: number): Pick<ShapeRun, 'nodeCpuMsPerWorkflow' | 'serverCpuMsPerWorkflow'> {
  return { nodeCpuMsPerWorkflow: round(cost.nodeCpuMs / n), ...(cost.serverCpuMs === undefined ? {} : { serverCpuMsPerWorkflow: round(cost.serverCpuMs / n) }) };
}

export async function runSignalFirst(engine: ShapeEngine, n: number): Promise<ShapeRun> {
  const starts = await engine.starts(n);
  const window = await engine.openWindow();
  const started = performance.now();
  const ids = await profiled(`${engine.name}-signal-first`, () => signalFirst(engine, starts));
  const wallMs = performance.now() - started;
  const cost = await window.close();
  await engine.verify(ids);
  return { workflows: n, load: load(cost), ...cpuPerWorkflow(cost, n), wallMs, workflowsPerSecond: n / (wallMs / 1000) };
}

export async function runSignalAfter(engine: ShapeEngine, n: number): Promise<ShapeRun> {
  const starts = await engine.starts(n);
  const window = await engine.openWindow();
  const started = performance.now();
  const { ids, lastParkedAt, wakeStartedAt } = await profiled(`${engine.name}-signal-after`, () => signalAfter(engine, starts));
  const end = performance.now();
  const cost = await window.close();
  await engine.verify(ids);
  return { workflows: n, load: load(cost), ...cpuPerWorkflow(cost, n), ...afterRates(n, started, lastParkedAt, wakeStartedAt, end) };
}

/** The rates of a signal-after run from its four instants (performance.now()). */
export function afterRates(n: number, started: number, lastParkedAt: number, wakeStartedAt: number, end: number): Omit<ShapeRun, 'workflows' | 'load' | 'nodeCpuMsPerWorkflow' | 'serverCpuMsPerWorkflow'> {
  const parkMs = lastParkedAt - started;
  return {
    wallMs: end - started,
    workflowsPerSecond: n / ((end - started) / 1000),
    parkMs,
    parkedPerSecond: n / (parkMs / 1000),
    wakeMs: end - wakeStartedAt,
    wokenPerSecond: n / ((end - wakeStartedAt) / 1000),
  };
}

/** `n` workflows parked, then signaled one at a time, each after the previous one finished. */
export async function runSequential(engine: ShapeEngine, n: number): Promise<SignalsResult> {
  const { ids } = await parkAll(engine, n, TIMEOUT_MS);
  // A park is marked as the engine decides to wait, before its own writes: let the last ones land,
  // so that the first signals find an idle engine like the others, not the tail of the parking.
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const window = await engine.openWindow();
  const latency: number[] = [];
  const call: number[] = [];
  await profiled(`${engine.name}-one-at-a-time`, async () => {
    for (const [i, id] of ids.entries()) {
      const done = engine.finished(id);
      const t0 = performance.now();
      await engine.signal(id, i);
      call.push(performance.now() - t0);
      latency.push((await engine.body(id)) - t0);
      await done;
    }
  });
  const cost = await window.close();
  await engine.verify(ids);
  return { signals: n, load: load(cost), signalToStepStart: summarize(latency), signalCall: summarize(call) };
}

/** `n` workflows parked, then `n` signal() calls fired at once. */
export async function runSimultaneous(engine: ShapeEngine, n: number): Promise<SignalsResult> {
  const { ids } = await parkAll(engine, n, TIMEOUT_MS);
  const done = ids.map((id) => engine.finished(id));
  const window = await engine.openWindow();
  const calls = await Promise.all(
    ids.map(async (id, i) => {
      const t0 = performance.now();
      await engine.signal(id, i);
      return { t0, callMs: performance.now() - t0 };
    }),
  );
  const bodies = await Promise.all(ids.map((id) => engine.body(id)));
  await Promise.all(done);
  const cost = await window.close();
  await engine.verify(ids);
  return {
    signals: n,
    load: load(cost),
    signalToStepStart: summarize(calls.map((call, i) => bodies[i] - call.t0)),
    signalCall: summarize(calls.map((call) => call.callMs)),
  };
}

/** `n` workflows started and parked, with the time from the first start to the last park (what the starts need is prepared before the clock). */
async function parkAll(engine: ShapeEngine, n: number, timeoutMs: number): Promise<{ ids: string[]; parkMs: number }> {
  const starts = await engine.starts(n);
  const started = performance.now();
  const ids = await startAll(starts);
  const parkedAt = await Promise.all(ids.map((id) => engine.parked(id, timeoutMs)));
  return { ids, parkMs: Math.max(...parkedAt) - started };
}

/** Makes the start calls, LANES at a time; the ids in the order the starts returned. */
async function startAll(starts: Array<() => Promise<string>>): Promise<string[]> {
  const ids: string[] = [];
  await forEachLimited(starts, LANES, async (start) => {
    ids.push(await start());
  });
  return ids;
}

/**
 * Statements per workflow by named phase (see PhaseTracker): `n` workflows of one arrival order,
 * one at a time, every statement of the process attributed. Also every statement of the first
 * workflow, in order, with its phase.
 */
export async function countPhases(
  ctx: BenchContext,
  order: 'signalFirst' | 'signalAfter',
  n: number,
  shape = PAYMENT_SHAPE,
  bull?: RedisTarget,
): Promise<{ workflows: number; statementsPerWorkflow: number; byPhase: Record<string, number>; firstWorkflow: Array<{ phase: string; sql: string }>; redis?: RedisCount }> {
  const list = await heroes(ctx, n);
  const tracker = new PhaseTracker(ctx.recorder, shape.name);
  const firstWorkflow: Array<{ phase: string; sql: string }> = (tracker.listing = []);
  const ids: string[] = [];
  const monitor = bull ? await RedisMonitor.start(bull.url, bull.prefix) : undefined;
  tracker.start();
  let counts: Map<string, number>;
  try {
    for (const [i, hero] of list.entries()) {
      const workflow = await tracker.call('start()', () => ctx.workflows.start(shape.workflowClass, hero));
      ids.push(workflow.id);
      const done = probe.paymentFinished.wait(workflow.id, TIMEOUT_MS, 'the finished workflow');
      if (order === 'signalAfter') await probe.paymentParked.wait(workflow.id, TIMEOUT_MS, 'the parked step');
      await tracker.call('signal()', () => ctx.signals.signal(workflow, PAYMENT_SIGNAL, { payload: { seq: i }, idempotencyKey: `evt-${workflow.id}` }));
      await done;
      tracker.listing = null;
    }
  } finally {
    counts = tracker.stop();
  }
  const redis = await monitor?.stop();
  await verify(ctx, ids, shape);
  const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
  return { workflows: n, statementsPerWorkflow: round(total / n), byPhase: Object.fromEntries([...counts].map(([phase, count]) => [phase, round(count / n)])), firstWorkflow, ...(redis ? { redis } : {}) };
}

/**
 * What `n` workflows of one arrival order cost: every statement the process issued and (on Bull)
 * every Redis command on this run's keys, divided by `n`. Nothing else runs meanwhile, and the waits
 * use the engine's events, never a poll of the database; the check of the rows comes after counting.
 */
export async function countCost(ctx: BenchContext, order: 'signalFirst' | 'signalAfter', n: number, bull?: RedisTarget, shape = PAYMENT_SHAPE): Promise<CostCount> {
  const engine = shapeEngine(ctx, shape);
  const starts = await engine.starts(n);
  const monitor = bull ? await RedisMonitor.start(bull.url, bull.prefix) : undefined;
  const statements: Array<{ query: string }> = (ctx.recorder.recording = []);
  let ids: string[];
  try {
    ids = order === 'signalFirst' ? await signalFirst(engine, starts) : (await signalAfter(engine, starts)).ids;
  } finally {
    ctx.recorder.recording = null;
  }
  const redis = await monitor?.stop();
  await engine.verify(ids);

  const byKind: Record<string, number> = {};
  for (const { query } of statements) byKind[statementKind(query)] = (byKind[statementKind(query)] ?? 0) + 1;
  const perWorkflow = (counts: Record<string, number>) =>
    Object.fromEntries(Object.entries(counts).sort(([, a], [, b]) => b - a).map(([kind, count]) => [kind, round(count / n)]));
  return {
    workflows: n,
    statementsPerWorkflow: round(statements.length / n),
    statementsByKind: perWorkflow(byKind),
    ...(redis ? { redisCommandsPerWorkflow: round(redis.total / n), redisByCommand: perWorkflow(redis.byCommand), redis } : {}),
  };
}

/** `n` workflows started and parked through the API, then left alone for `idleSeconds`. */
export async function measureIdle(
  ctx: BenchContext,
  n: number,
  idleSeconds: number,
  bull?: { prefix: string; url: string },
  options: { withDeadlines?: boolean } = {},
): Promise<IdleResult> {
  const { parkMs } = await parkAll(shapeEngine(ctx, options.withDeadlines ? DEADLINE_SHAPE : PAYMENT_SHAPE), n, TIMEOUT_MS * 5);
  // Let the last commits and job completions settle before the window opens. On PostgreSQL also let
  // the backends report the setup's commits: an idle backend flushes its pending statistics to
  // pg_stat_database up to 10 s late (PGSTAT_IDLE_INTERVAL), which would count as idle commits.
  await new Promise((resolve) => setTimeout(resolve, ctx.options.db === 'postgres' ? PG_STATS_FLUSH_MS : 1_000));

  const monitor = bull ? await RedisMonitor.start(bull.url, bull.prefix) : undefined;
  const rssBefore = memoryUsage().rss;
  const window = await openWindow(ctx.dataSource, ctx.options.db);
  ctx.recorder.recording = [];
  await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
  // The process table's heartbeat is the process's, not the parked workflows': counted apart.
  const heartbeat = ctx.recorder.recording.filter((statement) => statement.query.includes('geneva_drive_processes')).length;
  const statementsWhileIdle = ctx.recorder.recording.length - heartbeat;
  ctx.recorder.recording = null;
  const cost = await window.close();
  const redis = await monitor?.stop();

  const parkedNow = await ctx.dataSource.getRepository(StepExecution).count({ where: { stepName: 'b', state: 'waiting' } });
  assert(parkedNow >= n, `expected at least ${n} parked executions of ${PAYMENT_WORKFLOW} after the idle window, found ${parkedNow}`);
  const percent = (cpuMs: number) => round((cpuMs / cost.elapsedMs) * 100);
  return {
    parked: n,
    idleSeconds,
    parkSeconds: round(parkMs / 1000),
    parkedPerSecond: round(n / (parkMs / 1000)),
    load: load(cost),
    nodeCpuPercent: percent(cost.nodeCpuMs),
    ...(cost.serverCpuMs === undefined ? {} : { serverCpuPercent: percent(cost.serverCpuMs) }),
    ...(cost.commits === undefined ? {} : { xactCommitPerSecond: round(cost.commits / (cost.elapsedMs / 1000)) }),
    statementsWhileIdle,
    heartbeatStatements: heartbeat,
    ...(redis ? { redisCommandsWhileIdle: redis.total } : {}),
    rssBeforeMiB: round(rssBefore / 2 ** 20),
    rssAfterMiB: round(memoryUsage().rss / 2 ** 20),
  };
}

/** Every workflow finished, its signal consumed once, two completed executions and nothing else; with a ledger shape, one row per workflow. */
export async function verify(ctx: BenchContext, ids: string[], shape = PAYMENT_SHAPE): Promise<void> {
  const workflows = await ctx.dataSource.getRepository(WorkflowRecord).count({ where: { id: In(ids), state: 'finished' } });
  const signals: SignalRow[] = await ctx.dataSource.getRepository(Signal).find({ where: { workflowId: In(ids) } });
  const executions = await ctx.dataSource.getRepository(StepExecution).find({ where: { workflowId: In(ids) }, select: { state: true, outcome: true } });
  const consumedOnce = signals.filter((s) => s.state === 'consumed' && s.claimed === 1 && s.consumed === 1).length;
  const completed = executions.filter((e) => e.state === 'completed' && e.outcome === 'success').length;
  assert(
    workflows === ids.length && signals.length === ids.length && consumedOnce === ids.length && executions.length === 2 * ids.length && completed === 2 * ids.length,
    `${shape.name} check failed for ${ids.length} workflows: ${workflows} finished, ${signals.length} signals (${consumedOnce} consumed once), ${executions.length} executions (${completed} completed/success)`,
  );
  if (!shape.writesEffect) return;
  const effects = await ctx.dataSource.getRepository(BenchEffect).find({ where: { workflowId: In(ids) }, select: { workflowId: true } });
  const written = new Set(effects.map((row) => row.workflowId));
  assert(effects.length === ids.length && written.size === ids.length, `${shape.name} check failed for ${ids.length} workflows: ${effects.length} effect rows, of ${written.size} workflows`);
}

/** A statement's kind: its verb and table, `FOR UPDATE` marked (BEGIN, COMMIT, SAVEPOINT as they are). */
export function statementKind(sql: string): string {
  const text = sql.replace(/\s+/g, ' ').trim();
  const verb = /^(\w+)/.exec(text)?.[1]?.toUpperCase() ?? '?';
  if (!['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'WITH'].includes(verb)) return text.split(' ').slice(0, 2).join(' ').toUpperCase();
  const table = /(?:FROM|INTO|UPDATE)\s+[`"]?(\w+)[`"]?/i.exec(text)?.[1] ?? '?';
  return `${verb} ${table.replace(/^geneva_drive_/, '')}${/FOR UPDATE/i.test(text) ? ' FOR UPDATE' : ''}`;
}

export function round(value: number): number {
  return Math.round(value * 100) / 100;
}

/**
 * A queue's own keys (`<prefix>:<queue>:<name>`, the name's first part) in Bull and BullMQ; any other
 * name under the queue is a job's (its id, alone or with `:lock`, `:logs`, `:processed`, ... after
 * it), or the engine's run ledger's (`gd-runs:`, `gd-leases`).
 */
const QUEUE_KEY_NAMES = new Set(['wait', 'active', 'delayed', 'completed', 'failed', 'priority', 'prioritized', 'id', 'meta', 'meta-paused', 'paused', 'stalled', 'stalled-check', 'limiter', 'repeat', 'drained', 'events', 'marker', 'pc', 'de', 'metrics', '']);

/** Redis commands of a counted window, split by who sent them. */
export interface RedisCount {
  total: number;
  byCommand: Record<string, number>;
  /** Commands on the run ledger's keys: a job started in the process that enqueued it is recorded there (HSET) and struck off (HDEL). */
  ledger: number;
  /** Jobs recorded in the ledger: started (or held for a slot) in the enqueuing process. */
  jobsInProcess: number;
  /** Jobs whose own keys were touched: the ones that went through Redis. */
  jobsOnQueue: number;
}

/** Redis MONITOR on a separate connection, counting the commands that touch this run's queue keys. */
class RedisMonitor {
  private total = 0;
  private readonly byCommand: Record<string, number> = {};
  private ledger = 0;
  private jobsInProcess = 0;
  private readonly jobsOnQueue = new Set<string>();
  private stopping = false;
  private failure: unknown;

  private constructor(
    private readonly connection: Redis,
    private readonly monitor: Redis,
    private readonly prefix: string,
  ) {}

  static async start(url: string, prefix: string): Promise<RedisMonitor> {
    const connection = new Redis(url, { lazyConnect: true });
    await connection.connect();
    const monitor = await connection.monitor();
    const counter = new RedisMonitor(connection, monitor, prefix);
    monitor.on('monitor', (_time: string, args: string[]) => counter.count(args));
    // Lines still in flight when the connection closes make ioredis report a command queue error:
    // harmless then, and a real failure (the count would be short) before.
    monitor.on('error', (error: unknown) => {
      if (!counter.stopping) counter.failure ??= error;
    });
    return counter;
  }

  private count(args: string[]): void {
    if (!args.some((arg) => arg.includes(this.prefix))) return;
    this.total++;
    const command = args[0].toUpperCase();
    this.byCommand[command] = (this.byCommand[command] ?? 0) + 1;
    const names = args.filter((arg) => arg.startsWith(`${this.prefix}:`)).map((key) => key.slice(key.indexOf(':', this.prefix.length + 1) + 1));
    if (names.some((name) => name.startsWith('gd-'))) {
      this.ledger++;
      if (command === 'HSET') this.jobsInProcess++;
      return;
    }
    for (const name of names) {
      const job = name.split(':')[0]; // a job's own keys: its id, then `:lock`, `:logs`, `:processed`, ...
      if (!QUEUE_KEY_NAMES.has(job)) this.jobsOnQueue.add(job);
    }
  }

  async stop(): Promise<RedisCount> {
    // MONITOR lines trail the commands a little: give the last ones time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 300));
    this.stopping = true;
    this.monitor.disconnect();
    this.connection.disconnect();
    if (this.failure !== undefined) throw new Error(`bench: Redis MONITOR failed, its count is incomplete: ${String(this.failure)}`);
    return { total: this.total, byCommand: this.byCommand, ledger: this.ledger, jobsInProcess: this.jobsInProcess, jobsOnQueue: this.jobsOnQueue.size };
  }
}

/** One engine's run of the comparison with a peer: both arrival orders, then signals one at a time; the load as it began and ended. */
export interface PeerRun {
  signalFirst: ShapeRun;
  signalAfter: ShapeRun;
  sequential: SignalsResult;
  load: RunLoad;
}

export async function measurePeerRun(engine: ShapeEngine, sizes: Pick<Sizes, 'shapeWorkflows' | 'sequentialSignals'>): Promise<PeerRun> {
  const start = loadavg()[0];
  const signalFirst = await runSignalFirst(engine, sizes.shapeWorkflows);
  const signalAfter = await runSignalAfter(engine, sizes.shapeWorkflows);
  const sequential = await runSequential(engine, sizes.sequentialSignals);
  return { signalFirst, signalAfter, sequential, load: { start, end: loadavg()[0] } };
}
