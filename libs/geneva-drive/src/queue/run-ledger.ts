import type { LoggerService } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { StepJob } from '../interfaces/queue.port.js';

/** What the ledger needs of a Redis client: Bull's ioredis and BullMQ's client both offer it (see ledgerRedisOf*). */
export interface LedgerRedis {
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  /** Runs a command defined with defineCommand. */
  run(name: string, args: Array<string | number>): Promise<unknown>;
  hset(key: string, data: Record<string, string>): Promise<unknown>;
  hdel(key: string, ...fields: string[]): Promise<unknown>;
}

/** Where a ledger keeps its keys and how long a lease lasts. */
export interface RunLedgerSettings {
  /** The queue's key prefix, e.g. `bull:geneva-drive:`. */
  keyPrefix: string;
  /** A process whose lease has not been renewed for this long is dead: the queue's `lockDuration`, as for a job's lock. */
  leaseMs: number;
}

// Redis's clock, not the processes': hosts whose clocks disagree still agree on who expired.
const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/**
 * KEYS: leases. ARGV: token, leaseMs. Renews this process's lease; returns whether it was missing
 * (1/0), how many leases are live (this one included), then the expired tokens.
 */
const RENEW = `${NOW}
local added = redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local live = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 10)
table.insert(expired, 1, live)
table.insert(expired, 1, added)
return expired`;

/**
 * KEYS: leases, the dead process's runs, this process's runs. ARGV: the dead token. Takes the runs of
 * a process whose lease is still expired into this process's ledger, atomically (one claimer), and
 * returns them (field, value, ...); false when another process claimed them first or it came back.
 */
const CLAIM = `${NOW}
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) > now then return false end
redis.call('ZREM', KEYS[1], ARGV[1])
local runs = redis.call('HGETALL', KEYS[2])
if #runs > 0 then
  redis.call('HSET', KEYS[3], unpack(runs))
  redis.call('DEL', KEYS[2])
end
return runs`;

/** KEYS: leases, this process's runs. ARGV: token. A clean stop: nothing left to take over. */
const RELEASE = `redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('DEL', KEYS[2]) return 1`;

/**
 * How long the runs that ended wait to be dropped from Redis together, by one HDEL: a process killed
 * meanwhile leaves them to be taken over, and a takeover of a run that ended finds nothing to do.
 */
export const ENDED_DROP_MS = 25;

/** What a ledger entry keeps of a job: enough to put it back on the queue. */
type LedgerEntry = Pick<StepJob, 'executionId' | 'hints' | 'jobOptions' | 'jobId'>;

/**
 * The Redis record of the runs this process started itself (DueJobStarter) — jobs that Redis never
 * held, so that no lock of Bull's or BullMQ's covers them — under a lease the process renews as Bull
 * renews a job's lock. A run is written when it is taken (one HSET) and dropped soon after it ends
 * (one HDEL for the runs that ended within {@link ENDED_DROP_MS}); the lease costs one script per
 * half lease, whatever the load. Each renewal also reads the leases that expired: a live process
 * claims the runs of a dead one (atomically, one claimer) into its own ledger, puts each back on the
 * queue as a takeover job (StepJobGate.run `takeover`), and drops it once added, so that it outlives
 * a claimer that dies in turn. A process that stops cleanly waits for its runs and releases its
 * lease. Redis lost (a restart without persistence): the renewal that finds its lease missing writes
 * the process's runs again.
 */
export class RunLedger {
  readonly token = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  /** Runs of this process, by engine job id (a count: the same job can be taken twice). */
  private readonly runs = new Map<string, { entry: LedgerEntry; count: number }>();
  /** Runs claimed from dead processes and not yet back on the queue. */
  private readonly claimed = new Map<string, LedgerEntry>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private takeOver: ((job: StepJob) => Promise<unknown>) | undefined;
  private alone = false;
  private shared: (() => void) | undefined;
  /** Runs that ended, not yet dropped from Redis, and the timer that drops them. */
  private readonly ended = new Set<string>();
  private dropTimer: NodeJS.Timeout | undefined;
  /** The last write sent: Redis answers one connection's commands in order, so once it settles every write before it has. */
  private lastWrite: Promise<void> = Promise.resolve();

  constructor(
    private readonly redis: () => Promise<LedgerRedis>,
    private readonly settings: () => RunLedgerSettings,
    private readonly logger: LoggerService,
  ) {}

  private get leases(): string {
    return `${this.settings().keyPrefix}gd-leases`;
  }

  private runsKey(token: string): string {
    return `${this.settings().keyPrefix}gd-runs:${token}`;
  }

  /** Takes the lease and keeps it; `takeOver` puts a dead process's run back on the queue. */
  async start(takeOver: (job: StepJob) => Promise<unknown>): Promise<void> {
    this.takeOver = takeOver;
    const redis = await this.redis();
    redis.defineCommand('genevaDriveRenewLease', { numberOfKeys: 1, lua: RENEW });
    redis.defineCommand('genevaDriveClaimRuns', { numberOfKeys: 3, lua: CLAIM });
    redis.defineCommand('genevaDriveReleaseLease', { numberOfKeys: 2, lua: RELEASE });
    const every = Math.max(50, Math.floor(this.settings().leaseMs / 2));
    this.timer = setInterval(() => void this.tick(), every);
    this.timer.unref();
    await this.tick();
  }

