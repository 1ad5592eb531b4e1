/**
 * Redis killed and restarted during a stream of start()/signal(). The proof runs its own
 * redis-server (a free port from 6391, no persistence): a SIGKILL loses every job in it, waiting,
 * delayed and active alike. Worker processes (two; one in the short run) run ProofWorkflow; a
 * separate sender process starts workflows and signals each with its idempotency key (a fifth
 * twice), every call bounded by a timeout and retried with the same key if it fails. Meanwhile the
 * spec kills Redis at random moments and starts it again on the same port after a random outage,
 * and housekeeping (thresholds of 2 s) runs every second in this process: it re-enqueues the
 * executions whose jobs were lost.
 *
 * Read back: no call hung or failed (start() and signal() commit to the database and enqueue after
 * the commit, so Redis being down costs them nothing); the workers survived; every workflow the
 * sender started finished; each keyed signal stored once and consumed once; never two active
 * executions; no side effect twice except on a recovered execution.
 *
 * Run with each Redis queue adapter, `bull` and `bullmq`.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { sleep, waitUntil } from '../src/bull-wait.js';
import type { DatabaseKind } from '../utils/databases.js';
import { REDIS_ADAPTERS, type RedisAdapter } from '../src/redis-queues.js';
import {
  callProblems,
  describeProof,
  outputOf,
  proofFigures,
  proofSuite,
  scaled,
  sideEffectProblems,
  signalProblems,
  snapshot,
  waitForWorkflows,
} from './src/proof-harness.js';

const WORKERS = scaled(1, 2);
const WORKFLOWS = scaled(60, 300);
const START_GAP_MS = scaled(150, 100);
const OUTAGES = scaled(2, 6);
/**
 * Redis is up for a random time in the first range, then down for one in the second: at most 4 s a
 * cycle, so all the outages fall inside the stream, which the start gaps alone make longer.
 */
const UP_MS = [500, 1_500] as const;
const DOWN_MS = [800, 2_500] as const;
const SETTLE_TIMEOUT_MS = scaled(90_000, 180_000);

const between = ([min, max]: readonly [number, number]) => min + Math.random() * (max - min);

function redisRestartSuite(adapter: RedisAdapter, kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  // chainSteps on, as deployed: the steps a worker chains or starts itself ride out the outages
  // without Redis; the jobs the restarts lose (the sender's, a worker's that went to Redis) come back
  // through housekeeping.
  const suite = proofSuite(kind, entry, children, 'redis', { ownRedis: true, adapter });

  it(`${WORKFLOWS} workflows started and signaled while Redis is killed ${OUTAGES} times: no call hangs, nothing lost, all finish after housekeeping`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const redis = suite.ownRedis!;
    const [sender, ...workers] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    const booted = Date.now();
    const context = () => outputOf(everyone);

    const { sampler, housekeeping } = suite.watch();
    sender.send({ type: 'run', workflows: WORKFLOWS, startGapMs: START_GAP_MS, signalDelayMaxMs: 400, redeliverEvery: 5, callTimeoutMs: 10_000, maxAttempts: 3, retryPauseMs: 200 });

    const outages: Array<{ from: number; to: number }> = [];
    for (let i = 0; i < OUTAGES; i++) {
      await sleep(between(UP_MS));
      if (i === 0) {
        // The first kill loses a job for certain: the queue is paused (a flag the kill drops) until
        // one of the sender's waits in Redis, so housekeeping's recovery is exercised every run.
        await suite.queue().pause();
        await waitUntil('a step job waiting in the paused queue', async () => (await suite.queue().waitingCount()) > 0);
      }
      const from = Date.now();
      await redis.kill();
      await sleep(between(DOWN_MS));
      await redis.up();
      outages.push({ from, to: Date.now() });
    }
    await sender.waitFor('the end of the stream', 'done', SETTLE_TIMEOUT_MS);
    const streamEnded = Date.now();
    const started = sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    await waitForWorkflows(app.dataSource, started, ['finished'], SETTLE_TIMEOUT_MS, context, suite.queue());
    const hk = await housekeeping.stop();
    const sampled = await sampler.stop();
    const snap = await snapshot(app.dataSource);
    const effects = sideEffectProblems(snap, started, ['prepare', 'awaitGo', 'work']);
    const calls = sender.calls();
    const callsDuring = outages.map(({ from, to }) => calls.filter((c) => c.startedAt >= from && c.startedAt <= to).length);
    proofFigures(
      `redis-restart [${adapter}, ${kind}] ${WORKFLOWS} workflows, ${calls.length} calls (longest ${Math.max(...calls.map((c) => c.ms))} ms), outages ${outages.map((o) => o.to - o.from).join(',')} ms ` +
        `with ${callsDuring.join(',')} calls begun in them; housekeeping ${hk.runs} runs (${hk.scheduledRecovered} re-enqueues, ${hk.unrecoverable.length} failed), ` +
        `${snap.executions.filter((e) => e.outcome === 'recovered').length} recovered, ${effects.duplicates} duplicated side effects; ` +
        `boot ${booted - began} ms, stream ${streamEnded - booted} ms, total ${Date.now() - began} ms`,
    );

    // The outages fell inside the stream: calls began while Redis was down.
    expect(callsDuring.every((n) => n > 0)).toBe(true);
    // No call hung or failed: they commit to the database and enqueue after the commit.
    expect(callProblems(calls)).toEqual({ hung: [], failedAttempts: [] });
    expect(started).toHaveLength(WORKFLOWS);
    // The workers rode out every outage.
    expect(workers.map((w) => w.exited)).toEqual(workers.map(() => null));
    expect(hk.errors).toEqual([]);
    // The restarts lost jobs (the first one at least), and housekeeping enqueued their executions again.
    expect(hk.scheduledRecovered).toBeGreaterThan(0);
    // Nothing lost: exactly the started workflows, all finished, each signal once.
    expect(snap.workflows.map((w) => [w.id, w.state])).toEqual(started.map((id) => [id, 'finished']).sort((a, b) => Number(a[0]) - Number(b[0])));
    expect(sampled.violations).toEqual([]);
    expect(signalProblems(snap, started)).toEqual([]);
    expect(effects.problems).toEqual([]);
  }, scaled(180_000, 420_000));
}

describeProof(
  'Redis killed and restarted under a stream of start() and signal()',
  (kind, entry, children) => {
    for (const adapter of REDIS_ADAPTERS) describe(`on ${adapter}`, () => redisRestartSuite(adapter, kind, entry, children));
  },
  false,
);
