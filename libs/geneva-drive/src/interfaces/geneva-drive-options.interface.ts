import type { LoggerService } from '@nestjs/common';
import type { QueuePort } from './queue.port.js';
import type { Duration } from '../util/duration.js';

/**
 * ioredis connection options (`host`, `port`, `password`, `db`, `tls`, ...). Declared here rather than
 * imported from `bull` so that applications without the optional `bull` dependency still type-check.
 * @publicApi
 */
export interface RedisConnectionOptions {
  host?: string;
  port?: number;
  username?: string;
  password?: string;
  db?: number;
  tls?: object;
  [option: string]: unknown;
}

/**
 * Bull on Redis: production, several processes and hosts. The queue is registered through
 * `@nestjs/bull` (`BullModule.registerQueue`), so the application's `BullModule.forRoot` settings
 * apply and `@InjectQueue(name)` gives the application this queue. Options given here win over
 * `BullModule.forRoot`'s; the engine's own per-job options (job id, delay, one attempt, removal once
 * done) win over `defaultJobOptions`.
 * @publicApi
 */
export interface BullQueueAdapterOptions {
  adapter: 'bull';
  /** Redis connection: a URL, or ioredis options handed to Bull as they are. @default `BullModule.forRoot`'s, else localhost */
  redis?: string | RedisConnectionOptions;
  /** Queue name, and the name of its `@InjectQueue` token. Give every application sharing a Redis its own. @default 'geneva-drive' */
  name?: string;
  /** Redis key prefix. @default `BullModule.forRoot`'s, else 'bull' */
  prefix?: string;
  /** Step jobs processed at once by this process; 0 makes the process enqueue-only. @default 1 */
  concurrency?: number;
  /** Which `BullModule.forRoot(configKey, ...)` configuration to use. @default the unnamed one */
  configKey?: string;
  /** Bull's rate limiter (`{ max, duration }`), as Bull takes it. */
  limiter?: { max: number; duration: number; bounceBack?: boolean; groupKey?: string };
  /** Bull's advanced settings (`lockDuration`, `stalledInterval`, ...), as Bull takes them. */
  settings?: Record<string, unknown>;
  /** Bull's default job options, as Bull takes them. */
  defaultJobOptions?: Record<string, unknown>;
  /** Bull's `createClient(type, redisOptions)`, to share ioredis connections. */
  createClient?: (type: 'client' | 'subscriber' | 'bclient', redisOptions?: object) => unknown;
}

/**
 * BullMQ on Redis, registered through `@nestjs/bullmq` (`BullModule.registerQueue`) the same way as
 * `bull`: the application's `BullModule.forRoot` settings apply and `@InjectQueue(name)` gives the
 * application this queue. Options given here win over `BullModule.forRoot`'s; the engine's own
 * per-job options win over `defaultJobOptions`. BullMQ refuses integer job ids, so a step job's id in
 * Redis is the engine's job id (the execution id, or a wake-up's id) behind `step-`.
 * @publicApi
 */
export interface BullMqQueueAdapterOptions {
  adapter: 'bullmq';
  /** Redis connection: a URL, or ioredis options handed to BullMQ as its `connection`. @default `BullModule.forRoot`'s, else localhost */
  redis?: string | RedisConnectionOptions;
  /** Queue name, and the name of its `@InjectQueue` token. Give every application sharing a Redis its own. @default 'geneva-drive' */
  name?: string;
  /** Redis key prefix. @default `BullModule.forRoot`'s, else 'bull' */
  prefix?: string;
  /** Step jobs processed at once by this process; 0 makes the process enqueue-only. @default 1 */
  concurrency?: number;
  /** Which `BullModule.forRoot(configKey, ...)` configuration to use. @default the unnamed one */
  configKey?: string;
  /** BullMQ's default job options, as BullMQ takes them. */
  defaultJobOptions?: Record<string, unknown>;
  /** Options of the engine's BullMQ `Worker` (`limiter`, `lockDuration`, `stalledInterval`, ...), as BullMQ takes them. */
  worker?: Record<string, unknown>;
}

/** In-process timers that rebuild themselves from the database at boot. @publicApi */
export interface LocalQueueAdapterOptions {
  adapter: 'local';
  /** Step jobs run at once. @default 1 */
  concurrency?: number;
}

/** Records jobs and never runs them: for tests driven by the `geneva-drive/testing` helpers. @publicApi */
export interface ManualQueueAdapterOptions {
  adapter: 'manual';
}

/** Any object implementing {@link QueuePort}: the engine hands it every step job. @publicApi */
export interface CustomQueueAdapterOptions {
  adapter: QueuePort;
}

