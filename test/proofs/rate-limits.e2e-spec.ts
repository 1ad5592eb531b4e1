/**
 * Rate limits under SIGKILL. Bull worker processes (three; two in the short run) run
 * RatedProofWorkflow (arrive → send; `send` rate-limited by its hero's key, `limit: 2, per: '1s'`,
 * 4 s in the long run, for a body of 10–50 ms) while a sender process starts the workflows faster
 * than the keys' rates allow, spread over the keys by hero id. Most `send` executions are therefore
 * over the rate: each is promised a later window, kept `scheduled` for it with one delayed job. The
 * spec SIGKILLs a worker with a `send` body running at random moments, through the stream and the
 * promised windows after it (until nine tenths of the bodies ran), and starts a replacement. A killed
 * execution comes back as in the chaos proof (Bull's stalled-job check, the run ledger's lease): it
 * ends `recovered`, and its successor goes through phase 1 again — a new start, which the rate must
 * allow like any other. Housekeeping (every second, in this process) recovers nothing in progress (a
 * threshold of an hour) but sends again, after 5 s, a job lost with a killed worker.
 *
 * The window check reads only the executions' rows: a start is an execution's `started_at`, the time
 * its rate window counted, stamped in the transaction that counted it (one host's clock stamps them
 * all). Every execution of `send` that started counts, recovered ones included: a killed body did start.
 *
 * Checks: every workflow finished, each step with one successful execution; for every key, every
 * window [t, t + per) with t a start holds at most 2 starts; the key's row keeps as its latest starts
 * exactly the latest `started_at` of its executions; a promised execution never started before its
 * promised time; the rate bit (executions promised a later window, some windows full); the kills were
 * real (enough of them in a `send` body, some in a promised one's, executions recovered); no job
 * failed in a worker.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import type { DataSource } from 'typeorm';
import type { StepExecution } from 'geneva-drive';
import type { DatabaseKind } from '../utils/databases.js';
import { describeProof, killWorkersInBodies, outputOf, proofFigures, proofSuite, scaled, snapshot, stepProblems, waitForWorkflows } from './src/proof-harness.js';
import { RATE_LIMIT, RATE_PER, RATE_PER_MS, rateKeyOf, RatedProofWorkflow } from './src/proof-workflows.js';

const WORKERS = scaled(2, 3);
const WORKFLOWS = scaled(60, 1_000);
const KEYS = scaled(4, 20);
/** Jobs a worker runs at once. */
const WORKER_CONCURRENCY = 5;
/** Faster than the keys' rates together (KEYS × RATE_LIMIT per RATE_PER): the rate must make most of them wait. */
const START_GAP_MS = 5;
const MIN_KILLS = scaled(2, 10);
/**
 * Pause between two kills, at random in this range (a kill also waits while two replacements boot).
 * Longer than the flow-control proof's: every kill lengthens the run it lands in (a recovery, then a
 * window for the successor), and killing goes on as long as bodies run.
 */
const KILL_GAP_MS = [1_000, 2_500] as const;
const SETTLE_TIMEOUT_MS = scaled(90_000, 300_000);
const STEPS = ['arrive', 'send'];

/** A key's rate window as its row keeps it: the latest starts and claims, epoch ms. */
interface RateWindowRow {
  key: string;
  s: number[];
  c: number[];
}

/** What an execution of `send` over the rate was promised (its metadata). */
const promiseOf = (e: StepExecution) => e.metadata?.rateWindow as { key: string; at: number } | undefined;

