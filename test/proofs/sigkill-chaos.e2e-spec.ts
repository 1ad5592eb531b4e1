/**
 * SIGKILL chaos. Bull worker processes (three; two in the short run) run ProofWorkflow (prepare,
 * started again in-process by the worker after its first execution asks for it → awaitGo waiting for
 * its signal → work, chained inline) with `chainSteps` on, while a separate sender process starts
 * workflows and signals each one with its idempotency key (a fifth of them twice). The spec SIGKILLs
 * a worker that has steps in hand at random moments (every other kill one running a step body that
 * no Redis job covers: chained inline or started in-process) and starts a replacement. Housekeeping
 * runs every second in this process with stuck thresholds of an hour: it recovers nothing here, so
 * every step a kill interrupts comes back through the takeover of the dead worker's runs (Bull's
 * stalled-job check for its Redis jobs, the run ledger's lease for the rest).
 *
 * Read back from the database: every workflow finished; every step a kill interrupted finished
 * within 60 s of the kill; housekeeping recovered nothing; each keyed signal stored once, consumed
 * once, with `claimed` equal to the executions pinned to it less those recovered (a recovered
 * execution's successor inherits the pin without a new claim); never two active executions of one
 * workflow (sampled all along); side effects written twice only by executions that were recovered;
 * no call of the sender failed or hung.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { sleep } from '../src/bull-wait.js';
import type { DatabaseKind } from '../utils/databases.js';
import {
  callProblems,
  describeProof,
  outputOf,
  proofFigures,
  type ProofChild,
  type ProofSnapshot,
  proofSuite,
  scaled,
  sideEffectProblems,
  signalProblems,
  snapshot,
  waitForWorkflows,
} from './src/proof-harness.js';

const WORKERS = scaled(2, 3);
const WORKFLOWS = scaled(30, 400);
/** Pace of the starts: on a small machine shared with other runs, a faster stream saturates the workers, and a step interrupted by a kill then waits behind the backlog, whatever brought it back. */
const START_GAP_MS = scaled(150, 200);
const MIN_KILLS = scaled(2, 20);
/** Pause between two kills, at random in this range (a kill also waits for the last replacement to be up). */
const KILL_GAP_MS = [300, 1_200] as const;
const SETTLE_TIMEOUT_MS = scaled(90_000, 240_000);
/** How long a kill meant for a body no Redis job covers waits for a worker to start one. */
const UNCOVERED_BODY_WITHIN_MS = 15_000;
/** Every step a kill interrupts finishes within this of the kill. */
const TAKEN_OVER_WITHIN_MS = 60_000;

interface Kill {
  pid: number;
  at: number;
  /** The executions the worker had in hand: its Redis jobs' and those whose body ran. */
  inHand: string[];
  midBody: boolean;
  /** A body ran that no Redis job of the worker covered (chained inline, or started in-process). */
  withoutJob: boolean;
}

