/**
 * Flow control under SIGKILL. Bull worker processes (three; two in the short run) run
 * KeyedProofWorkflow (first → second, each step holding a slot of its hero's key, `limit: 2`, for a
 * body of 20–80 ms) while a sender process starts the workflows, spread over the keys by hero id.
 * The spec SIGKILLs a worker with a keyed body running at random moments and starts a replacement.
 * A killed execution comes back as in the chaos proof: the takeover of the dead worker's runs (Bull's
 * stalled-job check, the run ledger's lease) closes it `recovered` in the transaction that frees its
 * slot, and runs its successor. Housekeeping (every second, in this process) recovers nothing in
 * progress (a threshold of an hour) but sends again, after 5 s, a wake lost with a killed worker.
 *
 * The overlap check reads only the executions' rows. An execution holds its key's slot from
 * `started_at` (stamped once the slot is taken, in the transaction that takes it) to `finished_at`
 * (stamped by every terminal transition — completed, failed, canceled, skipped, and `recovered`
 * after a kill — in the transaction that frees it). So [started_at, finished_at) is how long it held
 * the slot, a killed one until its recovery; one clock (one host) stamps both ends. A sweep over
 * these intervals, per key, finds the most that overlap at any instant.
 *
 * Checks: every workflow finished, each step with one successful execution; at no instant more than
 * 2 executions of a key overlap; sampled all along, no key counts more than 2 holders and its count
 * of holders equals its executions in progress; at the end every key's row holds 0 and queues
 * nobody (no leak); the kills were real (enough of them in a keyed body, executions recovered) and
 * the keys contended (some limit reached, executions queued for a slot).
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { afterAll, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import type { DataSource } from 'typeorm';
import type { StepExecution } from 'geneva-drive';
import { sleep } from '../src/bull-wait.js';
import type { DatabaseKind } from '../utils/databases.js';
import { describeProof, killWorkersInBodies, outputOf, proofFigures, proofSuite, scaled, snapshot, stepProblems, waitForWorkflows } from './src/proof-harness.js';
import { FLOW_KEY_LIMIT, flowKeyOf, KeyedProofWorkflow } from './src/proof-workflows.js';

const WORKERS = scaled(2, 3);
const WORKFLOWS = scaled(60, 1_000);
const KEYS = scaled(4, 20);
/** Jobs a worker runs at once: enough that several steps of one key are in hand together. */
const WORKER_CONCURRENCY = 5;
const START_GAP_MS = scaled(60, 40);
const MIN_KILLS = scaled(2, 10);
/** Pause between two kills, at random in this range (a kill also waits while two replacements boot). */
const KILL_GAP_MS = [300, 1_200] as const;
const SETTLE_TIMEOUT_MS = scaled(90_000, 300_000);

/** A key's row in `geneva_drive_flow_keys`, with its executions in progress counted by the same statement. */
interface KeyRow {
  key: string;
  holding: number;
  waiters: Array<{ e: string }>;
  inProgress: number;
}