  /**
   * Whether the last renewal found no other live lease: no other process starts jobs itself on this
   * queue (one with `chainSteps: false` or concurrency 0 holds none). False until the first renewal.
   */
  get isAlone(): boolean {
    return this.alone;
  }

  /** `listener` runs when a renewal finds another live lease after finding none. */
  onShared(listener: () => void): void {
    this.shared = listener;
  }

  /** Records a run taken by this process. Not awaited: the HSET is on the wire before the run's first statement. */
  begin(job: StepJob): void {
    const id = engineJobId(job);
    const held = this.runs.get(id);
    if (held) return void held.count++;
    const entry: LedgerEntry = { executionId: job.executionId, hints: job.hints, jobOptions: job.jobOptions, ...(job.jobId ? { jobId: job.jobId } : {}) };
    this.runs.set(id, { entry, count: 1 });
    this.write(id, entry);
  }

  /** The run ended (or went to Redis): nothing to take over any more. */
  end(job: StepJob): void {
    const id = engineJobId(job);
    const held = this.runs.get(id);
    if (!held || --held.count > 0) return;
    this.runs.delete(id);
    this.ended.add(id);
    if (this.dropTimer) return;
    this.dropTimer = setTimeout(() => this.dropEnded(), ENDED_DROP_MS);
    this.dropTimer.unref();
  }

  /**
   * Drops the runs that ended from Redis, but one taken again meanwhile, or claimed from a dead
   * process and not back on the queue yet: its record is the same field, and keeps that run.
   */
  private dropEnded(): void {
    this.dropTimer = undefined;
    const ids = [...this.ended].filter((id) => !this.runs.has(id) && !this.claimed.has(id));
    this.ended.clear();
    if (ids.length === 0) return;
    void this.redis()
      .then((redis) => redis.hdel(this.runsKey(this.token), ...ids))
      .catch((error) => this.logger.warn(`Run ledger: could not drop ${ids.length} ended job(s) (${String(error)})`));
  }

  /** Stops renewing and releases the lease (call once the runs have ended). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.dropTimer);
    this.dropTimer = undefined;
    await this.ticking;
    // Releasing the lease deletes every record, ended or not; without one, the ended runs are dropped.
    if (!this.takeOver) return this.dropEnded();
    this.ended.clear();
    this.takeOver = undefined;
    try {
      await (await this.redis()).run('genevaDriveReleaseLease', [this.leases, this.runsKey(this.token), this.token]);
    } catch (error) {
      this.logger.warn(`Run ledger: could not release the lease of ${this.token} (${String(error)}); it expires`);
    }
  }

  /** Settles once the runs recorded so far are in Redis (or, as logged, could not be written). */
  written(): Promise<void> {
    return this.lastWrite;
  }

  private write(id: string, entry: LedgerEntry): void {
    this.lastWrite = this.redis()
      .then((redis) => redis.hset(this.runsKey(this.token), { [id]: JSON.stringify(entry) }))
      .then(
        () => undefined,
        (error: unknown) => this.logger.warn(`Run ledger: could not record job ${id} (${String(error)}); housekeeping covers it should this process die`),
      );
  }

  private tick(): Promise<void> {
    this.ticking ??= this.renew().finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async renew(): Promise<void> {
    try {
      const redis = await this.redis();
      const [added, live, ...expired] = (await redis.run('genevaDriveRenewLease', [this.leases, this.token, this.settings().leaseMs])) as [number, number, ...string[]];
      const wasAlone = this.alone;
      this.alone = Number(live) <= 1;
      if (wasAlone && !this.alone) this.shared?.();
      // A lease that was missing (Redis lost its data): the runs it covers are written again.
      if (added === 1) for (const [id, { entry }] of this.runs) this.write(id, entry);
      for (const dead of expired) {
        if (dead === this.token || !this.takeOver) continue;
        const runs = (await redis.run('genevaDriveClaimRuns', [this.leases, this.runsKey(dead), this.runsKey(this.token), dead])) as string[] | null;
        for (let i = 0; runs && i < runs.length; i += 2) this.claimed.set(runs[i], JSON.parse(runs[i + 1]) as LedgerEntry);
        if (runs?.length) this.logger.warn(`Run ledger: process ${dead} stopped renewing its lease; its ${runs.length / 2} run(s) go back to the queue`);
      }
      await this.putBack(redis);
    } catch (error) {
      this.logger.warn(`Run ledger: lease renewal failed (${String(error)})`);
    }
  }

  /** Puts the claimed runs on the queue, and drops each from this ledger once it is there. */
  private async putBack(redis: LedgerRedis): Promise<void> {
    for (const [id, entry] of [...this.claimed]) {
      if (!this.takeOver) return;
      await this.takeOver({ ...entry, runAt: new Date() });
      this.claimed.delete(id);
      // Unless this process took the same job meanwhile: that run keeps its record.
      if (!this.runs.has(id)) await redis.hdel(this.runsKey(this.token), id);
    }
  }
}

function engineJobId(job: StepJob): string {
  return job.jobId ?? job.executionId;
}
