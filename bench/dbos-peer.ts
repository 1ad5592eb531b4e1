/**
 * DBOS Transact as the peer of the comparison shape: the same workflow (a no-op step `a`, a wait for
 * `payment_confirmed`, a no-op step `b`) written the DBOS way, in this process, on a system database
 * of its own on the same PostgreSQL server, and driven by shape.ts's timed runs like geneva-drive.
 *
 * - Start: DBOS.startWorkflow without a queue: DBOS records the workflow and runs it in this
 *   process at once. A DBOS queue counts a workflow against its concurrency until it ends, a wait in
 *   recv included, so a queue of 10 could never hold the 2,000 parked of the signal-after order.
 * - Signal: DBOS.send to the workflow on the topic `payment_confirmed`, under the same idempotency
 *   key as geneva-drive's where the run keys its signals.
 * - Parked: marked in memory by the workflow just before DBOS.recv, as geneva-drive's mark (its
 *   precondition event) comes as its gate decides to wait: both before the writes of the wait
 *   itself. DBOS tells nothing when recv starts waiting, and a setEvent would be a write of the
 *   bench's.
 * - Woken body: the first line of step `b`.
 */
import { DBOS } from '@dbos-inc/dbos-sdk';
import { DataSource } from 'typeorm';
import { Arrivals, BenchLogger, PAYMENT_SIGNAL } from './app.js';
import { DBOS_DATABASE, recreateDatabase, serverUrl } from './config.js';
import { openWindow } from './load.js';
import { assert } from './scenarios.js';
import { runSignalFirst, type ShapeEngine } from './shape.js';

const WORKFLOW = 'payment';
const TIMEOUT_MS = 120_000;
/** Unmeasured workflows after each launch: enough to open every connection of DBOS's pool (10, as TypeORM's). */
const WARM_UP_WORKFLOWS = 20;
/** recv always has a deadline (60 s when none is given): one that no run comes near. */
const RECV_TIMEOUT_SECONDS = 3_600;

/** What the DBOS workflow reports, by workflow id. */
const probe = {
  parked: new Arrivals<number>(),
  bodies: new Arrivals<number>(),
  finished: new Arrivals<unknown>(),
  /** How often each workflow's `a` and `b` bodies ran: once each. */
  ran: { a: new Map<string, number>(), b: new Map<string, number>() },
  /** The sequence number each workflow's `b` received, and the one sent to it. */
  received: new Map<string, number>(),
  sent: new Map<string, number>(),
};

const a = DBOS.registerStep(
  async () => {
    ranOnce(probe.ran.a);
  },
  { name: 'a' },
);

const b = DBOS.registerStep(
  async (seq: number) => {
    probe.bodies.arrive(DBOS.workflowID!, performance.now());
    ranOnce(probe.ran.b);
    probe.received.set(DBOS.workflowID!, seq);
  },
  { name: 'b' },
);

function ranOnce(counts: Map<string, number>): void {
  counts.set(DBOS.workflowID!, (counts.get(DBOS.workflowID!) ?? 0) + 1);
}

const payment = DBOS.registerWorkflow(
  async (): Promise<void> => {
    await a();
    probe.parked.arrive(DBOS.workflowID!, performance.now());
    const message = await DBOS.recv<{ seq: number }>(PAYMENT_SIGNAL, RECV_TIMEOUT_SECONDS);
    if (message === null) throw new Error(`no ${PAYMENT_SIGNAL} within ${RECV_TIMEOUT_SECONDS} s`);
    await b(message.seq);
  },
  { name: WORKFLOW },
);

/**
 * DBOS on a fresh system database, launched only for its own runs (launched, it polls its queues a
 * few times a second, work that would land on the machine during geneva-drive's runs).
 */
export class DbosPeer {
  private constructor(
    /** What DBOS logged: an error fails the run, as the engine's do. */
    readonly logger: BenchLogger,
    private readonly dataSource: DataSource,
  ) {}

