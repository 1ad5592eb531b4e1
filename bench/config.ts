/**
 * Command line, database and queue settings of the benchmark run, and the fresh `gd_bench` database
 * each run starts from.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TypeOrmModuleOptions } from '@nestjs/typeorm';
import { Redis } from 'ioredis';
import { DataSource, type DataSourceOptions } from 'typeorm';
import type { QueueAdapterOptions } from 'geneva-drive';

export type DatabaseKind = 'sqlite' | 'postgres' | 'mysql';
export type QueueKind = 'local' | RedisQueueKind;
export type RedisQueueKind = 'bull' | 'bullmq';
export type Scenario = 'engine' | 'shape' | 'ledger' | 'scale' | 'dashboard' | 'children' | 'keys' | 'dbos';
const SCENARIOS: readonly Scenario[] = ['engine', 'shape', 'ledger', 'scale', 'dashboard', 'children', 'keys', 'dbos'];
/** What runs without --scenarios: all but the peer comparison, which is asked for by name. */
const DEFAULT_SCENARIOS = SCENARIOS.filter((name) => name !== 'dbos');
/** The comparison's setting (PostgreSQL + Bull, one process, concurrency 10): --concurrency's default when dbos runs. */
const COMPARISON_CONCURRENCY = 10;
/** The peer comparison reports the median of per-run ratios: of at least this many runs. */
const PEER_MIN_RUNS = 3;

export interface BenchOptions {
  db: DatabaseKind;
  queue: QueueKind;
  quick: boolean;
  /** Step jobs run at once by this process (the queue adapter's `concurrency`). */
  concurrency: number;
  /** Print the query plans of the statements one signal() issues at the large population, and every statement of one ledger workflow. */
  explain: boolean;
  seed: number;
  /** Timed runs of each shape and scale measurement; the reported figure is their median. */
  runs: number;
  /** Which scenario groups run: the engine's own measurements, the comparison shape, or both. */
  scenarios: ReadonlyArray<Scenario>;
  /** `--profile=DIR`: a CPU profile of each timed throughput run written there. */
  profile?: string;
}

export interface Sizes {
  /** Steps/second: workflows of three no-op steps. */
  throughputWorkflows: number;
  /** Signal-to-step-start latency: signals measured (after `latencyWarmup` unmeasured ones). */
  latencySignals: number;
  latencyWarmup: number;
  /** signal() cost: parked populations compared, and signals measured at each. */
  smallPopulation: number;
  largePopulation: number;
  populationSignals: number;
  populationWarmup: number;
  /** The comparison shape (a → b waiting for a signal): workflows per timed run of each arrival order. */
  shapeWorkflows: number;
  /** Signals sent one at a time, and fired at once, at as many parked workflows. */
  sequentialSignals: number;
  simultaneousSignals: number;
  /** Workflows of each arrival order whose statements and Redis commands are counted. */
  costWorkflows: number;
  /** A real parked population left idle, and for how long. */
  idleParked: number;
  idleSeconds: number;
  /** The dashboard's list page: workflows in the database, and requests timed per page. */
  dashboardWorkflows: number;
  dashboardRequests: number;
  /** Child workflows: the children one parent fans out to, and as many independent workflows beside them. */
  children: number;
  /** Concurrency keys: the workflows handing each of the 10 keys (limit 1) on, per key. */
  slotWorkflowsPerKey: number;
}

export function sizesFor(quick: boolean): Sizes {
  return quick
    ? { throughputWorkflows: 200, latencySignals: 100, latencyWarmup: 10, smallPopulation: 1_000, largePopulation: 10_000, populationSignals: 100, populationWarmup: 10, shapeWorkflows: 200, sequentialSignals: 50, simultaneousSignals: 50, costWorkflows: 50, idleParked: 1_000, idleSeconds: 5, dashboardWorkflows: 10_000, dashboardRequests: 30, children: 200, slotWorkflowsPerKey: 20 }
    : { throughputWorkflows: 2_000, latencySignals: 500, latencyWarmup: 20, smallPopulation: 1_000, largePopulation: 100_000, populationSignals: 200, populationWarmup: 20, shapeWorkflows: 2_000, sequentialSignals: 200, simultaneousSignals: 200, costWorkflows: 100, idleParked: 10_000, idleSeconds: 30, dashboardWorkflows: 100_000, dashboardRequests: 100, children: 1_000, slotWorkflowsPerKey: 50 };
}

