/**
 * What the fault proofs share: the size knob, the child processes (proof-process.ts in its worker
 * and sender roles), a sampler that watches for two active executions of one workflow while a proof
 * runs, a housekeeping loop, and the invariants read back from the database at the end.
 */
import { afterAll, beforeAll, describe } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { DataSource } from 'typeorm';
import { HousekeepingService, QUEUE_PORT, Signal, StepExecution, WorkflowRecord, type Duration, type HousekeepingSummary } from 'geneva-drive';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../../src/child-process.js';
import { sleep, waitUntil } from '../../src/bull-wait.js';
import { REDIS_QUEUE_DRIVERS, type QueueView, type RedisAdapter, type RedisQueueDriver } from '../../src/redis-queues.js';
import { createTestApp, informationLine, type TestApp } from '../../src/test-app.js';
import { describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../../utils/databases.js';
import type { CallReport, ProofChildMessage, ProofParentMessage } from './proof-process.js';
import { CREATE_SIDE_EFFECTS_TABLE, goKey, PROOF_WORKFLOWS, readSideEffects } from './proof-workflows.js';
import { OwnRedis } from './redis-server.js';

/** `GD_PROOF_SCALE=full` runs the long proofs (npm run test:proofs); anything else the short run of npm test. */
export const FULL_SCALE = process.env.GD_PROOF_SCALE === 'full';

/** A proof's figures: printed by the full run, like the other measured figures only with GD_TEST_LOGS=1 in the short one. */
export function proofFigures(message: string): void {
  if (FULL_SCALE) console.info(message);
  else informationLine(message);
}

/** Picks the short or the full value of a size. */
export const scaled = <T>(short: T, full: T): T => (FULL_SCALE ? full : short);

export const QUEUE_NAME = 'geneva-drive-proofs';
/** Generous: on a machine busy with other test runs a Nest application takes long to boot. */
const BOOT_TIMEOUT_MS = 90_000;

type Of<T extends ProofChildMessage['type']> = Extract<ProofChildMessage, { type: T }>;

/** A forked proof process (worker or sender) and what it has told us. */
export class ProofChild extends ChildHandle<ProofChildMessage, ProofParentMessage> {
  constructor(
    child: ChildProcess,
    registry: Set<ChildProcess>,
    readonly role: 'worker' | 'sender',
  ) {
    super(child, registry);
  }

  /** Holds asked of this worker so far (holdBodyUntil). */
  private holds = 0;

  of<T extends ProofChildMessage['type']>(type: T): Of<T>[] {
    return (this.messages as ProofChildMessage[]).filter((m): m is Of<T> => m.type === type);
  }

  /** The executions of the jobs this worker has taken from Redis and not reported done. */
  activeJobExecutions(): string[] {
    const active = new Map<string, string>();
    for (const job of this.of('job')) {
      if (job.event === 'active') active.set(job.jobId, job.executionId);
      else active.delete(job.jobId);
    }
    return [...active.values()];
  }

  /** The executions whose step body runs in this worker now, whether a Redis job, a chain or an in-process start runs it. */
  bodiesInFlight(): string[] {
    return this.bodiesSince((body) => body.event === 'start');
  }

  /**
   * Holds the bodies this worker starts until one that `wanted` accepts waits, letting the others go
   * at once: that body's execution, or undefined when none came within `withinMs` (no work left for
   * one). Only this hold's reports count: a body an earlier hold let go may not have ended yet. The
   * caller releases the worker's bodies (`release-bodies`) once its fault is done.
   */
  async holdBodyUntil(wanted: (body: Of<'body'>) => boolean, withinMs: number): Promise<string | undefined> {
    const hold = ++this.holds;
    this.send({ type: 'hold-bodies', hold });
    const released = new Set<string>();
    const deadline = Date.now() + withinMs;
    while (Date.now() < deadline && this.child.exitCode === null) {
      const held = this.of('body').filter((body) => body.event === 'held' && body.hold === hold && !released.has(body.executionId));
      const found = held.find(wanted);
      if (found) return found.executionId;
      if (held.length > 0) this.send({ type: 'release-bodies', executionIds: held.map((body) => body.executionId) });
      for (const body of held) released.add(body.executionId);
      await sleep(5);
    }
    return undefined;
  }

  /** The executions with a body report that `since` picks and no end reported after it. */
  private bodiesSince(since: (body: Of<'body'>) => boolean): string[] {
    const running = new Set<string>();
    for (const body of this.of('body')) {
      if (since(body)) running.add(body.executionId);
      else if (body.event === 'end') running.delete(body.executionId);
    }
    return [...running];
  }

  /**
   * The executions whose transactional body this worker began more than once: the transaction of
   * the first run was lost before it committed (a deadlock, its connection killed) and the whole
   * transaction ran again, body included.
   */
  transactionalBodiesRunAgain(): string[] {
    const starts = new Map<string, number>();
    for (const body of this.of('body')) if (body.event === 'start' && body.transactional) starts.set(body.executionId, (starts.get(body.executionId) ?? 0) + 1);
    return [...starts].filter(([, n]) => n > 1).map(([id]) => id);
  }

  /** What a SIGKILL now interrupts: the executions of the worker's Redis jobs and those whose body runs. */
  activeExecutions(): string[] {
    return [...new Set([...this.activeJobExecutions(), ...this.bodiesInFlight()])];
  }

  waitFor<T extends ProofChildMessage['type']>(what: string, type: T, timeoutMs = 15_000): Promise<Of<T>> {
    return waitUntil(
      `${what} from ${this.role} ${this.pid}`,
      () => {
        this.assertAlive(this.role);
        return this.of(type)[0] ?? null;
      },
      { timeoutMs, intervalMs: 20 },
    );
  }

  /** Every call attempt the sender reported. */
  calls(): CallReport[] {
    return this.of('call').map((m) => m.call);
  }

  override stop(): Promise<void> {
    return super.stop({ type: 'shutdown' });
  }
}

/** Where the child processes connect. */
export interface ProofTarget {
  kind: DatabaseKind;
  /** The Redis queue adapter every process of the proof uses. */
  adapter: RedisAdapter;
  redis: string;
  prefix: string;
}

/**
 * Registers the build of the child entry for this spec file (once, in a beforeAll) and one describe
 * per server database (PostgreSQL, MariaDB: the proofs are about several hosts on one database, which
 * SQLite is not). `suite` gets the compiled entry and the registry of live children.
 */
export function describeProof(title: string, suite: (kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>) => void, needsSharedRedis = true): void {
  const children = new Set<ChildProcess>();
  const buildDir = path.join(ROOT, '.tmp', `proof-build-${process.pid}`);
  let entry = '';
  const body = () =>
    describeEachDatabase(title, (kind) => {
      if (kind === 'sqlite') return describe.skip('one database file on one host: not what this proof is about', () => undefined);
      suite(kind, () => entry, children);
    });
  if (needsSharedRedis && !redisAvailable()) {
    console.warn(`${title}: Redis not reachable — proof skipped (set GENEVA_DRIVE_TEST_REQUIRE=redis to make this a failure)`);
    describe.skip(`${title} (skipped: Redis not reachable)`, body);
    return;
  }
  beforeAll(async () => {
    entry = await compileChildEntry('test/proofs/tsconfig.proof-process.json', buildDir, 'test/proofs/src/proof-process.js');
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL'); // only if a suite's afterAll could not stop it
    await rm(buildDir, { recursive: true, force: true });
  });
  body();
}

export async function spawnProofChild(
  entry: string,
  role: 'worker' | 'sender',
  target: ProofTarget,
  children: Set<ChildProcess>,
  concurrency = 3,
  options: { chainSteps?: boolean; env?: Record<string, string> } = {},
): Promise<ProofChild> {
  const child = forkCompiled(entry, {
    ...options.env,
    GD_PROOF_CHAIN: options.chainSteps === false ? '0' : '1',
    GD_PROOF_ROLE: role,
    GD_PROOF_DB: target.kind,
    GD_PROOF_ADAPTER: target.adapter,
    GD_PROOF_REDIS: target.redis,
    GD_PROOF_PREFIX: target.prefix,
    GD_PROOF_QUEUE: QUEUE_NAME,
    GD_PROOF_CONCURRENCY: String(concurrency),
  });
  const handle = new ProofChild(child, children, role);
  await handle.waitFor('ready', 'ready', BOOT_TIMEOUT_MS);
  return handle;
}

/** One proof's setup: the application of this process, the children it forked, the loops it runs. */
export interface ProofSuite {
  readonly app: TestApp;
  readonly target: ProofTarget;
  /** The suite's own redis-server, with `ownRedis`. */
  readonly ownRedis: OwnRedis | undefined;
  /** Every child forked so far (killed ones included). */
  readonly everyone: ProofChild[];
  spawn(role: 'worker' | 'sender'): Promise<ProofChild>;
  /** The queue as this process's (enqueue-only) application sees it. */
  queue(): QueueView;
  /** Starts the active-executions sampler and the housekeeping loop (stopped by afterAll too). */
  watch(): { sampler: ReturnType<typeof sampleActiveExecutions>; housekeeping: ReturnType<typeof housekeepingLoop> };
}

/**
 * Registers the beforeAll/afterAll of a proof on `kind`: its Redis (the shared one under a fresh
 * prefix, or with `ownRedis` a redis-server of its own), this process's application — enqueue-only
 * (it runs housekeeping with thresholds of 2 s and reads the database; the workers run the steps) —
 * and the side effects table. afterAll stops the loops and the children and cleans up.
 */
/**
 * `chainSteps: false`: every step of the children goes through the queue. `maxRecoveries`:
 * the recovery limit of housekeeping and of the workers' takeovers (the default pauses a step
 * recovered three times in a row).
 * `stuckThreshold`: housekeeping's stuck thresholds (2 s unless given); `stuckScheduledThreshold`
 * the scheduled one alone. `workerConcurrency`: the jobs a worker runs at once (3 unless given).
 * `childEnv`: more environment for the children.
 */
export function proofSuite(
  kind: DatabaseKind,
  entry: () => string,
  children: Set<ChildProcess>,
  name: string,
  options: {
    ownRedis?: boolean;
    adapter?: RedisAdapter;
    chainSteps?: boolean;
    maxRecoveries?: number | null;
    stuckThreshold?: Duration;
    stuckScheduledThreshold?: Duration;
    workerConcurrency?: number;
    childEnv?: Record<string, string>;
  } = {},
): ProofSuite {
  const driver = REDIS_QUEUE_DRIVERS[options.adapter ?? 'bull'];
  let app: TestApp;
  let target: ProofTarget;
  let admin: ReturnType<RedisQueueDriver['handle']> | undefined;
  let redis: OwnRedis | undefined;
  const everyone: ProofChild[] = [];
  const loops: Array<{ stop(): Promise<unknown> }> = [];
  // The workers take dead workers' runs over (and recover them) themselves: the same limit there.
  const childEnv = {
    ...(options.maxRecoveries === undefined ? {} : { GD_PROOF_MAX_RECOVERIES: options.maxRecoveries === null ? 'none' : String(options.maxRecoveries) }),
    ...options.childEnv,
  };

  beforeAll(async () => {
    redis = options.ownRedis ? await OwnRedis.start() : undefined;
    target = { kind, adapter: driver.adapter, redis: redis?.url ?? redisUrl(), prefix: `gd-proof-${name}-${driver.adapter}-${process.pid}-${Date.now()}-${kind}` };
    if (!redis) {
      admin = driver.handle(QUEUE_NAME, target.prefix);
      await admin.obliterate();
    }
    app = await createTestApp(kind, PROOF_WORKFLOWS, {
      queue: driver.options({ redis: target.redis, prefix: target.prefix, name: QUEUE_NAME, concurrency: 0 }),
      stuckInProgressThreshold: options.stuckThreshold ?? '2s',
      stuckScheduledThreshold: options.stuckScheduledThreshold ?? options.stuckThreshold ?? '2s',
      ...(options.maxRecoveries === undefined ? {} : { maxRecoveries: options.maxRecoveries }),
    });
    await app.dataSource.query(CREATE_SIDE_EFFECTS_TABLE);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(loops.map((loop) => loop.stop()));
    await Promise.all(everyone.map((c) => c.stop()));
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
    await redis?.kill();
  });

  return {
    get app() {
      return app;
    },
    get target() {
      return target;
    },
    get ownRedis() {
      return redis;
    },
    everyone,
    queue: () => driver.view(app.moduleRef.get(QUEUE_PORT)),
    spawn: (role) =>
      spawnProofChild(entry(), role, target, children, role === 'worker' ? options.workerConcurrency : undefined, { chainSteps: options.chainSteps, env: childEnv }).then(
        (child) => (everyone.push(child), child),
      ),
    watch: () => {
      const watched = { sampler: sampleActiveExecutions(app.dataSource), housekeeping: housekeepingLoop(app.moduleRef.get(HousekeepingService)) };
      loops.push(watched.sampler, watched.housekeeping);
      return watched;
    },
  };
}

/** A SIGKILL of a worker: its pid, when, and the executions whose body ran in it. */
export interface Kill {
  pid: number;
  at: number;
  bodies: string[];
}

/** How long a fault waits for the body it holds to start (ProofChild.holdBodyUntil). */
export const HELD_BODY_WITHIN_MS = 2_000;

/**
 * The chaos of the proofs that kill workers in step bodies: after a random pause in `gapMs` (and, with
 * `awaitBodyMs`, up to that long more until some worker runs a body: short bodies are rarely caught by
 * one look), SIGKILLs a worker (at random) among those with a body running and starts its
 * replacement, two booting at once at most, for as long as `more` says — given the kills so far and
 * how long since a worker last reported a body starting. Each kill first holds the next body the
 * victim starts (up to HELD_BODY_WITHIN_MS), so that it lands in one. Returns the kills and the
 * workers alive (replacements booted).
 */
export async function killWorkersInBodies(
  suite: ProofSuite,
  sender: ProofChild,
  firstWorkers: ProofChild[],
  gapMs: readonly [number, number],
  more: (kills: readonly Kill[], idleMs: number) => boolean,
  options: { awaitBodyMs?: number } = {},
): Promise<{ kills: Kill[]; workers: ProofChild[] }> {
  let workers = [...firstWorkers];
  const kills: Kill[] = [];
  const booting = new Set<Promise<void>>();
  const replace = () => {
    const boot: Promise<void> = suite.spawn('worker').then((w) => {
      workers.push(w);
      booting.delete(boot);
    });
    booting.add(boot);
  };
  const busyWorkers = () => workers.filter((w) => w.bodiesInFlight().length > 0);
  const bodiesBegun = () => suite.everyone.reduce((n, c) => n + c.of('body').filter((b) => b.event === 'start').length, 0);
  let begun = bodiesBegun();
  let idleSince = Date.now();
  while (more(kills, Date.now() - idleSince)) {
    sender.assertAlive('sender');
    await sleep(gapMs[0] + Math.random() * (gapMs[1] - gapMs[0]));
    let busy = busyWorkers();
    const until = Date.now() + (booting.size < 2 ? (options.awaitBodyMs ?? 0) : 0);
    while (busy.length === 0 && Date.now() < until) {
      await sleep(10);
      busy = busyWorkers();
    }
    if (bodiesBegun() > begun || busy.length > 0) [begun, idleSince] = [bodiesBegun(), Date.now()];
    if (busy.length === 0 || booting.size >= 2) continue;
    const victim = busy[Math.floor(Math.random() * busy.length)];
    // A body the victim starts now is held until the kill: the kill lands in it whatever the machine's speed.
    await victim.holdBodyUntil(() => true, HELD_BODY_WITHIN_MS);
    kills.push({ pid: victim.pid, at: Date.now(), bodies: victim.bodiesInFlight() });
    victim.child.kill('SIGKILL');
    workers = workers.filter((w) => w !== victim);
    replace();
  }
  await Promise.all(booting);
  return { kills, workers };
}

/**
 * For workflows that ran every step once: each of `steps` of each workflow with exactly one
 * successful execution, and no execution of them that ended otherwise than `success` or `recovered`.
 */
export function stepProblems(executions: StepExecution[], workflowIds: string[], steps: string[]): string[] {
  const problems: string[] = [];
  const wanted = new Set(workflowIds);
  const ofWanted = executions.filter((e) => wanted.has(e.workflowId));
  for (const e of ofWanted) if (e.outcome !== 'success' && e.outcome !== 'recovered') problems.push(`execution ${e.id} (${e.stepName} of workflow ${e.workflowId}): ${e.state}/${e.outcome}`);
  const succeeded = groupBy(
    ofWanted.filter((e) => e.outcome === 'success'),
    (e) => `${e.workflowId}/${e.stepName}`,
  );
  for (const id of wanted) {
    for (const step of steps) {
      const n = succeeded.get(`${id}/${step}`)?.length ?? 0;
      if (n !== 1) problems.push(`workflow ${id} step ${step}: ${n} successful executions`);
    }
  }
  return problems;
}

/** Output of the given children, for a failure message. */
export const outputOf = (children: ProofChild[]) => children.map((c) => `--- ${c.role} ${c.pid} ${JSON.stringify(c.exited)}\n${c.output.slice(-4_000)}`).join('\n');

const ACTIVE_STATES = `('scheduled', 'waiting', 'in_progress')`;

/**
 * Polls the executions table while a proof runs: any workflow with two active executions at once is
 * recorded (the unique index should make it impossible; this is the check that it does).
 */
export function sampleActiveExecutions(dataSource: DataSource, everyMs = 50): { stop(): Promise<{ samples: number; violations: string[] }> } {
  let running = true;
  let samples = 0;
  const violations: string[] = [];
  const loop = (async () => {
    while (running) {
      try {
        const rows: Array<{ workflow_id: unknown; n: unknown }> = await dataSource.query(
          `SELECT workflow_id, COUNT(*) AS n FROM geneva_drive_step_executions WHERE state IN ${ACTIVE_STATES} GROUP BY workflow_id HAVING COUNT(*) > 1`,
        );
        samples++;
        for (const row of rows) violations.push(`workflow ${String(row.workflow_id)}: ${String(row.n)} active executions`);
      } catch {
        // A sample the database refused (it is busy) is simply not taken.
      }
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { samples, violations };
    },
  };
}

/** Runs housekeeping every `everyMs` until stopped; returns what the runs recovered (and woke) and what threw. */
export function housekeepingLoop(
  housekeeping: HousekeepingService,
  everyMs = 1_000,
): { stop(): Promise<{ runs: number; inProgressRecovered: number; scheduledRecovered: number; flowWaitersWoken: number; errors: string[]; unrecoverable: string[] }> } {
  let running = true;
  const totals = { runs: 0, inProgressRecovered: 0, scheduledRecovered: 0, flowWaitersWoken: 0, errors: [] as string[], unrecoverable: [] as string[] };
  const loop = (async () => {
    while (running) {
      try {
        const summary: HousekeepingSummary = await housekeeping.run();
        totals.runs++;
        totals.inProgressRecovered += summary.stuckInProgressRecovered;
        totals.scheduledRecovered += summary.stuckScheduledRecovered;
        totals.flowWaitersWoken += summary.flowWaitersWoken;
        totals.unrecoverable.push(...summary.unrecoverable);
      } catch (error) {
        totals.errors.push(String(error));
      }
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return totals;
    },
  };
}

/**
 * Waits until every one of `ids` is in one of `states`; the timeout message lists those that are
 * not, with (given `queue`) where the job of each active execution is in the queue.
 */
export async function waitForWorkflows(
  dataSource: DataSource,
  ids: string[],
  states: WorkflowRecord['state'][],
  timeoutMs: number,
  context: () => string,
  queue?: QueueView,
): Promise<void> {
  const repository = dataSource.getRepository(WorkflowRecord);
  let pending: WorkflowRecord[] = [];
  await waitUntil(
    `${ids.length} workflows to be ${states.join(' or ')}`,
    async () => {
      const rows = await repository.find({ select: { id: true, state: true } });
      const wanted = new Set(ids);
      pending = rows.filter((row) => wanted.has(row.id) && !states.includes(row.state));
      return pending.length === 0;
    },
    { timeoutMs, intervalMs: 250 },
  ).catch(async (error: Error) => {
    const executions = dataSource.getRepository(StepExecution);
    const lines = await Promise.all(
      pending.slice(0, 10).map(async (wf) => {
        const history = await executions.find({ where: { workflowId: wf.id }, order: { id: 'ASC' } });
        const described = await Promise.all(history.map(async (e) => `${e.stepName}#${e.id}:${e.state}/${e.outcome}${await jobsOf(e, queue)}`));
        return `workflow ${wf.id} ${wf.state}: ${described.join(' → ')}`;
      }),
    );
    throw new Error(`${error.message}\n${pending.length} not there:\n${lines.join('\n')}\n${context()}`);
  });
}

/** ` [job <id>: <state>, …]` for an active execution: its own id's job and the job it last recorded. */
async function jobsOf(execution: StepExecution, queue: QueueView | undefined): Promise<string> {
  if (!queue || !['scheduled', 'waiting', 'in_progress'].includes(execution.state)) return '';
  const ids = [...new Set([execution.id, ...(execution.jobId ? [execution.jobId] : [])])];
  const jobs = await Promise.all(ids.map(async (id) => `job ${id}: ${(await queue.getJob(id).catch((error: Error) => ({ state: `unreadable (${error.message})` })))?.state ?? 'none'}`));
  return ` [${jobs.join(', ')}]`;
}

/** Everything the invariants read, once the run is over. */
export interface ProofSnapshot {
  workflows: WorkflowRecord[];
  executions: StepExecution[];
  signals: Signal[];
  sideEffects: Awaited<ReturnType<typeof readSideEffects>>;
}

export async function snapshot(dataSource: DataSource): Promise<ProofSnapshot> {
  return {
    workflows: await dataSource.getRepository(WorkflowRecord).find({ order: { id: 'ASC' } }),
    executions: await dataSource.getRepository(StepExecution).find({ order: { id: 'ASC' } }),
    signals: await dataSource.getRepository(Signal).find({ order: { id: 'ASC' } }),
    sideEffects: await readSideEffects(dataSource),
  };
}

const groupBy = <T>(items: T[], key: (item: T) => string) => {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return groups;
};

/**
 * The signal invariants of a workflow that ran its waitFor step: its one key is stored once,
 * consumed once by exactly one execution that completed, and the counters match the executions
 * pinned to it — `claimed` counts attachments, and a successor created by stuck recovery inherits
 * the pin without a new claim, so claimed = pinned − recovered pinned. Returns the problems found.
 */
export function signalProblems(snap: ProofSnapshot, workflowIds: string[]): string[] {
  const problems: string[] = [];
  const signalsByWorkflow = groupBy(snap.signals, (s) => s.workflowId);
  const pinnedBySignal = groupBy(
    snap.executions.filter((e) => e.signalId !== null),
    (e) => String(e.signalId),
  );
  for (const id of workflowIds) {
    const rows = signalsByWorkflow.get(id) ?? [];
    if (rows.length !== 1 || rows[0].idempotencyKey !== goKey(id)) {
      problems.push(`workflow ${id}: signals ${JSON.stringify(rows.map((s) => [s.id, s.idempotencyKey]))}, expected one keyed ${goKey(id)}`);
      continue;
    }
    const [signal] = rows;
    const pinned = pinnedBySignal.get(signal.id) ?? [];
    const recovered = pinned.filter((e) => e.outcome === 'recovered').length;
    const succeeded = pinned.filter((e) => e.outcome === 'success').length;
    const counters = { state: signal.state, claimed: Number(signal.claimed), consumed: Number(signal.consumed), pinned: pinned.length, recovered, succeeded };
    if (signal.state !== 'consumed' || counters.consumed !== 1 || succeeded !== 1 || counters.claimed !== pinned.length - recovered || !signal.consumedAt) {
      problems.push(`workflow ${id} signal ${signal.id}: ${JSON.stringify(counters)}`);
    }
  }
  return problems;
}

/**
 * Side effects: every execution wrote at most one row; each step of each workflow has exactly one
 * successful execution, whose row is there; any other row of that step belongs to an execution that
 * housekeeping recovered (a crash, or a stalled body recovered while it still ran). Returns the
 * problems found and how many rows were duplicates.
 */
export function sideEffectProblems(snap: ProofSnapshot, workflowIds: string[], steps: string[]): { problems: string[]; duplicates: number } {
  const problems: string[] = [];
  let duplicates = 0;
  const executionsById = new Map(snap.executions.map((e) => [e.id, e]));
  const effectsByExecution = groupBy(snap.sideEffects, (s) => s.executionId);
  for (const [executionId, rows] of effectsByExecution) {
    if (rows.length > 1) problems.push(`execution ${executionId}: its body wrote ${rows.length} rows`);
    if (!executionsById.has(executionId)) problems.push(`execution ${executionId}: a side effect of an execution that does not exist`);
  }
  const wanted = new Set(workflowIds);
  const executionsByStep = groupBy(
    snap.executions.filter((e) => wanted.has(e.workflowId)),
    (e) => `${e.workflowId}/${e.stepName}`,
  );
  for (const id of workflowIds) {
    for (const step of steps) {
      const executions = executionsByStep.get(`${id}/${step}`) ?? [];
      const succeeded = executions.filter((e) => e.outcome === 'success');
      if (succeeded.length !== 1 || !effectsByExecution.has(succeeded[0].id)) {
        problems.push(`workflow ${id} step ${step}: ${succeeded.length} successful executions (${executions.map((e) => `${e.id}:${e.state}/${e.outcome}`).join(', ')})`);
      }
      for (const execution of executions) {
        if (execution.outcome === 'success' || !effectsByExecution.has(execution.id)) continue;
        duplicates++;
        if (execution.outcome !== 'recovered') problems.push(`workflow ${id} step ${step}: execution ${execution.id} (${execution.state}/${execution.outcome}) wrote a side effect and was not recovered`);
      }
    }
  }
  return { problems, duplicates };
}

/** The side effect rows of some steps against their executions (see effectTally). */
export interface EffectTally {
  rows: number;
  /** Executions of those steps with outcome `success`. */
  successes: number;
  /** Rows beyond one per successful execution, by the outcome of the execution that wrote them (`success` when one execution wrote two). */
  extraByOutcome: Record<string, number>;
  /** Each workflow and step without exactly one successful execution and exactly one row, that execution's. */
  problems: string[];
}

/**
 * The side effect rows of `steps` in `workflowIds` against the executions that wrote them. Exactly
 * once — what a transactional step promises for its writes through `this.manager` — is `problems`
 * empty: per workflow and step one successful execution and one row, that execution's, so rows =
 * successes. A plain step shows its at-least-once rows in `extraByOutcome`.
 */
export function effectTally(snap: ProofSnapshot, workflowIds: string[], steps: string[]): EffectTally {
  const wanted = new Set(workflowIds);
  const ofSteps = <T extends { workflowId: string }>(items: T[], step: (item: T) => string) => items.filter((item) => wanted.has(item.workflowId) && steps.includes(step(item)));
  const rows = ofSteps(snap.sideEffects, (r) => r.step);
  const executions = ofSteps(snap.executions, (e) => e.stepName);
  const outcomeOf = new Map(snap.executions.map((e) => [e.id, e.outcome ?? e.state]));
  const extraByOutcome: Record<string, number> = {};
  for (const [executionId, written] of groupBy(rows, (r) => r.executionId)) {
    const outcome = outcomeOf.get(executionId) ?? 'no such execution';
    const extra = outcome === 'success' ? written.length - 1 : written.length;
    if (extra > 0) extraByOutcome[outcome] = (extraByOutcome[outcome] ?? 0) + extra;
  }
  const problems: string[] = [];
  const rowsByStep = groupBy(rows, (r) => `${r.workflowId}/${r.step}`);
  const executionsByStep = groupBy(executions, (e) => `${e.workflowId}/${e.stepName}`);
  for (const id of workflowIds) {
    for (const step of steps) {
      const succeeded = (executionsByStep.get(`${id}/${step}`) ?? []).filter((e) => e.outcome === 'success');
      const written = rowsByStep.get(`${id}/${step}`) ?? [];
      if (succeeded.length !== 1 || written.length !== 1 || written[0].executionId !== succeeded[0].id) {
        const history = (executionsByStep.get(`${id}/${step}`) ?? []).map((e) => `${e.id}:${e.state}/${e.outcome}`).join(', ');
        problems.push(`workflow ${id} step ${step}: executions ${history}; rows of ${JSON.stringify(written.map((r) => r.executionId))}`);
      }
    }
  }
  return { rows: rows.length, successes: executions.filter((e) => e.outcome === 'success').length, extraByOutcome, problems };
}

/** Calls that failed for good (every attempt failed) or hung, and attempts that failed on the way. */
export function callProblems(calls: CallReport[]): { hung: CallReport[]; failedAttempts: CallReport[] } {
  return { hung: calls.filter((c) => c.hung), failedAttempts: calls.filter((c) => !c.ok) };
}
