/**
 * Child workflows across a real crash: a worker process is SIGKILLed after its fan-out body called
 * startChild (the children declared, in memory) and before the step's outcome was committed. The
 * kill is not timed: the body reports its handles over IPC and waits for a go-ahead, and the spec
 * kills the process on that report. Housekeeping (in this process, stuckInProgressThreshold 1 ms)
 * recovers the execution; a second worker process runs the step again, and the children exist once
 * each, under the keys the killed run declared (positional and explicit), none of them written by
 * the killed run, and the parent's fan-in completes with all of them.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HousekeepingService, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { waitUntil } from '../src/bull-wait.js';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import type { ChildKillParentMessage, ChildKillWorkerMessage } from '../src/child-kill-worker.js';
import { CRASH_CHILD_WORKFLOWS, CrashFanOutWorkflow, leafName } from '../src/child-kill-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { dataSourceOptions, describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/** Bounds for a loaded machine, not verdicts: a worker boots in about a second. */
const BOOT_TIMEOUT_MS = 60_000;
const FINISH_TIMEOUT_MS = 30_000;
const LEAVES = 4;

const children = new Set<ChildProcess>();
const buildDir = path.join(ROOT, '.tmp', `child-kill-worker-${process.env.JEST_WORKER_ID ?? '0'}-${process.pid}`);
let entry = '';

beforeAll(async () => {
  // A tsconfig of this run only: the worker entry and what it imports, compiled to plain ESM (no type check).
  await mkdir(buildDir, { recursive: true });
  const tsconfig = path.join(buildDir, 'tsconfig.json');
  await writeFile(tsconfig, JSON.stringify({ extends: path.join(ROOT, 'test/tsconfig.worker.json'), files: [path.join(ROOT, 'test/src/child-kill-worker.ts')], include: [] }));
  entry = await compileChildEntry(path.relative(ROOT, tsconfig), path.join(buildDir, 'out'), 'test/src/child-kill-worker.js');
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL'); // only if a test could not stop it
  await rm(buildDir, { recursive: true, force: true });
});

class Worker extends ChildHandle<ChildKillWorkerMessage, ChildKillParentMessage> {
  /** The children its fan-out body declared, once it reports them (it then waits for a go-ahead). */
  declared() {
    return waitUntil(
      `the fan-out body in worker ${this.pid} to declare its children`,
      () => {
        this.assertAlive('worker');
        return this.messages.find((message) => message.type === 'declared') ?? null;
      },
      { timeoutMs: BOOT_TIMEOUT_MS, intervalMs: 10 },
    );
  }

  kill(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    return exited;
  }
}

function spawnWorker(kind: DatabaseKind): Worker {
  const options = dataSourceOptions(kind);
  return new Worker(
    forkCompiled(entry, { GD_CHILD_KILL_DB: kind, ...(options.type === 'better-sqlite3' ? { GD_CHILD_KILL_SQLITE_FILE: String(options.database) } : {}) }),
    children,
  );
}

describeEachDatabase('child workflows across a worker SIGKILLed between the fan-out body and its commit', (kind) => {
  let app: TestApp;

  beforeAll(async () => {
    // The manual queue: nothing runs in this process; housekeeping runs when the test calls it.
    app = await createTestApp(kind, CRASH_CHILD_WORKFLOWS, { stuckInProgressThreshold: 1 });
  }, 60_000);
  afterAll(() => app?.close());

  it('the recovered step starts each child once, under the keys the killed run declared; the fan-in completes with all of them', async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const allWorkflows = () => app.dataSource.getRepository(WorkflowRecord).find({ order: { id: 'ASC' } });
    const history = async (id: string) => (await workflows.executionHistory(id)).map((e) => [e.stepName, e.state, e.outcome]);

    const parentHero = await heroes.save(heroes.create({ name: `order ${kind}` }));
    const leaves: TestHero[] = [];
    for (let i = 0; i < LEAVES; i++) leaves.push(await heroes.save(heroes.create({ name: leafName(parentHero.name, i) })));
    const parent = await workflows.start(CrashFanOutWorkflow, parentHero);
    // Positional keys for even positions, explicit ones for odd: both must survive the re-run.
    const keys = leaves.map((leaf, index) => (index % 2 === 1 ? `parcel-${leaf.id}` : String(index)));

    // The first worker runs the fan-out body up to its hold, and dies there.
    const killed = spawnWorker(kind);
    const first = await killed.declared();
    expect(first.handles).toEqual(keys.map((key) => ({ key, id: null })));
    expect(await allWorkflows()).toEqual([expect.objectContaining({ id: parent.id })]);
    await killed.kill();
    expect(killed.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await workflows.currentExecution(parent)).toMatchObject({ id: first.executionId, stepName: 'fanOut', state: 'in_progress' });
    expect(await allWorkflows()).toEqual([expect.objectContaining({ id: parent.id })]);

    // Housekeeping closes the dead run as recovered and schedules a successor.
    const housekeeping = app.moduleRef.get(HousekeepingService);
    await waitUntil('housekeeping to recover the killed run', async () => (await housekeeping.run()).stuckInProgressRecovered === 1);
    expect(await history(parent.id)).toEqual([
      ['fanOut', 'completed', 'recovered'],
      ['fanOut', 'scheduled', null],
    ]);
    expect(await allWorkflows()).toEqual([expect.objectContaining({ id: parent.id })]);

    // A new worker runs the step again: the same keys, still nothing written before its commit.
    const successor = spawnWorker(kind);
    try {
      const second = await successor.declared();
      expect(second.executionId).not.toBe(first.executionId);
      expect(second.handles).toEqual(first.handles);
      expect(await allWorkflows()).toEqual([expect.objectContaining({ id: parent.id })]);
      successor.send({ type: 'proceed', executionId: second.executionId });

      const done = await waitUntil(
        'the parent to finish (or pause)',
        async () => {
          const row = await workflows.find(parent.id);
          return row.state === 'finished' || row.state === 'paused' || successor.exited ? row : null;
        },
        { timeoutMs: FINISH_TIMEOUT_MS, intervalMs: 20 },
      );
      expect({ state: done.state, output: done.state === 'finished' ? '' : successor.output }).toEqual({ state: 'finished', output: '' });

      // Each child once, under its declared key, for its own leaf; no other workflow anywhere.
      const rows = await allWorkflows();
      const started = rows.filter((row) => row.id !== parent.id);
      expect(started.map((row) => [row.type, row.parentId, row.parentStepName, row.childKey, row.heroId, row.state])).toEqual(
        leaves.map((leaf, index) => ['CrashLeaf', parent.id, 'fanOut', keys[index], String(leaf.id), 'finished']),
      );
      for (const child of started) expect(await history(child.id)).toEqual([['ship', 'completed', 'success']]);
      expect(await history(parent.id)).toEqual([
        ['fanOut', 'completed', 'recovered'],
        ['fanOut', 'completed', 'success'],
        ['fanIn', 'completed', 'success'],
      ]);
      expect((await workflows.executionHistory(parent.id)).slice(0, 2).map((e) => e.id)).toEqual([first.executionId, second.executionId]);
      // The fan-in saw every child, ended, with its result.
      expect(done.result).toEqual({
        children: started.map((child, index) => ({ id: child.id, key: keys[index], state: 'finished', result: { leaf: leaves[index].name } })),
      });
    } finally {
      await successor.stop({ type: 'shutdown' });
    }
    expect(successor.exited).toEqual({ code: 0, signal: null });
  }, BOOT_TIMEOUT_MS * 2 + FINISH_TIMEOUT_MS);
});