const USAGE = `usage: npm run bench -- [--db=sqlite|postgres|mysql] [--queue=local|bull|bullmq] [--quick] [--concurrency=N] [--runs=N] [--explain] [--seed=N] [--scenarios=engine,shape,ledger,scale,dashboard,children,keys,dbos] [--profile=DIR]
  engine: steps/second, signal → step start, signal() against the parked population
  shape:  a → b (waitFor) in both arrival orders, signals one at a time and at once, statements (by kind and phase) and Redis commands per workflow, CPU per workflow, idle cost
  ledger: the shape whose b writes one row, transactional (through this.manager) beside plain (through the DataSource): statements and CPU per workflow
  scale:  the shape with 1 sender process and 2 worker processes (PostgreSQL or MySQL with --queue=bull|bullmq; skipped otherwise)
  dashboard: the operator dashboard's workflow list page over 100k workflows
  children: one parent fanning out to 1,000 children of a → b (200 with --quick) and fanning in, beside as many independent a → b workflows: statements, CPU and time per child
  keys:   the shape with a concurrency key per workflow beside the plain shape (statements per step), and 10 keys of limit 1 handed on by 500 workflows (200 with --quick): the wake from a freed slot to the next body against signal → body
  dbos:   the shape beside DBOS Transact in the same process, runs interleaved, every figure as the ratio geneva-drive / DBOS (PostgreSQL only;
          not among the defaults; --concurrency defaults to 10 with it, --runs must be at least 3)
  --runs=N      timed runs of each shape and scale measurement, median reported (default 3)
  --profile=DIR a CPU profile of each timed throughput run (signal first, signal after; every engine) written to DIR
  GD_PG_URL     default postgres://postgres@127.0.0.1:5432/test   (the bench uses database gd_bench on that server)
  GD_MYSQL_URL  default mysql://root@127.0.0.1:3306/test
  GD_BENCH_DATABASE  default gd_bench: the database (and SQLite file name) the bench drops and recreates; DBOS's is <it>_dbos
  REDIS_URL     default redis://127.0.0.1:6379                     (--queue=bull|bullmq; a unique prefix, removed after)`;

export function parseArgs(argv: string[]): BenchOptions {
  const options: BenchOptions = { db: 'sqlite', queue: 'local', quick: false, concurrency: 4, explain: false, seed: 20_240_601, runs: 3, scenarios: [...DEFAULT_SCENARIOS] };
  let concurrencyGiven = false;
  for (const arg of argv) {
    const [key, value] = arg.split('=', 2);
    switch (key) {
      case '--db':
        if (value !== 'sqlite' && value !== 'postgres' && value !== 'mysql') throw new UsageError(`unknown --db "${value}"`);
        options.db = value;
        break;
      case '--queue':
        if (value !== 'local' && value !== 'bull' && value !== 'bullmq') throw new UsageError(`unknown --queue "${value}"`);
        options.queue = value;
        break;
      case '--quick':
        options.quick = true;
        break;
      case '--explain':
        options.explain = true;
        break;
      case '--concurrency':
        options.concurrency = positiveInteger(key, value);
        concurrencyGiven = true;
        break;
      case '--seed':
        options.seed = positiveInteger(key, value);
        break;
      case '--runs':
        options.runs = positiveInteger(key, value);
        break;
      case '--scenarios': {
        const names = (value ?? '').split(',').filter(Boolean);
        if (names.length === 0 || names.some((name) => !SCENARIOS.includes(name as Scenario))) throw new UsageError(`--scenarios takes a comma list of ${SCENARIOS.join(', ')}, not "${value}"`);
        options.scenarios = names as Scenario[];
        break;
      }
      case '--profile':
        if (!value) throw new UsageError('--profile needs a directory');
        options.profile = value;
        break;
      case '--help':
      case '-h':
        console.log(USAGE);
        process.exit(0);
      default:
        throw new UsageError(`unknown argument "${arg}"`);
    }
  }
  if (options.scenarios.includes('dbos')) {
    if (options.runs < PEER_MIN_RUNS) throw new UsageError(`--scenarios=dbos reports a median of per-run ratios: --runs must be at least ${PEER_MIN_RUNS}`);
    if (!concurrencyGiven) options.concurrency = COMPARISON_CONCURRENCY;
  }
  return options;
}

function positiveInteger(key: string, value: string | undefined): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed <= 0) throw new UsageError(`${key} needs a positive integer`);
  return parsed;
}