function rateSuite(kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  const suite = proofSuite(kind, entry, children, 'rate', {
    maxRecoveries: null,
    stuckThreshold: '1h',
    stuckScheduledThreshold: '5s',
    workerConcurrency: WORKER_CONCURRENCY,
    childEnv: { GD_PROOF_FLOW_KEYS: String(KEYS) },
  });

  it(`${WORKFLOWS} workflows over ${KEYS} keys (limit ${RATE_LIMIT} per ${RATE_PER}) while workers are SIGKILLed: all finish, never more than ${RATE_LIMIT} starts of a key in any window`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const [sender, ...firstWorkers] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    const booted = Date.now();
    const context = () => outputOf([sender, ...everyone.filter((c) => c.role === 'worker').slice(-6)]);

    const { sampler, housekeeping } = suite.watch();
    sender.send({
      type: 'run',
      workflows: WORKFLOWS,
      classes: [RatedProofWorkflow.name],
      signals: false,
      startGapMs: START_GAP_MS,
      signalDelayMaxMs: 0,
      redeliverEvery: 0,
      callTimeoutMs: 15_000,
      maxAttempts: 3,
      retryPauseMs: 200,
    });

    // Kill a worker with a `send` body running, start its replacement, through the stream and the
    // promised windows after it, until nine tenths of the bodies ran (or no body began for 5 s): near
    // the end a kill could only land on the few workflows left, again and again. A body is short and
    // the keys' rate low, so each kill waits up to 2 s for one.
    const bodiesEnded = () => new Set(everyone.flatMap((c) => c.of('body').filter((b) => b.event === 'end').map((b) => b.executionId))).size;
    const { kills } = await killWorkersInBodies(
      suite,
      sender,
      firstWorkers,
      KILL_GAP_MS,
      (_, idleMs) => sender.of('done').length === 0 || (idleMs < 5_000 && bodiesEnded() < WORKFLOWS * 0.9),
      { awaitBodyMs: 2_000 },
    );
    const chaosMs = Date.now() - booted;
    const senderMs = Math.max(...sender.calls().map((c) => c.startedAt + c.ms)) - booted;

    const started = sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    await waitForWorkflows(app.dataSource, started, ['finished'], SETTLE_TIMEOUT_MS, context, suite.queue());
    const hk = await housekeeping.stop();
    const sampled = await sampler.stop();
    const snap = await snapshot(app.dataSource);
    const windows = await readRateWindows(app.dataSource);

    const heroOf = new Map(snap.workflows.map((w) => [w.id, Number(w.heroId)]));
    const keyOf = (e: StepExecution) => rateKeyOf(heroOf.get(e.workflowId)!, KEYS);
    const sends = snap.executions.filter((e) => e.stepName === 'send');
    const starts = sends.filter((e) => e.startedAt !== null);
    const fullest = fullestWindows(starts, keyOf);
    const worst = Math.max(0, ...[...fullest.values()].map((w) => w.max));
    const promised = sends.filter((e) => promiseOf(e) !== undefined);
    const recovered = sends.filter((e) => e.outcome === 'recovered');
    const killedIds = new Set(kills.flatMap((k) => k.bodies));
    const killedSends = sends.filter((e) => killedIds.has(e.id));
    const killedPromised = killedSends.filter((e) => promiseOf(e) !== undefined);
    const killedRecovered = killedSends.filter((e) => e.outcome === 'recovered');
    const startedAfter = (e: StepExecution) => e.startedAt!.getTime() - e.createdAt.getTime();
    const longestWait = Math.max(0, ...starts.map(startedAfter));
    const lateness = promised.filter((e) => e.startedAt !== null).map((e) => e.startedAt!.getTime() - promiseOf(e)!.at);
    const workerJobs = everyone.flatMap((c) => c.of('job'));
    const workerJobFailures = workerJobs.filter((j) => j.event === 'failed');
    // The times an execution was promised, by the delayed jobs workers ran for it (one per promise).
    const promises = new Map<string, Set<string>>();
    for (const j of workerJobs) if (j.jobId.startsWith(`${j.executionId}-rate-`)) promises.set(j.executionId, (promises.get(j.executionId) ?? new Set()).add(j.jobId));
    const pushedBack = [...promises.values()].filter((ids) => ids.size > 1);
    proofFigures(
      `rate-limits [${kind}] ${started.length} workflows over ${KEYS} keys (limit ${RATE_LIMIT} per ${RATE_PER}), sent in ${senderMs} ms: ` +
        `${kills.length} kills in a send body (${killedIds.size} bodies, ${killedPromised.length} of promised executions, ${killedRecovered.length} recovered; ` +
        `${recovered.length} send executions recovered in all), ${starts.length} starts of send, ` +
        `most starts of a key in one ${RATE_PER} window ${worst} (keys at it: ${[...fullest.values()].filter((w) => w.max === worst).length}; windows holding exactly ${RATE_LIMIT}: ${[...fullest.values()].reduce((n, w) => n + w.full, 0)}), ` +
        `${promised.length} executions promised a later window (longest wait from creation to start ${longestWait} ms, ` +
        `started after the promised time by at most ${Math.max(0, ...lateness)} ms, ${lateness.filter((ms) => ms > RATE_PER_MS).length} by more than ${RATE_PER}; ` +
        `${pushedBack.length} pushed back to a later time when theirs came, at most ${Math.max(1, ...pushedBack.map((ids) => ids.size)) - 1} times), ` +
        `housekeeping ${hk.runs} runs (${hk.scheduledRecovered} overdue executions enqueued again, ${hk.inProgressRecovered} in progress recovered); ` +
        `boot ${booted - began} ms, chaos ${chaosMs} ms, total ${Date.now() - began} ms`,
    );

    // Every workflow started and finished, each step with exactly one successful execution.
    expect(sender.calls().filter((c) => !c.ok)).toEqual([]);
    expect(started).toHaveLength(WORKFLOWS);
    expect(snap.workflows.filter((w) => started.includes(w.id) && w.state !== 'finished').map((w) => [w.id, w.state])).toEqual([]);
    expect(snap.executions.filter((e) => ['scheduled', 'waiting', 'in_progress'].includes(e.state))).toEqual([]);
    expect(stepProblems(snap.executions, started, STEPS)).toEqual([]);
    expect(sampled.violations).toEqual([]);
    // No window of RATE_PER holds more than RATE_LIMIT starts of a key, recovered executions' included.
    expect(fullest.size).toBe(KEYS);
    expect([...fullest.values()].filter((w) => w.max > RATE_LIMIT)).toEqual([]);
    // The key's row agrees with the rows: its latest starts are its executions' latest started_at.
    const latestStarts = new Map([...groupStarts(starts, keyOf)].map(([key, times]) => [key, times.slice(-RATE_LIMIT)]));
    expect(windows.map((w) => [w.key, w.s])).toEqual([...latestStarts].sort(([a], [b]) => a.localeCompare(b)));
    // A promised execution started at its time or later, never before, and for the key it was promised on.
    expect(promised.filter((e) => e.startedAt !== null && (e.startedAt.getTime() < promiseOf(e)!.at || promiseOf(e)!.key !== keyOf(e))).map(describe)).toEqual([]);
    // The rate bit: windows full, and most executions promised a later one.
    expect(worst).toBe(RATE_LIMIT);
    expect(promised.length).toBeGreaterThan(WORKFLOWS / 2);
    // The kills were real: enough of them in a send body, some of a promised execution, recovered.
    expect(kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
    // With the short run's handful of kills, whether one lands in a promised execution's body is chance: asked of the full run.
    if (scaled(false, true)) expect(killedPromised.length).toBeGreaterThan(0);
    expect(killedRecovered.length).toBeGreaterThan(0);
    // A job that failed in a worker is an engine error surfacing (no body throws).
    expect(workerJobFailures).toEqual([]);
    expect(hk.errors).toEqual([]);
    expect(hk.unrecoverable).toEqual([]);
  }, scaled(240_000, 900_000));
}

