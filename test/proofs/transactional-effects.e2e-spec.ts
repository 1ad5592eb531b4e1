/**
 * Transactional effects under faults. Bull worker processes (three; two in the short run) run two
 * workflow classes of the same steps — prepare → awaitGo (waitFor 'go') → book, where awaitGo and
 * book each insert one row into a table with no unique key — started in turn by a sender process that
 * signals each workflow with its idempotency key (a fifth of them twice). LedgerProofWorkflow's two
 * steps are transactional and write through `this.manager`; PlainLedgerProofWorkflow's are plain
 * and write through the DataSource. Meanwhile the spec, at random moments, either SIGKILLs a worker
 * that has steps in hand (and starts a replacement) or terminates a worker's database sessions
 * (PostgreSQL `pg_terminate_backend`, MariaDB `KILL CONNECTION`): those in a transaction when it has
 * any, else all of them. Every termination, and every other SIGKILL, first holds the worker's bodies
 * until a transactional one waits with its row written and uncommitted (the others are let go), so
 * that the fault lands in a transactional body whatever the machine's speed; the body goes on once
 * the sessions are gone. Housekeeping runs every second in this process with stuck thresholds of
 * 5 s: an engine transaction whose COMMIT lost its answer leaves its step to stuck recovery.
 *
 * Read back from the database: every workflow finished, each keyed signal stored and consumed once,
 * never two active executions of one workflow (sampled all along), no call of the sender failed or
 * hung; and for the transactional steps, exactly once: per workflow and step one row, written by its
 * one execution with outcome `success` (rows = successful executions). The plain steps' extra rows
 * are reported, not gated: that is at least once.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { sleep } from '../src/bull-wait.js';
import type { DatabaseKind } from '../utils/databases.js';
import { sessionsOf, terminateSessions } from './src/database-sessions.js';
import { callProblems, describeProof, effectTally, HELD_BODY_WITHIN_MS, outputOf, proofFigures, type ProofChild, proofSuite, scaled, signalProblems, snapshot, waitForWorkflows } from './src/proof-harness.js';
import { LedgerProofWorkflow, PlainLedgerProofWorkflow } from './src/proof-workflows.js';

const WORKERS = scaled(2, 3);
/** Half of them of each class. */
const WORKFLOWS = scaled(40, 400);
const START_GAP_MS = scaled(150, 200);
const EFFECT_STEPS = ['awaitGo', 'book'];
/** Pause between two faults, at random in this range. */
const FAULT_GAP_MS = [150, 600] as const;
/** How long a fault waits for a worker with steps in hand. */
const BUSY_WAIT_MS = 1_000;
/** One fault in SIGKILL_EVERY is a SIGKILL, the others terminate database sessions. */
const SIGKILL_EVERY = 4;
const MIN_SIGKILLS = scaled(2, 15);
/** SIGKILLs while a transactional body of the worker was held, its row uncommitted. */
const MIN_SIGKILLS_IN_BODY = scaled(1, 5);
/** Terminations that found a session of the worker in a transaction while one of its transactional bodies was held. */
const MIN_IN_TRANSACTION = scaled(3, 40);
/** Transactional bodies run again because their transaction was lost before it committed. */
const MIN_RUN_AGAIN = scaled(3, 40);
const SETTLE_TIMEOUT_MS = scaled(120_000, 300_000);

interface Fault {
  kind: 'sigkill' | 'sessions';
  pid: number;
  at: number;
  /** A transactional body of the worker was held, its row written and uncommitted. */
  heldInBody: boolean;
  /** Sessions terminated, and how many of them were in a transaction. */
  sessions: number;
  inTransaction: number;
}

/** Workers with steps in hand, polled for up to BUSY_WAIT_MS until there is one. */
async function busyWorkers(current: () => ProofChild[]): Promise<ProofChild[]> {
  const until = Date.now() + BUSY_WAIT_MS;
  for (;;) {
    const busy = current().filter((w) => w.activeExecutions().length > 0);
    if (busy.length > 0 || Date.now() >= until) return busy;
    await sleep(5);
  }
}