export class UsageError extends Error {
  constructor(message: string) {
    super(`${message}\n${USAGE}`);
  }
}

/** The repository root (this file runs from bench/dist/). */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** Its own name keeps two benches on one server (or checkout) from dropping each other's database. */
export const BENCH_DATABASE = benchDatabaseName(process.env.GD_BENCH_DATABASE ?? 'gd_bench');
export const SQLITE_FILE = `${PROJECT_ROOT}.tmp/${BENCH_DATABASE}.sqlite`;
/** DBOS Transact's system database, beside the bench database on the same PostgreSQL server. */
export const DBOS_DATABASE = benchDatabaseName(`${BENCH_DATABASE}_dbos`);

function benchDatabaseName(name: string): string {
  // Interpolated into DROP/CREATE DATABASE: a plain identifier only.
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new UsageError(`GD_BENCH_DATABASE must be a lower-case identifier, not "${name}"`);
  return name;
}

export function serverUrl(kind: 'postgres' | 'mysql', database?: string): string {
  const raw = kind === 'postgres' ? (process.env.GD_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test') : (process.env.GD_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test');
  const url = new URL(raw);
  if (database) url.pathname = `/${database}`;
  return url.toString();
}

export function redisUrl(): string {
  return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}

/** Where the databases say where they are, for the report (no credentials). */
export function describeDatabase(kind: DatabaseKind): string {
  if (kind === 'sqlite') return `SQLite (better-sqlite3, WAL) ${SQLITE_FILE.slice(PROJECT_ROOT.length)}`;
  const url = new URL(serverUrl(kind, BENCH_DATABASE));
  return `${kind === 'postgres' ? 'PostgreSQL' : 'MySQL/MariaDB'} ${url.host}${url.pathname}`;
}

/** TypeORM options of the bench database (entities and migrations are added by the module). */
export function databaseOptions(kind: DatabaseKind): TypeOrmModuleOptions {
  if (kind === 'sqlite') return { type: 'better-sqlite3', database: SQLITE_FILE, enableWAL: true, timeout: 10_000 };
  if (kind === 'postgres') return { type: 'postgres', url: serverUrl('postgres', BENCH_DATABASE) };
  // mysql2 writes DATETIME values in UTC, as the engine expects.
  return { type: 'mysql', url: serverUrl('mysql', BENCH_DATABASE), timezone: 'Z', charset: 'utf8mb4' };
}

/** Drops and recreates `gd_bench` (the SQLite file), or database `name` of the server: every run starts empty and is migrated at boot. */
export async function recreateDatabase(kind: DatabaseKind, name = BENCH_DATABASE): Promise<void> {
  if (kind === 'sqlite') {
    mkdirSync(`${PROJECT_ROOT}.tmp`, { recursive: true });
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${SQLITE_FILE}${suffix}`, { force: true });
    return;
  }
  // Through the URL's own database (`test` by default): one cannot drop the database one is connected to.
  const admin: DataSourceOptions = kind === 'postgres' ? { type: 'postgres', url: serverUrl('postgres') } : { type: 'mysql', url: serverUrl('mysql') };
  const dataSource = await new DataSource(admin).initialize();
  try {
    if (kind === 'postgres') {
      await dataSource.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dataSource.query(`CREATE DATABASE ${name}`);
    } else {
      await dataSource.query(`DROP DATABASE IF EXISTS ${name}`);
      await dataSource.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
    }
  } finally {
    await dataSource.destroy();
  }
}

/** A Redis queue (Bull or BullMQ) on a unique prefix per run, so a bench never touches another run's (or an app's) keys. */
export function redisQueue(
  adapter: RedisQueueKind,
  concurrency: number,
  prefix = `gd_bench_${process.pid}_${Date.now().toString(36)}`,
): { adapter: RedisQueueKind; options: QueueAdapterOptions; prefix: string } {
  return { adapter, options: { adapter, redis: redisUrl(), name: 'geneva-drive-bench', prefix, concurrency }, prefix };
}

/** Removes every key of a run's prefix (Bull's and BullMQ's keys alike start with it). */
export async function removeKeys(prefix: string): Promise<void> {
  const redis = new Redis(redisUrl());
  try {
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 1000 })) if ((keys as string[]).length) await redis.del(...(keys as string[]));
  } finally {
    redis.disconnect();
  }
}
