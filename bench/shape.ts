/**
 * The comparison workload: BenchPaymentWorkflow (`a` → `b` waiting for `payment_confirmed`, no-op
 * bodies) in both arrival orders, signals one at a time and all at once, a real parked population
 * left idle, and what one workflow costs in SQL statements and Redis commands. Every run checks the
 * database afterwards, like the other scenarios.
 */
import { cpuUsage, memoryUsage } from 'node:process';
import { readFileSync } from 'node:fs';
import { In } from 'typeorm';
import { Redis } from 'ioredis';
import { Signal, StepExecution, WorkflowRecord, type Signal as SignalRow } from 'geneva-drive';
import { BenchDeadlinePaymentWorkflow, BenchHero, BenchPaymentWorkflow, PAYMENT_SIGNAL, PAYMENT_WORKFLOW, probe } from './app.js';
import { assert, type BenchContext } from './scenarios.js';
import { forEachLimited, summarize, type Summary } from './stats.js';

/** Calls in flight at once (start() and signal()), as in the other throughput scenario. */
const LANES = 16;
const TIMEOUT_MS = 120_000;

/**
 * Budgets of the hot path, per workflow of this shape (BEGIN/COMMIT counted). The bench fails when
 * a count exceeds its budget: the counts are deterministic, unlike the timings.
 */
export const STATEMENT_BUDGET: Record<'postgres' | 'mysql' | 'sqlite', { signalFirst: number; signalAfter: number }> = {
  postgres: { signalFirst: 20, signalAfter: 24 },
  mysql: { signalFirst: 30, signalAfter: 30 },
  sqlite: { signalFirst: 30, signalAfter: 30 },
};
/** Redis commands per workflow on Bull: half of what two and three Bull jobs cost before (44 / 66). */
export const REDIS_BUDGET = { signalFirst: 22, signalAfter: 33 };