function effectsSuite(kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  // No recovery limit: the faults are the proof's, not a poison step's.
  const suite = proofSuite(kind, entry, children, 'effects', { maxRecoveries: null, stuckThreshold: '5s' });

  it(`${WORKFLOWS} workflows while workers are SIGKILLed and their database sessions terminated: transactional effects exactly once`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const [sender, ...firstWorkers] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    let workers = firstWorkers;
    const booted = Date.now();
    const context = () => outputOf([sender, ...everyone.filter((c) => c.role === 'worker').slice(-6)]);

    const { sampler, housekeeping } = suite.watch();
    sender.send({
      type: 'run',
      workflows: WORKFLOWS,
      classes: [LedgerProofWorkflow.name, PlainLedgerProofWorkflow.name],
      startGapMs: START_GAP_MS,
      signalDelayMaxMs: 400,
      redeliverEvery: 5,
      callTimeoutMs: 15_000,
      maxAttempts: 3,
      retryPauseMs: 200,
    });

    const faults: Fault[] = [];
    const booting = new Set<Promise<void>>();
    const replace = () => {
      const boot: Promise<void> = spawn('worker').then((w) => {
        workers.push(w);
        booting.delete(boot);
      });
      booting.add(boot);
    };
    const sigkills = () => faults.filter((f) => f.kind === 'sigkill').length;
    const sigkillsInBody = () => faults.filter((f) => f.kind === 'sigkill' && f.heldInBody).length;
    const inTransaction = () => faults.filter((f) => f.inTransaction > 0 && f.heldInBody).length;
    const runAgain = () => everyone.flatMap((c) => c.transactionalBodiesRunAgain()).length;
    const enoughFaults = () =>
      sigkills() >= MIN_SIGKILLS && sigkillsInBody() >= MIN_SIGKILLS_IN_BODY && inTransaction() >= MIN_IN_TRANSACTION && runAgain() >= MIN_RUN_AGAIN;
    const pick = (pool: ProofChild[]) => pool[Math.floor(Math.random() * pool.length)];
    // Holds the worker's bodies until a transactional one waits, its row written and not committed.
    const heldInTransactionalBody = async (worker: ProofChild) => (await worker.holdBodyUntil((body) => body.transactional === true, HELD_BODY_WITHIN_MS)) !== undefined;
    // Until the sender is done and the faults are enough (or, after the stream, no worker had work in
    // hand for 5 s: the assertions below then say what was missing).
    let idleSince = Date.now();
    while (sender.of('done').length === 0 || (!enoughFaults() && Date.now() - idleSince < 5_000)) {
      sender.assertAlive('sender');
      await sleep(FAULT_GAP_MS[0] + Math.random() * (FAULT_GAP_MS[1] - FAULT_GAP_MS[0]));
      // Steps are short: on a fast machine a worker is seldom busy at one instant, so each fault
      // waits (a little) for one that is, rather than counting on the moment.
      const busy = await busyWorkers(() => workers);
      if (busy.length > 0) idleSince = Date.now();
      if (busy.length === 0) continue;
      const victim = pick(busy);
      // The first fault and then every SIGKILL_EVERY-th is a SIGKILL, so few faults still kill twice.
      if (sigkills() * SIGKILL_EVERY <= faults.length) {
        if (booting.size >= 2) continue;
        // Every other SIGKILL lands in a held transactional body; the others anywhere in a step's life.
        const heldInBody = sigkills() % 2 === 0 && (await heldInTransactionalBody(victim));
        faults.push({ kind: 'sigkill', pid: victim.pid, at: Date.now(), heldInBody, sessions: 0, inTransaction: 0 });
        victim.child.kill('SIGKILL');
        workers = workers.filter((w) => w !== victim);
        replace();
      } else {
        const heldInBody = await heldInTransactionalBody(victim);
        try {
          const sessions = await sessionsOf(app.dataSource, victim.pid);
          const open = sessions.filter((s) => s.inTransaction);
          const targets = open.length > 0 ? open : sessions;
          const ended = await terminateSessions(app.dataSource, targets);
          faults.push({ kind: 'sessions', pid: victim.pid, at: Date.now(), heldInBody, sessions: ended, inTransaction: open.length > 0 ? ended : 0 });
        } finally {
          // The held bodies go on, on connections that are gone: their transactions must be lost.
          victim.send({ type: 'release-bodies' });
        }
      }
    }
    await Promise.all(booting);
    const chaosMs = Date.now() - booted;

    const started = sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    await waitForWorkflows(app.dataSource, started, ['finished'], SETTLE_TIMEOUT_MS, context, suite.queue());
    const hk = await housekeeping.stop();
    const sampled = await sampler.stop();
    const snap = await snapshot(app.dataSource);

    const ofClass = (name: string) => snap.workflows.filter((w) => w.type === name && started.includes(w.id)).map((w) => w.id);
    const transactional = effectTally(snap, ofClass(LedgerProofWorkflow.name), EFFECT_STEPS);
    const plain = effectTally(snap, ofClass(PlainLedgerProofWorkflow.name), EFFECT_STEPS);
    const extra = (tally: typeof plain) => Object.values(tally.extraByOutcome).reduce((sum, n) => sum + n, 0);
    const recovered = snap.executions.filter((e) => e.outcome === 'recovered').length;
    // Jobs that failed, by error: a plain body's error (its own statement met a killed session) is
    // re-thrown to the job that ran it, its step's or the one a chain started it from, once its
    // reattempt is recorded; a COMMIT whose answer was lost leaves its step to be taken over.
    const failedJobs: Record<string, number> = {};
    for (const job of everyone.flatMap((c) => c.of('job')).filter((j) => j.event === 'failed')) failedJobs[job.error ?? '?'] = (failedJobs[job.error ?? '?'] ?? 0) + 1;
    const terminations = faults.filter((f) => f.kind === 'sessions');
    proofFigures(
      `transactional-effects [${kind}] ${WORKFLOWS} workflows: ${sigkills()} SIGKILLs (${sigkillsInBody()} in a held transactional body), ` +
        `${terminations.length} session terminations (${terminations.reduce((n, f) => n + f.sessions, 0)} sessions, ${terminations.filter((f) => f.inTransaction > 0).length} times in a transaction, ${inTransaction()} of them while a transactional body was held), ` +
        `${runAgain()} transactional bodies run again after a lost transaction; ` +
        `transactional steps: ${transactional.rows} rows = ${transactional.successes} successful executions; ` +
        `plain steps: ${plain.rows} rows for ${plain.successes} successful executions, ${extra(plain)} duplicates ${JSON.stringify(plain.extraByOutcome)}; ` +
        `${recovered} executions recovered (housekeeping ${hk.inProgressRecovered} in progress, ${hk.scheduledRecovered} scheduled, ${hk.runs} runs), jobs failed ${JSON.stringify(failedJobs)}, ${sampled.samples} samples; ` +
        `boot ${booted - began} ms, chaos ${chaosMs} ms, total ${Date.now() - began} ms`,
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
    // Exactly once: one row per workflow and transactional step, its successful execution's.
    expect(transactional.problems).toEqual([]);
    expect(transactional.extraByOutcome).toEqual({});
    expect(transactional.rows).toBe(transactional.successes);
    expect(transactional.rows).toBe(EFFECT_STEPS.length * (WORKFLOWS / 2));
    expect(hk.errors).toEqual([]);
    // The faults were real: workers died, some in a transactional body, sessions were terminated in
    // their transactions, and transactional bodies lost their transaction and ran again.
    expect(sigkills()).toBeGreaterThanOrEqual(MIN_SIGKILLS);
    expect(sigkillsInBody()).toBeGreaterThanOrEqual(MIN_SIGKILLS_IN_BODY);
    expect(inTransaction()).toBeGreaterThanOrEqual(MIN_IN_TRANSACTION);
    expect(runAgain()).toBeGreaterThanOrEqual(MIN_RUN_AGAIN);
  }, scaled(240_000, 900_000));
}

describeProof('Transactional effects under SIGKILLs and terminated database sessions', effectsSuite);