export type QueueAdapterOptions = BullQueueAdapterOptions | BullMqQueueAdapterOptions | LocalQueueAdapterOptions | ManualQueueAdapterOptions | CustomQueueAdapterOptions;

/** Options of `GenevaDriveModule.forRoot`. Every option is optional. @publicApi */
export interface GenevaDriveModuleOptions {
  /**
   * Where step jobs run. With `forRootAsync`, a `bull` or `bullmq` queue is declared beside
   * `useFactory` (it is registered with `@nestjs/bull` or `@nestjs/bullmq` when the module is declared). @default { adapter: 'local' }
   */
  queue?: QueueAdapterOptions;
  /** Name of the TypeORM DataSource (as given to `TypeOrmModule.forRoot({ name })`). @default the default DataSource */
  dataSource?: string;
  /** Enqueue jobs only after the outermost transaction commits. @default true */
  enqueueAfterCommit?: boolean;
  /** Largest encoded signal payload in bytes; `null` disables the check. @default 131072 */
  maxSignalPayloadSize?: number | null;
  /** Largest encoded resumable-step cursor in bytes. @default 131072 */
  maxCursorSize?: number;
  /** A parked execution older than this counts toward the `waiting_overdue` gauge; `null` turns that gauge off. @default '7d' */
  waitingVisibilityThreshold?: Duration | null;
  /** Finished/canceled workflows older than this are deleted by housekeeping; `null` disables. @default '30d' */
  deleteCompletedWorkflowsAfter?: Duration | null;
  /** An `in_progress` execution started longer ago than this is stuck. @default '1h' */
  stuckInProgressThreshold?: Duration;
  /** A `scheduled` execution overdue by more than this is stuck. @default '15m' */
  stuckScheduledThreshold?: Duration;
  /** What housekeeping does with a stuck execution. @default 'reattempt' */
  stuckRecoveryAction?: 'reattempt' | 'cancel';
  /**
   * With `stuckRecoveryAction: 'reattempt'`: how many times in a row housekeeping runs a step again
   * after its worker died mid-step; the next time it is found stuck, the workflow is paused with a
   * `StepRecoveryLimitError` recorded on the execution. A non-negative integer, `null` = unlimited;
   * `@Step({ maxRecoveries })` overrides it per step. @default 3
   */
  maxRecoveries?: number | null;
  /** Rows per housekeeping batch. @default 1000 */
  housekeepingBatchSize?: number;
  /** Run housekeeping periodically; `false` turns it off. @default { every: '30m' } */
  housekeeping?: { every: Duration } | false;
  /**
   * A step due the moment the one before it finishes runs in the same worker, its start committed
   * with the previous step's outcome: no queue hop and no second lock. A chain hands back to the
   * queue after `maxSteps` steps or once `maxDuration` has passed since it began, so one workflow
   * cannot hold a worker; a worker that dies mid-chain leaves the rows housekeeping recovers as
   * always. On Bull and BullMQ, a job due now that a worker process enqueues also starts there,
   * when a slot is free or frees within `maxDuration`, instead of going through Redis. `false`, or
   * `jobOptions: { chain: false }` on a step or workflow, sends every step through the queue.
   * @default { maxSteps: 10, maxDuration: '100ms' }
   */
  chainSteps?: { maxSteps?: number; maxDuration?: Duration } | false;
  /**
   * PostgreSQL and MySQL/MariaDB: run the executor's and `signal()`'s statements as prepared
   * statements, each parsed and planned once per connection. Turn off behind a connection pooler in
   * transaction mode that does not keep them (PgBouncer before 1.21, or with
   * `max_prepared_statements = 0`). SQLite ignores it. @default true
   */
  preparedStatements?: boolean;
  /** Replaces Nest's `Logger` for every line the engine writes. */
  logger?: LoggerService;
}

/** Options after defaults are applied and durations converted to milliseconds. */
export interface ResolvedGenevaDriveOptions {
  queue: QueueAdapterOptions;
  dataSource?: string;
  enqueueAfterCommit: boolean;
  maxSignalPayloadSize: number | null;
  maxCursorSize: number;
  waitingVisibilityThresholdMs: number | null;
  deleteCompletedWorkflowsAfterMs: number | null;
  stuckInProgressThresholdMs: number;
  stuckScheduledThresholdMs: number;
  stuckRecoveryAction: 'reattempt' | 'cancel';
  maxRecoveries: number | null;
  housekeepingBatchSize: number;
  housekeepingEveryMs: number | null;
  /** `maxSteps: 0` turns chaining off. */
  chainSteps: { maxSteps: number; maxDurationMs: number };
  preparedStatements: boolean;
  logger?: LoggerService;
}