  static async open(): Promise<DbosPeer> {
    await recreateDatabase('postgres', DBOS_DATABASE);
    const url = serverUrl('postgres', DBOS_DATABASE);
    const logger = new BenchLogger();
    DBOS.setConfig({
      name: 'geneva-drive-bench',
      systemDatabaseUrl: url,
      logger: { info() {}, debug() {}, warn: (entry) => logger.warn(entry), error: (entry) => logger.error(entry) },
    });
    // The bench's own connection: the checks after each run and the CPU of DBOS's backends.
    return new DbosPeer(logger, await new DataSource({ type: 'postgres', url }).initialize());
  }

  /** Launches DBOS, warms its connection pool as geneva-drive's is warm, runs `work`, shuts DBOS down. */
  async whileLaunched<T>(work: () => Promise<T>): Promise<T> {
    await DBOS.launch();
    try {
      await runSignalFirst(this.engine, WARM_UP_WORKFLOWS);
      return await work();
    } finally {
      await DBOS.shutdown();
    }
  }

  async close(): Promise<void> {
    await this.dataSource.destroy();
  }

  get engine(): ShapeEngine {
    return {
      name: 'dbos',
      starts: async (n) => Array.from({ length: n }, () => () => this.start()),
      signal: async (id, seq, idempotencyKey) => {
        probe.sent.set(id, seq);
        await DBOS.send(id, { seq }, PAYMENT_SIGNAL, idempotencyKey);
      },
      parked: (id, timeoutMs) => probe.parked.wait(id, timeoutMs, 'the parked recv'),
      body: (id) => probe.bodies.wait(id, TIMEOUT_MS, 'the woken step b'),
      finished: async (id) => {
        const outcome = await probe.finished.wait(id, TIMEOUT_MS, 'the finished workflow');
        if (outcome instanceof Error) throw outcome;
      },
      openWindow: () => openWindow(this.dataSource, 'postgres'),
      verify: (ids) => this.verify(ids),
    };
  }

  private async start(): Promise<string> {
    const handle = await DBOS.startWorkflow(payment)();
    const id = handle.workflowID;
    // The handle of a workflow started here awaits its promise: no poll of the database.
    void handle.getResult().then(
      () => probe.finished.arrive(id, true),
      (error: unknown) => probe.finished.arrive(id, error instanceof Error ? error : new Error(String(error))),
    );
    return id;
  }

  /** Every workflow SUCCESS, its message consumed once and the one sent to it, `a` and `b` recorded and run once each. */
  private async verify(ids: string[]): Promise<void> {
    const [status] = await this.dataSource.query(
      `SELECT count(*) FILTER (WHERE status = 'SUCCESS')::int AS succeeded, count(*) FILTER (WHERE recovery_attempts = 1)::int AS once FROM dbos.workflow_status WHERE workflow_uuid = ANY($1)`,
      [ids],
    );
    const [messages] = await this.dataSource.query(`SELECT count(*)::int AS sent, count(*) FILTER (WHERE consumed)::int AS consumed FROM dbos.notifications WHERE destination_uuid = ANY($1)`, [ids]);
    const steps: Array<{ name: string; count: number }> = await this.dataSource.query(
      `SELECT function_name AS name, count(*)::int AS count FROM dbos.operation_outputs WHERE workflow_uuid = ANY($1) AND function_name IN ('a', 'b') GROUP BY function_name`,
      [ids],
    );
    const recorded = Object.fromEntries(steps.map((row) => [row.name, row.count]));
    const matched = ids.filter((id) => probe.received.has(id) && probe.received.get(id) === probe.sent.get(id)).length;
    const once = ids.filter((id) => probe.ran.a.get(id) === 1 && probe.ran.b.get(id) === 1).length;
    const n = ids.length;
    assert(
      status.succeeded === n && status.once === n && messages.sent === n && messages.consumed === n && recorded.a === n && recorded.b === n && matched === n && once === n,
      `DBOS ${WORKFLOW} check failed for ${n} workflows: ${status.succeeded} SUCCESS (${status.once} started once), ${messages.sent} messages (${messages.consumed} consumed), steps recorded a ${recorded.a ?? 0} / b ${recorded.b ?? 0}, ${once} ran a and b once, ${matched} received the message sent to them`,
    );
    for (const map of [probe.received, probe.sent, probe.ran.a, probe.ran.b]) for (const id of ids) map.delete(id);
  }
}