function chaosSuite(kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  // No recovery limit: the kills are the proof's, not a poison step's. Near the end of a run the one
  // workflow still active is the one each kill hits, and the limit would pause it after three.
  // Stuck thresholds of an hour: housekeeping is not what brings the killed workers' steps back.
  const suite = proofSuite(kind, entry, children, 'chaos', { maxRecoveries: null, stuckThreshold: '1h' });

  it(`${WORKFLOWS} workflows while workers are SIGKILLed and restarted: all finish, signals once, duplicates only on recovered executions`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const [sender, ...firstWorkers] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    let workers = firstWorkers;
    const booted = Date.now();
    const context = () => outputOf([sender, ...everyone.filter((c) => c.role === 'worker').slice(-6)]);

    const { sampler, housekeeping } = suite.watch();
    sender.send({ type: 'run', workflows: WORKFLOWS, startGapMs: START_GAP_MS, signalDelayMaxMs: 400, redeliverEvery: 5, callTimeoutMs: 15_000, maxAttempts: 3, retryPauseMs: 200 });

    // Kill a worker that has steps in hand and start its replacement, again and again until the sender
    // is done; replacements boot in the background (two at most at once).
    const kills: Kill[] = [];
    const booting = new Set<Promise<void>>();
    const replace = () => {
      const boot: Promise<void> = spawn('worker').then((w) => {
        workers.push(w);
        booting.delete(boot);
      });
      booting.add(boot);
    };
    // Until the sender is done and there were MIN_KILLS kills, one at least in a body no Redis job
    // covers (or, after the stream, no worker had work in hand for 5 s: the assertions below then say so).
    let idleSince = Date.now();
    const enoughKills = () => kills.length >= MIN_KILLS && kills.some((kill) => kill.midBody) && kills.some((kill) => kill.withoutJob);
    const bodiesWithoutJob = (w: ProofChild) => {
      const jobs = new Set(w.activeJobExecutions());
      return w.bodiesInFlight().filter((id) => !jobs.has(id));
    };
    const pick = (pool: ProofChild[]) => pool[Math.floor(Math.random() * pool.length)];
    // Holds the bodies a busy worker starts until one that none of its Redis jobs covers waits (those
    // a job covers are let go): the kill then lands in that body whatever the machine's speed.
    // Undefined when no such body came within the time (no work left for it).
    const heldInUncoveredBody = async (busy: ProofChild[]): Promise<ProofChild | undefined> => {
      const worker = pick(busy);
      if ((await worker.holdBodyUntil((body) => !worker.activeJobExecutions().includes(body.executionId), UNCOVERED_BODY_WITHIN_MS)) !== undefined) return worker;
      worker.send({ type: 'release-bodies' });
      return undefined;
    };
    while (sender.of('done').length === 0 || (!enoughKills() && Date.now() - idleSince < 5_000)) {
      sender.assertAlive('sender');
      await sleep(KILL_GAP_MS[0] + Math.random() * (KILL_GAP_MS[1] - KILL_GAP_MS[0]));
      const busy = workers.filter((w) => w.activeExecutions().length > 0);
      if (busy.length > 0) idleSince = Date.now();
      if (busy.length === 0 || booting.size >= 2) continue;
      // Every other kill lands in a body no Redis job covers, held there until the kill; the others
      // anywhere in a step's life: before it started, in its body, or after its outcome committed.
      const victim = kills.length % 2 === 0 ? ((await heldInUncoveredBody(busy)) ?? pick(busy)) : pick(busy);
      kills.push({
        pid: victim.pid,
        at: Date.now(),
        inHand: victim.activeExecutions(),
        midBody: victim.bodiesInFlight().length > 0,
        withoutJob: bodiesWithoutJob(victim).length > 0,
      });
      victim.child.kill('SIGKILL');
      workers = workers.filter((w) => w !== victim);
      replace();
    }
    await Promise.all(booting);
    const chaosMs = Date.now() - booted;

    const started = sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    await waitForWorkflows(app.dataSource, started, ['finished'], SETTLE_TIMEOUT_MS, context, suite.queue());
    const hk = await housekeeping.stop();
    const sampled = await sampler.stop();
    const snap = await snapshot(app.dataSource);

    const recovered = snap.executions.filter((e) => e.outcome === 'recovered');
    const late = lateAfterKills(snap, kills);
    const effects = sideEffectProblems(snap, started, ['prepare', 'awaitGo', 'work']);
    const workerJobFailures = everyone.flatMap((c) => c.of('job')).filter((j) => j.event === 'failed');
    proofFigures(
      `sigkill-chaos [${kind}] ${WORKFLOWS} workflows: ${kills.length} kills (steps in hand ${kills.map((k) => `${k.inHand.length}${k.withoutJob ? '+' : k.midBody ? '*' : ''}`).join(',')}; * in a body, + in one no Redis job covers), ` +
        `slowest takeover ${late.slowestMs} ms after its kill, ` +
        `${recovered.length} executions recovered, ${effects.duplicates} duplicated side effects, ${sampled.samples} samples, ` +
        `housekeeping ${hk.runs} runs; boot ${booted - began} ms, chaos ${chaosMs} ms, total ${Date.now() - began} ms`,
    );

    // Every call of the sender worked the first time, none hung.
    expect(callProblems(sender.calls())).toEqual({ hung: [], failedAttempts: [] });
    expect(started).toHaveLength(WORKFLOWS);
    // Exactly the started workflows exist, all finished, nothing active left.
    expect(snap.workflows.map((w) => [w.id, w.state])).toEqual(started.map((id) => [id, 'finished']).sort((a, b) => Number(a[0]) - Number(b[0])));
    expect(snap.executions.filter((e) => ['scheduled', 'waiting', 'in_progress'].includes(e.state))).toEqual([]);
    expect(sampled.samples).toBeGreaterThan(20);
    expect(sampled.violations).toEqual([]);
    expect(signalProblems(snap, started)).toEqual([]);
    expect(effects.problems).toEqual([]);
    // A job that failed in a worker is an engine error surfacing (no body throws).
    expect(workerJobFailures).toEqual([]);
    // The chaos was real: workers died with steps in hand, in bodies no Redis job covered among them.
    expect(kills.length).toBeGreaterThanOrEqual(MIN_KILLS);
    expect(kills.some((kill) => kill.withoutJob)).toBe(true);
    expect(recovered.length).toBeGreaterThan(0);
    // Every step a kill interrupted finished within a minute of it, and none of it was housekeeping's.
    expect(late.problems).toEqual([]);
    expect({ inProgress: hk.inProgressRecovered, scheduled: hk.scheduledRecovered }).toEqual({ inProgress: 0, scheduled: 0 });
    expect(hk.errors).toEqual([]);
  }, scaled(180_000, 600_000));
}

/**
 * The steps the kills interrupted that did not finish within TAKEN_OVER_WITHIN_MS of their kill: for
 * each execution a killed worker had in hand, the successful execution of its workflow's step must
 * have finished by then. Also the slowest such finish, from its kill.
 */
function lateAfterKills(snap: ProofSnapshot, kills: Kill[]): { problems: string[]; slowestMs: number } {
  const byId = new Map(snap.executions.map((e) => [e.id, e]));
  const problems: string[] = [];
  let slowestMs = 0;
  for (const kill of kills) {
    for (const id of kill.inHand) {
      const execution = byId.get(id);
      if (!execution) continue;
      const done = snap.executions.find((e) => e.workflowId === execution.workflowId && e.stepName === execution.stepName && e.outcome === 'success');
      const finishedMs = done?.finishedAt ? done.finishedAt.getTime() - kill.at : Infinity;
      slowestMs = Math.max(slowestMs, finishedMs);
      if (finishedMs > TAKEN_OVER_WITHIN_MS) {
        problems.push(`worker ${kill.pid} killed with execution ${id} (${execution.stepName} of workflow ${execution.workflowId}) in hand: ${done ? `finished ${finishedMs} ms later` : 'never finished'}`);
      }
    }
  }
  return { problems, slowestMs };
}

describeProof('SIGKILL chaos across Bull worker processes', chaosSuite);
