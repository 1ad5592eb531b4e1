/**
 * The signal-vs-deadline race, with real OS processes on one database and one Bull queue: workflows
 * park on `waitFor: 'go'` with a 3 s `timeout` (onTimeout 'run'); two worker processes run the steps
 * and the deadline jobs (Bull fires each at its `timeout_at`), and a sender process calls `signal()`
 * at the same instant (a self-calibrating offset of a few milliseconds around it). Each time exactly
 * one side must win — never both (one body run, one receipt), never neither (every body runs): a
 * signal that won woke the step and is consumed; a deadline that won ran the body timed out and left
 * the signal buffered (pending, unclaimed). Which side wins how often is the machine's speed's to
 * decide; every interleaving of a signal and a firing deadline is explored, whoever wins, in
 * test/proofs/interleavings.e2e-spec.ts ("signal × a deadline firing"). The step after awaitGo waits
 * an hour, so the workflow stays ongoing and a signal that lost is buffered rather than refused.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs: 200 races per database), the short
 * run otherwise. Runs on every enabled database, SQLite included (the processes share its file).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { IsNull, Not } from 'typeorm';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import Bull from 'bull';
import { Signal, StepExecution, WorkflowService } from 'geneva-drive';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import { sleep, waitUntil } from '../src/bull-wait.js';
import type { DeadlineRaceChildMessage, DeadlineRaceParentMessage } from '../src/deadline-race-process.js';
import { CREATE_DEADLINE_RECEIPTS_TABLE, DEADLINE_RACE_WORKFLOWS, DeadlineRaceWorkflow, readDeadlineReceipts } from '../src/deadline-race-workflows.js';
import { createTestApp, informationLine, type TestApp } from '../src/test-app.js';
import { dataSourceOptions, describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { FULL_SCALE, scaled } from './src/proof-harness.js';

const QUEUE_NAME = 'geneva-drive-deadline-race';
const RACES = scaled(24, 200);
const START_GAP_MS = 10;
const BOOT_TIMEOUT_MS = 60_000;

const children = new Set<ChildProcess>();

type Of<T extends DeadlineRaceChildMessage['type']> = Extract<DeadlineRaceChildMessage, { type: T }>;

class RaceChild extends ChildHandle<DeadlineRaceChildMessage, DeadlineRaceParentMessage> {
  constructor(
    child: ChildProcess,
    readonly role: 'worker' | 'sender',
  ) {
    super(child, children);
  }

  of<T extends DeadlineRaceChildMessage['type']>(type: T): Of<T>[] {
    return (this.messages as DeadlineRaceChildMessage[]).filter((m): m is Of<T> => m.type === type);
  }

  override stop(): Promise<void> {
    return super.stop({ type: 'shutdown' });
  }
}

async function spawnChild(entry: string, role: 'worker' | 'sender', kind: DatabaseKind, prefix: string): Promise<RaceChild> {
  const options = dataSourceOptions(kind);
  const child = forkCompiled(entry, {
    GD_RACE_ROLE: role,
    GD_RACE_DB: kind,
    GD_RACE_REDIS: redisUrl(),
    GD_RACE_PREFIX: prefix,
    GD_RACE_QUEUE: QUEUE_NAME,
    ...(options.type === 'better-sqlite3' ? { GD_RACE_SQLITE_FILE: String(options.database) } : {}),
  });
  const handle = new RaceChild(child, role);
  await waitUntil(`ready from ${role} ${handle.pid}`, () => {
    handle.assertAlive(role);
    return handle.of('ready').length > 0;
  }, { timeoutMs: BOOT_TIMEOUT_MS, intervalMs: 20 });
  return handle;
}

function deadlineRaceSuite(kind: DatabaseKind, entry: () => string): void {
  const prefix = `gd-e2e-deadline-race-${process.pid}-${Date.now()}-${kind}`;
  let admin: Bull.Queue;
  let app: TestApp;
  let workers: RaceChild[] = [];
  let sender: RaceChild;

  beforeAll(async () => {
    admin = new Bull(QUEUE_NAME, redisUrl(), { prefix });
    await admin.obliterate({ force: true });
    // Enqueue-only: this process starts workflows; the worker processes run them and their deadlines.
    app = await createTestApp(kind, DEADLINE_RACE_WORKFLOWS, { queue: { adapter: 'bull', redis: redisUrl(), prefix, name: QUEUE_NAME, concurrency: 0 } });
    await app.dataSource.query(CREATE_DEADLINE_RECEIPTS_TABLE);
    const spawned = await Promise.all([spawnChild(entry(), 'worker', kind, prefix), spawnChild(entry(), 'worker', kind, prefix), spawnChild(entry(), 'sender', kind, prefix)]);
    workers = spawned.slice(0, 2);
    sender = spawned[2];
  }, 120_000);

  afterAll(async () => {
    await Promise.all([...workers, sender].filter(Boolean).map((c) => c.stop()));
    await app?.close();
    await admin?.obliterate({ force: true });
    await admin?.close();
  });

  const childOutput = () => [...workers, sender].map((c) => `--- ${c.role} ${c.pid}\n${c.output}`).join('\n');

  it(`${RACES} signals fired at the instant of their step's deadline: exactly one side wins each time`, async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    // One save per hero: every id is the row's own, whatever the driver reports for a batch.
    const saved: TestHero[] = [];
    for (let i = 0; i < RACES; i++) saved.push(await heroes.save(heroes.create({ name: `hero ${i}` })));
    const ids: string[] = [];
    // Started while the loop below already watches for parks, so no deadline passes unannounced.
    const starting = (async () => {
      for (const hero of saved) {
        ids.push((await workflows.start(DeadlineRaceWorkflow, hero)).id);
        await sleep(START_GAP_MS);
      }
    })();

    // As each step parks, tell the sender its deadline: the signal is fired at that instant. Read
    // whatever state the step is in by now: on a loaded machine a deadline may pass before this
    // loop sees the park (the sender then fires at once, late; the invariants hold all the same).
    const told = new Set<string>();
    const executions = app.dataSource.getRepository(StepExecution);
    await waitUntil(
      'every step to park',
      async () => {
        for (const child of [sender, ...workers]) child.assertAlive(child.role);
        const parked = await executions.find({ where: { stepName: 'awaitGo', timeoutAt: Not(IsNull()) }, select: { id: true, workflowId: true, timeoutAt: true } });
        for (const row of parked) {
          if (told.has(row.workflowId) || !row.timeoutAt) continue;
          told.add(row.workflowId);
          sender.send({ type: 'signal', workflowId: row.workflowId, deadline: row.timeoutAt.getTime() });
        }
        return told.size === RACES;
      },
      { timeoutMs: 120_000, intervalMs: 20 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${childOutput()}`);
    });
    await starting;

    // Each race is over once its body ran (a receipt) and its signal call returned.
    await waitUntil(
      `${RACES} races to end`,
      async () => (await readDeadlineReceipts(app.dataSource)).length >= RACES && sender.of('sent').length === RACES,
      { timeoutMs: 120_000, intervalMs: 100 },
    ).catch(async (error: Error) => {
      const states = await app.dataSource.query(`SELECT step_name, state, COUNT(*) AS n FROM geneva_drive_step_executions GROUP BY step_name, state`);
      throw new Error(`${error.message}\nexecution states ${JSON.stringify(states)}; sent ${sender.of('sent').length}\n${childOutput()}`);
    });
    await sleep(300); // a stray second run of a body would show now

    // ---- the sender: every call answered; it either woke the step or found it gone and buffered.
    const calls = sender.of('sent').map((m) => m.call);
    expect(calls.filter((c) => c.error)).toEqual([]);
    const callOf = new Map(calls.map((c) => [c.workflowId, c]));
    expect(callOf.size).toBe(RACES);

    // ---- one receipt per workflow: the body ran exactly once.
    const receipts = await readDeadlineReceipts(app.dataSource);
    expect(receipts).toHaveLength(RACES);
    expect(new Set(receipts.map((r) => r.workflowId))).toEqual(new Set(ids));

    // ---- the database agrees with the receipt, workflow by workflow.
    const signalRows = await app.dataSource.getRepository(Signal).find();
    const signalOf = new Map(signalRows.map((s) => [s.workflowId, s]));
    const awaitRows = await executions.find({ where: { stepName: 'awaitGo' } });
    const awaitOf = new Map(awaitRows.map((e) => [e.workflowId, e]));
    expect(awaitRows).toHaveLength(RACES);
    const wrong: unknown[] = [];
    let signalWins = 0;
    let deadlineWins = 0;
    for (const receipt of receipts) {
      const call = callOf.get(receipt.workflowId)!;
      const signal = signalOf.get(receipt.workflowId)!;
      const execution = awaitOf.get(receipt.workflowId)!;
      const view = { receipt, call, signal: { state: signal.state, claimed: Number(signal.claimed), consumed: Number(signal.consumed) }, execution: { state: execution.state, outcome: execution.outcome, signalId: execution.signalId, timedOut: execution.metadata?.timedOut ?? false } };
      if (receipt.winner === 'timed_out') {
        deadlineWins++;
        const ok = call.state === 'pending' && signal.state === 'pending' && view.signal.claimed === 0 && execution.signalId === null && view.execution.timedOut === true;
        if (!ok) wrong.push(view);
      } else {
        signalWins++;
        const ok = receipt.winner === String(signal.id) && call.state === 'claimed' && signal.state === 'consumed' && view.signal.claimed === 1 && view.signal.consumed === 1 && execution.signalId === String(signal.id) && view.execution.timedOut === false;
        if (!ok) wrong.push(view);
      }
      if (execution.state !== 'completed' || execution.outcome !== 'success') wrong.push(view);
    }
    expect(wrong).toEqual([]);
    expect(signalWins + deadlineWins).toBe(RACES);

    // ---- no job failed; every workflow ran awaitGo once and holds its next step.
    expect(workers.flatMap((w) => w.of('job')).filter((m) => m.event === 'failed')).toEqual([]);
    expect(await executions.count()).toBe(2 * RACES);
    expect(await executions.count({ where: { stepName: 'hold', state: 'scheduled' } })).toBe(RACES);

    const offsets = calls.map((c) => c.offsetMs);
    const late = offsets.filter((offset) => offset > 250).length;
    informationLine(
      `deadline-race [${kind}]: ${RACES} races — the signal won ${signalWins}, the deadline ${deadlineWins}; ` +
        `signal offsets ${Math.min(...offsets).toFixed(1)}..${Math.max(...offsets).toFixed(1)} ms around the deadline, ${late} told too late to aim`,
    );
  }, 300_000);
}

if (redisAvailable()) {
  const buildDir = path.join(ROOT, '.tmp', `deadline-race-build-${process.pid}`);
  let entry = '';
  beforeAll(async () => {
    entry = await compileChildEntry('test/tsconfig.deadline-race.json', buildDir, 'test/src/deadline-race-process.js');
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL'); // only if a suite's afterAll could not stop it
    await rm(buildDir, { recursive: true, force: true });
  });
  describeEachDatabase('signal vs deadline race across processes', (kind) => deadlineRaceSuite(kind, () => entry));
} else {
  const reason = `Redis not reachable at ${process.env.GD_REDIS_URL ?? 'redis://127.0.0.1:6379'}`;
  console.warn(`deadline-race.e2e-spec: ${reason} — race skipped (set GENEVA_DRIVE_TEST_REQUIRE=redis to make this a failure)`);
  describe.skip(`signal vs deadline race across processes (skipped: ${reason})`, () =>
    describeEachDatabase('signal vs deadline race across processes', (kind) => deadlineRaceSuite(kind, () => '')),
  );
}
