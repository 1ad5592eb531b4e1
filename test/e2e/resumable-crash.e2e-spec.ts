/**
 * Crash proof for resumable steps: a worker in its own OS process walks 10,000 rows with
 * `overRecords`, is killed with SIGKILL half way, housekeeping recovers the execution it left
 * `in_progress` into a successor that continues from the last persisted cursor, and a second worker
 * process finishes the walk.
 *
 * The at-least-once window. The step commits an item's side effect (its crash_progress row) and
 * only then checkpoints the item's id as the cursor (`overRecords` calls `set(id)` after the loop
 * body returns). A process killed between the two leaves an item done but not checkpointed; the
 * successor starts after the last *persisted* cursor and does that item again. So the items done
 * twice must be exactly those the killed execution did beyond its own persisted cursor — at most
 * the one item in flight, since every item is checkpointed — and no other item may be done twice
 * or skipped.
 *
 * Runtime: each checkpoint is an UPDATE plus a state read, each item an INSERT, so 10,000 items cost
 * a few seconds on SQLite and some 15-40 s on PostgreSQL/MariaDB. The bounds on every wait are
 * generous so that a machine busy with other test runs makes the proof slower, not red.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { HousekeepingService, StepExecution, WorkflowService } from 'geneva-drive';
import { sleep, waitFor } from '../src/resumable-app.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { CRASH_CHUNK, CRASH_ENTITIES, CrashWalkWorkflow, createCrashTables } from '../src/resumable-crash.js';
import { dataSourceOptions, describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const ITEMS = 10_000;
/** Kill once this many items are recorded: early in the second execution of the chain (CRASH_CHUNK 3,000), far from its end. */
const KILL_AFTER = 3_200;

/** The worker entry, compiled once per run of this file (ts-node is not used: plain tsc into .tmp). */
let workerEntry: string;
let buildDir: string;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  buildDir = `${ROOT}.tmp/resumable-worker-${process.env.JEST_WORKER_ID ?? '0'}-${process.pid}/`;
  await mkdir(buildDir, { recursive: true });
  await writeFile(
    `${buildDir}tsconfig.json`,
    JSON.stringify({
      extends: `${ROOT}tsconfig.json`,
      compilerOptions: { outDir: `${buildDir}out`, rootDir: ROOT, noEmit: false, incremental: false, declaration: false, sourceMap: false, noCheck: true },
      files: [`${ROOT}test/src/resumable-worker.ts`],
      include: [],
    }),
  );
  await promisify(execFile)(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-p', `${buildDir}tsconfig.json`], { cwd: ROOT, timeout: 90_000 });
  workerEntry = `${buildDir}out/test/src/resumable-worker.js`;
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (buildDir) await rm(buildDir, { recursive: true, force: true });
});

/** A worker process on `kind`, with its output kept for failure messages. */
function startWorker(kind: DatabaseKind): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const sqliteFile = kind === 'sqlite' ? (dataSourceOptions('sqlite') as { database: string }).database : '';
  const child = spawn(process.execPath, [workerEntry], {
    cwd: ROOT,
    env: { ...process.env, GD_CRASH_DB: kind, GD_CRASH_SQLITE_FILE: sqliteFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => (children.delete(child), resolve(code))));
  return { child, output: () => output, exited };
}