function flowSuite(kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  const suite = proofSuite(kind, entry, children, 'flow', {
    maxRecoveries: null,
    stuckThreshold: '1h',
    stuckScheduledThreshold: '5s',
    workerConcurrency: WORKER_CONCURRENCY,
    childEnv: { GD_PROOF_FLOW_KEYS: String(KEYS) },
  });
  let keySampler: ReturnType<typeof sampleKeys> | undefined;
  afterAll(() => keySampler?.stop());

  it(`${WORKFLOWS} workflows over ${KEYS} keys (limit ${FLOW_KEY_LIMIT}) while workers are SIGKILLed: all finish, never more than ${FLOW_KEY_LIMIT} holders of a key, no slot leaks`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const [sender, ...firstWorkers] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    const booted = Date.now();
    const context = () => outputOf([sender, ...everyone.filter((c) => c.role === 'worker').slice(-6)]);

    const { housekeeping } = suite.watch();
    keySampler = sampleKeys(app.dataSource);
    sender.send({
      type: 'run',
      workflows: WORKFLOWS,
      classes: [KeyedProofWorkflow.name],
      signals: false,
      startGapMs: START_GAP_MS,
      signalDelayMaxMs: 0,
      redeliverEvery: 0,
      callTimeoutMs: 15_000,
      maxAttempts: 3,
      retryPauseMs: 200,
    });

    // Kill a worker with a keyed body running, start its replacement, until the sender is done and
    // enough kills landed in a body (or, after the stream, no body ran for 5 s).
    const { kills } = await killWorkersInBodies(suite, sender, firstWorkers, KILL_GAP_MS, (done, idleMs) => sender.of('done').length === 0 || (done.length < MIN_KILLS && idleMs < 5_000));
    const chaosMs = Date.now() - booted;

    const started = sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    await waitForWorkflows(app.dataSource, started, ['finished'], SETTLE_TIMEOUT_MS, context, suite.queue());
    const hk = await housekeeping.stop();
    const sampled = await keySampler.stop();
    const snap = await snapshot(app.dataSource);
    const keyRows = await readKeys(app.dataSource);

    const keyed = snap.executions.filter((e) => e.flowKey !== null);
    const overlaps = maxOverlaps(keyed);
    const worst = Math.max(0, ...[...overlaps.values()].map((o) => o.max));
    const recovered = keyed.filter((e) => e.outcome === 'recovered');
    const killedIds = new Set(kills.flatMap((k) => k.bodies));
    const killedRecovered = keyed.filter((e) => killedIds.has(e.id) && e.outcome === 'recovered');
    const workerJobFailures = everyone.flatMap((c) => c.of('job')).filter((j) => j.event === 'failed');
    proofFigures(
      `flow-control [${kind}] ${started.length} workflows over ${KEYS} keys (limit ${FLOW_KEY_LIMIT}): ${kills.length} kills in a keyed body ` +
        `(${killedIds.size} bodies, ${killedRecovered.length} of their executions recovered, ${recovered.length} keyed executions recovered in all), ` +
        `most overlapping executions of a key ${worst} (keys at it: ${[...overlaps.values()].filter((o) => o.max === worst).length}), ` +
        `${sampled.queued.size} executions seen queued for a slot (longest queue ${sampled.maxWaiters}), ${sampled.samples} samples, ` +
        `housekeeping ${hk.runs} runs (${hk.flowWaitersWoken} stranded waiters woken, ${hk.inProgressRecovered} in progress recovered); ` +
        `boot ${booted - began} ms, chaos ${chaosMs} ms, total ${Date.now() - began} ms`,
    );

    // Every workflow started and finished, each step with exactly one successful execution.
    expect(sender.calls().filter((c) => !c.ok)).toEqual([]);
    expect(started).toHaveLength(WORKFLOWS);
    expect(snap.workflows.filter((w) => started.includes(w.id) && w.state !== 'finished').map((w) => [w.id, w.state])).toEqual([]);
    expect(snap.executions.filter((e) => ['scheduled', 'waiting', 'in_progress'].includes(e.state))).toEqual([]);
    expect(stepProblems(keyed, started, ['first', 'second'])).toEqual([]);
    // Every execution held the key its hero gives, and every key was used.
    const heroOf = new Map(snap.workflows.map((w) => [w.id, Number(w.heroId)]));
    expect(keyed.filter((e) => e.flowKey !== flowKeyOf(heroOf.get(e.workflowId)!, KEYS)).map((e) => [e.id, e.flowKey])).toEqual([]);
    expect(overlaps.size).toBe(KEYS);
    // At no instant more than `limit` executions of a key held it, by the rows' times and by the samples.
    expect([...overlaps.values()].filter((o) => o.max > FLOW_KEY_LIMIT)).toEqual([]);
    expect(sampled.samples).toBeGreaterThan(20);
    expect(sampled.violations).toEqual([]);
    // No leak: every key's row holds nothing and queues nobody.
    expect(keyRows.map((r) => r.key).sort()).toEqual([...overlaps.keys()].sort());
    expect(keyRows.filter((r) => r.holding !== 0 || r.waiters.length > 0)).toEqual([]);
    // The keys contended: some reached their limit, and executions queued for a slot.
    expect(worst).toBe(FLOW_KEY_LIMIT);
    expect(sampled.queued.size).toBeGreaterThan(0);
    // The kills were real: enough of them in a keyed body, whose executions came back recovered.
    expect(kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
    expect(killedRecovered.length).toBeGreaterThan(0);
    // A job that failed in a worker is an engine error surfacing (no body throws).
    expect(workerJobFailures).toEqual([]);
    expect(hk.errors).toEqual([]);
  }, scaled(240_000, 900_000));
}