export interface ShapeRun {
  workflows: number;
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

export interface SimultaneousResult {
  signals: number;
  /** Each signal() call's start to its woken body's first line, all calls fired at once. */
  signalToStepStart: Summary;
  signalCall: Summary;
}

export interface CostCount {
  workflows: number;
  statementsPerWorkflow: number;
  /** Statements per workflow by kind (verb and table; FOR UPDATE marked), most frequent first. */
  statementsByKind: Record<string, number>;
  /** Bull only: Redis commands per workflow seen by MONITOR on this run's keys, by command. */
  redisCommandsPerWorkflow?: number;
  redisByCommand?: Record<string, number>;
}

export interface IdleResult {
  parked: number;
  /** Seconds the parked population was left alone. */
  idleSeconds: number;
  /** Seconds to start and park the population through the API. */
  setupSeconds: number;
  nodeCpuPercent: number;
  /** PostgreSQL only: CPU of the bench database's backends, and its commits per second. */
  postgresCpuPercent?: number;
  xactCommitPerSecond?: number;
  /** Statements this process issued while idle. */
  statementsWhileIdle: number;
  rssBeforeMiB: number;
  rssAfterMiB: number;
}

async function heroes(ctx: BenchContext, n: number): Promise<BenchHero[]> {
  return (await ctx.bulk.insertHeroes(n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
}

function finished(workflowId: string): Promise<unknown> {
  return probe.paymentFinished.wait(workflowId, TIMEOUT_MS, 'the finished workflow');
}

/** Starts and signals each workflow right away: the signal is buffered and `b` runs without parking. */
async function signalFirst(ctx: BenchContext, list: BenchHero[]): Promise<string[]> {
  const ids: string[] = [];
  const done: Array<Promise<unknown>> = [];
  await forEachLimited(list, LANES, async (hero, i) => {
    const workflow = await ctx.workflows.start(BenchPaymentWorkflow, hero);
    ids.push(workflow.id);
    done.push(finished(workflow.id));
    await ctx.signals.signal(workflow, PAYMENT_SIGNAL, { payload: { seq: i }, idempotencyKey: `evt-${workflow.id}` });
  });
  await Promise.all(done);
  return ids;
}

/** Starts every workflow, waits until all have parked, then signals them all. */
async function signalAfter(ctx: BenchContext, list: BenchHero[]): Promise<{ ids: string[]; lastParkedAt: number; wakeStartedAt: number }> {
  const ids: string[] = [];
  await forEachLimited(list, LANES, async (hero) => {
    ids.push((await ctx.workflows.start(BenchPaymentWorkflow, hero)).id);
  });
  const parkedAt = await Promise.all(ids.map((id) => probe.paymentParked.wait(id, TIMEOUT_MS, 'the parked step')));
  const done = ids.map(finished);
  const wakeStartedAt = performance.now();
  await forEachLimited(ids, LANES, async (id, i) => {
    await ctx.signals.signal(id, PAYMENT_SIGNAL, { payload: { seq: i }, idempotencyKey: `evt-${id}` });
  });
  await Promise.all(done);
  return { ids, lastParkedAt: Math.max(...parkedAt), wakeStartedAt };
}

export async function runSignalFirst(ctx: BenchContext, n: number): Promise<ShapeRun> {
  const list = await heroes(ctx, n);
  const started = performance.now();
  const ids = await signalFirst(ctx, list);
  const wallMs = performance.now() - started;
  await verify(ctx, ids);
  return { workflows: n, wallMs, workflowsPerSecond: n / (wallMs / 1000) };
}

export async function runSignalAfter(ctx: BenchContext, n: number): Promise<ShapeRun> {
  const list = await heroes(ctx, n);
  const started = performance.now();
  const { ids, lastParkedAt, wakeStartedAt } = await signalAfter(ctx, list);
  const end = performance.now();
  await verify(ctx, ids);
  const parkMs = lastParkedAt - started;
  return {
    workflows: n,
    wallMs: end - started,
    workflowsPerSecond: n / ((end - started) / 1000),
    parkMs,
    parkedPerSecond: n / (parkMs / 1000),
    wakeMs: end - wakeStartedAt,
    wokenPerSecond: n / ((end - wakeStartedAt) / 1000),
  };
}

/** `n` workflows parked, then `n` signal() calls fired at once. */
export async function runSimultaneous(ctx: BenchContext, n: number): Promise<SimultaneousResult> {
  const list = await heroes(ctx, n);
  const ids: string[] = [];
  await forEachLimited(list, LANES, async (hero) => {
    ids.push((await ctx.workflows.start(BenchPaymentWorkflow, hero)).id);
  });
  await Promise.all(ids.map((id) => probe.paymentParked.wait(id, TIMEOUT_MS, 'the parked step')));
  const done = ids.map(finished);
  const calls = await Promise.all(
    ids.map(async (id, i) => {
      const t0 = performance.now();
      await ctx.signals.signal(id, PAYMENT_SIGNAL, { payload: { seq: i } });
      return { t0, callMs: performance.now() - t0 };
    }),
  );
  const bodies = await Promise.all(ids.map((id) => probe.paymentBodies.wait(id, TIMEOUT_MS, 'the woken body')));
  await Promise.all(done);
  await verify(ctx, ids);
  return {
    signals: n,
    signalToStepStart: summarize(calls.map((call, i) => bodies[i] - call.t0)),
    signalCall: summarize(calls.map((call) => call.callMs)),
  };
}

/**
 * What `n` workflows of one arrival order cost: every statement the process issued and (on Bull)
 * every Redis command on this run's keys, divided by `n`. Nothing else runs meanwhile, and the waits
 * use the engine's events, never a poll of the database; the check of the rows comes after counting.
 */
export async function countCost(ctx: BenchContext, order: 'signalFirst' | 'signalAfter', n: number, bull?: { prefix: string; url: string }): Promise<CostCount> {
  const list = await heroes(ctx, n);
  const monitor = bull ? await RedisMonitor.start(bull.url, bull.prefix) : undefined;
  const statements: Array<{ query: string }> = (ctx.recorder.recording = []);
  let ids: string[];
  try {
    ids = order === 'signalFirst' ? await signalFirst(ctx, list) : (await signalAfter(ctx, list)).ids;
  } finally {
    ctx.recorder.recording = null;
  }
  const redis = await monitor?.stop();
  await verify(ctx, ids);

  const byKind: Record<string, number> = {};
  for (const { query } of statements) byKind[statementKind(query)] = (byKind[statementKind(query)] ?? 0) + 1;
  const perWorkflow = (counts: Record<string, number>) =>
    Object.fromEntries(Object.entries(counts).sort(([, a], [, b]) => b - a).map(([kind, count]) => [kind, round(count / n)]));
  return {
    workflows: n,
    statementsPerWorkflow: round(statements.length / n),
    statementsByKind: perWorkflow(byKind),
    ...(redis ? { redisCommandsPerWorkflow: round(redis.total / n), redisByCommand: perWorkflow(redis.byCommand) } : {}),
  };
}

/** `n` workflows started and parked through the API, then left alone for `idleSeconds`. */
export async function measureIdle(ctx: BenchContext, n: number, idleSeconds: number, options: { withDeadlines?: boolean } = {}): Promise<IdleResult> {
  const workflowClass = options.withDeadlines ? BenchDeadlinePaymentWorkflow : BenchPaymentWorkflow;
  const setupStarted = performance.now();
  const list = await heroes(ctx, n);
  const ids: string[] = [];
  await forEachLimited(list, LANES, async (hero) => {
    ids.push((await ctx.workflows.start(workflowClass, hero)).id);
  });
  await Promise.all(ids.map((id) => probe.paymentParked.wait(id, TIMEOUT_MS * 5, 'the parked step')));
  const setupSeconds = (performance.now() - setupStarted) / 1000;
  // Let the last commits and job completions settle before the window opens.
  await new Promise((resolve) => setTimeout(resolve, 1_000));

  const postgres = ctx.options.db === 'postgres' ? await PostgresLoad.open(ctx) : undefined;
  const rssBefore = memoryUsage().rss;
  const cpuBefore = cpuUsage();
  const windowStart = performance.now();
  ctx.recorder.recording = [];
  await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
  const statementsWhileIdle = ctx.recorder.recording.length;
  ctx.recorder.recording = null;
  const elapsedMs = performance.now() - windowStart;
  const cpu = cpuUsage(cpuBefore);
  const pg = await postgres?.close(elapsedMs);

  const parked = await ctx.dataSource.getRepository(StepExecution).count({ where: { stepName: 'b', state: 'waiting' } });
  assert(parked >= n, `expected at least ${n} parked executions of ${PAYMENT_WORKFLOW} after the idle window, found ${parked}`);
  return {
    parked: n,
    idleSeconds,
    setupSeconds,
    nodeCpuPercent: round(((cpu.user + cpu.system) / 1000 / elapsedMs) * 100),
    ...(pg ?? {}),
    statementsWhileIdle,
    rssBeforeMiB: round(rssBefore / 2 ** 20),
    rssAfterMiB: round(memoryUsage().rss / 2 ** 20),
  };
}

/** Every workflow finished, its signal consumed once, two completed executions and nothing else. */
async function verify(ctx: BenchContext, ids: string[]): Promise<void> {
  const workflows = await ctx.dataSource.getRepository(WorkflowRecord).count({ where: { id: In(ids), state: 'finished' } });
  const signals: SignalRow[] = await ctx.dataSource.getRepository(Signal).find({ where: { workflowId: In(ids) } });
  const executions = await ctx.dataSource.getRepository(StepExecution).find({ where: { workflowId: In(ids) }, select: { state: true, outcome: true } });
  const consumedOnce = signals.filter((s) => s.state === 'consumed' && s.claimed === 1 && s.consumed === 1).length;
  const completed = executions.filter((e) => e.state === 'completed' && e.outcome === 'success').length;
  assert(
    workflows === ids.length && signals.length === ids.length && consumedOnce === ids.length && executions.length === 2 * ids.length && completed === 2 * ids.length,
    `${PAYMENT_WORKFLOW} check failed for ${ids.length} workflows: ${workflows} finished, ${signals.length} signals (${consumedOnce} consumed once), ${executions.length} executions (${completed} completed/success)`,
  );
}

/** A statement's kind: its verb and table, `FOR UPDATE` marked (BEGIN, COMMIT, SAVEPOINT as they are). */
export function statementKind(sql: string): string {
  const text = sql.replace(/\s+/g, ' ').trim();
  const verb = /^(\w+)/.exec(text)?.[1]?.toUpperCase() ?? '?';
  if (!['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'WITH'].includes(verb)) return text.split(' ').slice(0, 2).join(' ').toUpperCase();
  const table = /(?:FROM|INTO|UPDATE)\s+[`"]?(\w+)[`"]?/i.exec(text)?.[1] ?? '?';
  return `${verb} ${table.replace(/^geneva_drive_/, '')}${/FOR UPDATE/i.test(text) ? ' FOR UPDATE' : ''}`;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

/** Redis MONITOR on a separate connection, counting the commands that touch this run's Bull keys. */
class RedisMonitor {
  private total = 0;
  private readonly byCommand: Record<string, number> = {};

  private constructor(
    private readonly connection: Redis,
    private readonly monitor: Redis,
  ) {}

  static async start(url: string, prefix: string): Promise<RedisMonitor> {
    const connection = new Redis(url, { lazyConnect: true });
    await connection.connect();
    const monitor = await connection.monitor();
    const counter = new RedisMonitor(connection, monitor);
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (!args.some((arg) => arg.includes(prefix))) return;
      counter.total++;
      const command = args[0].toUpperCase();
      counter.byCommand[command] = (counter.byCommand[command] ?? 0) + 1;
    });
    return counter;
  }

  async stop(): Promise<{ total: number; byCommand: Record<string, number> }> {
    // MONITOR lines trail the commands a little: give the last ones time to arrive.
    await new Promise((resolve) => setTimeout(resolve, 300));
    this.monitor.disconnect();
    this.connection.disconnect();
    return { total: this.total, byCommand: this.byCommand };
  }
}

/** CPU of the PostgreSQL backends serving the bench database, and its commit rate, over a window. */
class PostgresLoad {
  private constructor(
    private readonly ctx: BenchContext,
    private readonly pids: number[],
    private readonly ticksBefore: number,
    private readonly commitsBefore: number,
  ) {}

  static async open(ctx: BenchContext): Promise<PostgresLoad> {
    const pids = (await ctx.dataSource.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)).map((row: { pid: number }) => row.pid);
    return new PostgresLoad(ctx, pids, cpuTicks(pids), await commits(ctx));
  }

  async close(elapsedMs: number): Promise<{ postgresCpuPercent: number; xactCommitPerSecond: number }> {
    const ticks = cpuTicks(this.pids) - this.ticksBefore;
    // The reads above and below are two commits of their own.
    const committed = (await commits(this.ctx)) - this.commitsBefore - 1;
    return {
      postgresCpuPercent: round(((ticks * (1000 / CLOCK_TICKS_PER_SECOND)) / elapsedMs) * 100),
      xactCommitPerSecond: round(Math.max(0, committed) / (elapsedMs / 1000)),
    };
  }
}

/** USER_HZ: /proc reports CPU time in these ticks (100 on Linux x86-64 and arm64). */
const CLOCK_TICKS_PER_SECOND = 100;

function cpuTicks(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      total += Number(fields[11]) + Number(fields[12]); // utime, stime
    } catch {
      // The backend exited: its time is lost to the count, which can only understate.
    }
  }
  return total;
}

async function commits(ctx: BenchContext): Promise<number> {
  const [row] = await ctx.dataSource.query(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`);
  return Number(row.xact_commit);
}