async function bounded<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms: ${what}`)), ms)));
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describeEachDatabase('resumable crash proof', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, [CrashWalkWorkflow], { entities: CRASH_ENTITIES, stuckInProgressThreshold: 1 });
    workflows = app.moduleRef.get(WorkflowService);
    const queryRunner = app.dataSource.createQueryRunner();
    try {
      await createCrashTables(queryRunner, ITEMS);
    } finally {
      await queryRunner.release();
    }
  }, 60_000);
  afterAll(() => app?.close());

  const progressCount = async () => Number((await app.dataSource.query('SELECT COUNT(*) AS n FROM crash_progress'))[0].n);

  it(`SIGKILL mid-walk over ${ITEMS} rows: housekeeping continues from the cursor, only the unpersisted item runs twice`, async () => {
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await workflows.start(CrashWalkWorkflow, await heroes.save(heroes.create({ name: 'crash' })));

    // 1. The first worker walks until the progress table shows a few thousand items, then dies.
    const first = startWorker(kind);
    await waitFor(
      `${KILL_AFTER} items processed by the first worker`,
      async () => {
        if (first.child.exitCode !== null) throw new Error(`worker exited early (${first.child.exitCode}):\n${first.output()}`);
        return (await progressCount()) >= KILL_AFTER;
      },
      { timeoutMs: 90_000, everyMs: 25 },
    );
    process.kill(first.child.pid!, 'SIGKILL');
    await bounded('the killed worker to exit', first.exited, 10_000);
    const atKill = await progressCount();
    expect(atKill).toBeLessThan(ITEMS);

    // 2. It left its execution in_progress, with the cursor of its last checkpoint.
    const beforeRecovery = await workflows.executionHistory(wf);
    const stuck = beforeRecovery.filter((e) => e.state === 'in_progress');
    expect(stuck).toHaveLength(1);
    expect(stuck[0]).toMatchObject({ stepName: 'walk' });
    expect(typeof stuck[0].cursor).toBe('number');

    // 3. Housekeeping (stuckInProgressThreshold: 1 ms) closes it as recovered, with a successor from its cursor.
    await sleep(20);
    const summary = await app.moduleRef.get(HousekeepingService).run();
    expect(summary).toMatchObject({ stuckInProgressRecovered: 1, unrecoverable: [] });
    const recovered = await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: stuck[0].id });
    expect([recovered.state, recovered.outcome]).toEqual(['completed', 'recovered']);
    const successor = (await workflows.currentExecution(wf))!;
    expect(successor).toMatchObject({ stepName: 'walk', state: 'scheduled', continuesFromId: recovered.id, cursor: recovered.cursor });

    // 4. A second worker process picks the successor up (the local queue rebuilds from the database) and finishes.
    const second = startWorker(kind);
    await waitFor(
      'the workflow to finish in the second worker',
      async () => {
        if (second.child.exitCode !== null) throw new Error(`worker exited early (${second.child.exitCode}):\n${second.output()}`);
        return (await workflows.find(wf.id)).state === 'finished';
      },
      { timeoutMs: 150_000, everyMs: 50 },
    );
    second.child.kill('SIGTERM');
    await bounded('the second worker to shut down on SIGTERM', second.exited, 15_000).catch((error) => {
      second.child.kill('SIGKILL');
      throw error;
    });

    // 5. The record: the chain, and who processed what.
    const chain = (await workflows.executionHistory(wf)).filter((e) => e.stepName === 'walk');
    const rows: Array<{ item_id: number | string; execution_id: string }> = await app.dataSource.query('SELECT item_id, execution_id FROM crash_progress');
    const itemIds: number[] = (await app.dataSource.query('SELECT id FROM crash_items ORDER BY id')).map((r: { id: number | string }) => Number(r.id));
    const byExecution = new Map<string, number[]>();
    const timesDone = new Map<number, number>();
    for (const row of rows) {
      const item = Number(row.item_id);
      byExecution.set(String(row.execution_id), [...(byExecution.get(String(row.execution_id)) ?? []), item]);
      timesDone.set(item, (timesDone.get(item) ?? 0) + 1);
    }

    // Every row was processed at least once.
    expect(itemIds).toHaveLength(ITEMS);
    expect(itemIds.filter((id) => !timesDone.has(id))).toEqual([]);

    // The chain: completed executions linked by continuesFromId, exactly one recovered, the last a success.
    expect(chain.length).toBeGreaterThanOrEqual(4);
    chain.forEach((execution, i) => {
      expect(execution.state).toBe('completed');
      expect(execution.continuesFromId).toBe(i === 0 ? null : chain[i - 1].id);
    });
    expect(chain.filter((e) => e.outcome === 'recovered').map((e) => e.id)).toEqual([recovered.id]);
    expect(chain.findIndex((e) => e.outcome === 'recovered')).toBeGreaterThan(0); // the chain had moved on before the kill
    expect(chain.at(-1)!.outcome).toBe('success');
    expect(chain.slice(0, -1).every((e) => e.outcome === 'continued' || e.outcome === 'recovered')).toBe(true);
    expect(chain.at(-1)!.cursor).toBe(itemIds.at(-1));

    // Each execution did exactly the items after the cursor it started from, up to its own persisted
    // cursor — except the killed one, which may also have done items beyond its last checkpoint.
    let window: number[] = [];
    chain.forEach((execution, i) => {
      const startedAfter = i === 0 ? 0 : (chain[i - 1].cursor as number);
      const done = (byExecution.get(execution.id) ?? []).sort((a, b) => a - b);
      const upToCursor = itemIds.filter((id) => id > startedAfter && id <= (execution.cursor as number));
      expect(done.filter((id) => id <= (execution.cursor as number))).toEqual(upToCursor);
      const beyond = done.filter((id) => id > (execution.cursor as number));
      if (execution.id === recovered.id) window = beyond;
      else expect(beyond).toEqual([]);
      if (execution.outcome === 'continued') expect(done).toHaveLength(CRASH_CHUNK);
    });
    // The at-least-once window: only the item in flight when the process died (checkpoints are per item).
    expect(window.length).toBeLessThanOrEqual(1);
    const doneTwice = [...timesDone].filter(([, times]) => times > 1).map(([id]) => id).sort((a, b) => a - b);
    expect(doneTwice).toEqual(window);
    expect([...timesDone.values()].every((times) => times <= 2)).toBe(true);
    expect(rows.length).toBe(ITEMS + window.length);
  }, 300_000);
});