/**
 * Per key, the most executions whose [started_at, finished_at) overlap at one instant, and the
 * executions that did when it is over the limit. An execution not finished counts until the end of time.
 */
function maxOverlaps(executions: StepExecution[]): Map<string, { key: string; max: number; at: number; holders: string[] }> {
  const byKey = new Map<string, StepExecution[]>();
  for (const e of executions) if (e.startedAt) byKey.set(e.flowKey!, [...(byKey.get(e.flowKey!) ?? []), e]);
  const result = new Map<string, { key: string; max: number; at: number; holders: string[] }>();
  for (const [key, list] of byKey) {
    // An end before a start at the same instant: the intervals are half-open.
    const events = list
      .flatMap((e) => [
        { at: e.startedAt!.getTime(), delta: 1, e },
        { at: e.finishedAt?.getTime() ?? Infinity, delta: -1, e },
      ])
      .sort((a, b) => a.at - b.at || a.delta - b.delta);
    const holding = new Set<StepExecution>();
    let worst = { key, max: 0, at: 0, holders: [] as string[] };
    for (const event of events) {
      if (event.delta > 0) holding.add(event.e);
      else holding.delete(event.e);
      if (holding.size > worst.max) {
        worst = { key, max: holding.size, at: event.at, holders: [...holding].map(describe) };
      }
    }
    if (worst.max <= FLOW_KEY_LIMIT) worst.holders = [];
    result.set(key, worst);
  }
  return result;
}

const describe = (e: StepExecution) =>
  `${e.id} (${e.stepName} of workflow ${e.workflowId}, ${e.state}/${e.outcome}, ${e.startedAt?.toISOString()} → ${e.finishedAt?.toISOString() ?? 'never'}, job ${e.jobId})`;

/** Every key's row, and its executions in progress, in one statement (one snapshot on both databases). */
async function readKeys(dataSource: DataSource): Promise<KeyRow[]> {
  const rows: Array<{ flow_key: unknown; holding: unknown; waiters: unknown; in_progress: unknown }> = await dataSource.query(
    `SELECT k.flow_key, k.holding, k.waiters, ` +
      `(SELECT COUNT(*) FROM geneva_drive_step_executions e WHERE e.flow_key = k.flow_key AND e.state = 'in_progress') AS in_progress ` +
      `FROM geneva_drive_flow_keys k`,
  );
  // MySQL/MariaDB answer the key column as bytes: String() of a Buffer is its text.
  return rows.map((r) => ({ key: String(r.flow_key), holding: Number(r.holding), waiters: JSON.parse(String(r.waiters)), inProgress: Number(r.in_progress) }));
}

/**
 * Reads every key's row while the proof runs: a key holding more than the limit, or whose count of
 * holders is not its executions in progress, is recorded. Also who was seen queued, and the longest queue.
 */
function sampleKeys(dataSource: DataSource, everyMs = 100): { stop(): Promise<{ samples: number; violations: string[]; queued: Set<string>; maxWaiters: number }> } {
  let running = true;
  const seen = { samples: 0, violations: [] as string[], queued: new Set<string>(), maxWaiters: 0 };
  const loop = (async () => {
    while (running && dataSource.isInitialized) {
      try {
        for (const row of await readKeys(dataSource)) {
          if (row.holding > FLOW_KEY_LIMIT || row.inProgress > FLOW_KEY_LIMIT || row.holding !== row.inProgress) {
            seen.violations.push(`key ${row.key} at ${new Date().toISOString()}: holding ${row.holding}, ${row.inProgress} in progress, waiters ${JSON.stringify(row.waiters)}`);
          }
          for (const waiter of row.waiters) seen.queued.add(waiter.e);
          seen.maxWaiters = Math.max(seen.maxWaiters, row.waiters.length);
        }
        seen.samples++;
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
      return seen;
    },
  };
}

describeProof('Concurrency keys across SIGKILLed Bull worker processes', flowSuite);