/** Per key, the start times of its executions, ascending. */
function groupStarts(starts: StepExecution[], keyOf: (e: StepExecution) => string): Map<string, number[]> {
  const byKey = new Map<string, number[]>();
  for (const e of starts) byKey.set(keyOf(e), [...(byKey.get(keyOf(e)) ?? []), e.startedAt!.getTime()]);
  for (const times of byKey.values()) times.sort((a, b) => a - b);
  return byKey;
}

/**
 * Per key, the most starts within one window [t, t + RATE_PER) with t a start (the fullest window
 * begins at a start), how many such windows hold exactly the limit, and, when the fullest is over the
 * limit, the executions in it.
 */
function fullestWindows(starts: StepExecution[], keyOf: (e: StepExecution) => string): Map<string, { key: string; max: number; full: number; from: string; executions: string[] }> {
  const byKey = new Map<string, StepExecution[]>();
  for (const e of starts) byKey.set(keyOf(e), [...(byKey.get(keyOf(e)) ?? []), e]);
  const result = new Map<string, { key: string; max: number; full: number; from: string; executions: string[] }>();
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.startedAt!.getTime() - b.startedAt!.getTime());
    let worst = { key, max: 0, full: 0, from: '', executions: [] as string[] };
    let end = 0;
    for (let i = 0; i < list.length; i++) {
      const from = list[i].startedAt!.getTime();
      while (end < list.length && list[end].startedAt!.getTime() < from + RATE_PER_MS) end++;
      if (end - i > worst.max) worst = { ...worst, max: end - i, from: list[i].startedAt!.toISOString(), executions: list.slice(i, end).map(describe) };
      // Windows holding the limit exactly: where the rate bit.
      if (end - i === RATE_LIMIT) worst.full++;
    }
    if (worst.max <= RATE_LIMIT) worst.executions = [];
    result.set(key, worst);
  }
  return result;
}

const describe = (e: StepExecution) =>
  `${e.id} (${e.stepName} of workflow ${e.workflowId}, ${e.state}/${e.outcome}, created ${e.createdAt.toISOString()}, ` +
  `scheduled for ${e.scheduledFor.toISOString()}, started ${e.startedAt?.toISOString()}, finished ${e.finishedAt?.toISOString() ?? 'never'}, ` +
  `job ${e.jobId}, promise ${JSON.stringify(promiseOf(e) ?? null)})`;

/** Every key's rate window, by key. */
async function readRateWindows(dataSource: DataSource): Promise<RateWindowRow[]> {
  const rows: Array<{ flow_key: unknown; rate_window: unknown }> = await dataSource.query(`SELECT flow_key, rate_window FROM geneva_drive_flow_keys WHERE rate_window IS NOT NULL`);
  // MySQL/MariaDB answer the key column as bytes: String() of a Buffer is its text. The window is text.
  return rows
    .map((r) => ({ key: String(r.flow_key), ...(JSON.parse(String(r.rate_window)) as { s: number[]; c: number[] }) }))
    .sort((a, b) => a.key.localeCompare(b.key));
}

describeProof('Rate limits across SIGKILLed Bull worker processes', rateSuite);
