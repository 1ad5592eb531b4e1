/**
 * Poison-step proof: a step whose body kills the worker process running it (SIGKILL, as an
 * out-of-memory kill or a native crash would). Each worker, a real OS process, picks the scheduled
 * execution up, starts the body and dies; housekeeping (stuckInProgressThreshold 1 ms, in this
 * process) recovers the execution it left `in_progress` into a successor, and the next worker dies
 * the same way. After `maxRecoveries` (2) recoveries in a row, housekeeping pauses the workflow
 * instead, with the reason on the execution: the body ran exactly maxRecoveries + 1 times, and a
 * further worker finds nothing to run.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { HousekeepingService, StepRecoveryLimitError, WorkflowService } from 'geneva-drive';
import { ChildHandle, compileChildEntry, ROOT } from '../src/child-process.js';
import type { PoisonParentMessage, PoisonWorkerMessage } from '../src/poison-worker.js';
import { POISON_LINE, PoisonWorkflow } from '../src/poison-workflows.js';
import { sleep, waitFor } from '../src/resumable-app.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { dataSourceOptions, describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const MAX_RECOVERIES = 2;
const BOOT_AND_DIE_MS = 60_000;

const children = new Set<ChildProcess>();
const buildDir = path.join(ROOT, '.tmp', `poison-worker-${process.env.JEST_WORKER_ID ?? '0'}-${process.pid}`);
let entry = '';

beforeAll(async () => {
  // A tsconfig of this run only: the worker entry and what it imports, compiled to plain ESM (no type check).
  await mkdir(buildDir, { recursive: true });
  const tsconfig = path.join(buildDir, 'tsconfig.json');
  await writeFile(tsconfig, JSON.stringify({ extends: path.join(ROOT, 'test/tsconfig.worker.json'), files: [path.join(ROOT, 'test/src/poison-worker.ts')], include: [] }));
  entry = await compileChildEntry(path.relative(ROOT, tsconfig), path.join(buildDir, 'out'), 'test/src/poison-worker.js');
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL'); // only if a test could not stop it
  await rm(buildDir, { recursive: true, force: true });
});

function spawnWorker(kind: DatabaseKind): ChildHandle<PoisonWorkerMessage, PoisonParentMessage> {
  const options = dataSourceOptions(kind);
  const child = fork(entry, [], {
    cwd: ROOT,
    execArgv: [], // not jest's --experimental-vm-modules
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: { ...process.env, GD_POISON_DB: kind, ...(options.type === 'better-sqlite3' ? { GD_POISON_SQLITE_FILE: String(options.database) } : {}) },
  });
  return new ChildHandle(child, children);
}

/** The executions whose body a worker's output says it started. */
const bodyRuns = (output: string) => [...output.matchAll(new RegExp(`${POISON_LINE} (\\S+)`, 'g'))].map((match) => match[1]);

describeEachDatabase('poison step proof (worker processes that die in the body)', (kind) => {
  let app: TestApp;

  beforeAll(async () => {
    app = await createTestApp(kind, [PoisonWorkflow], { stuckInProgressThreshold: 1, maxRecoveries: MAX_RECOVERIES });
  }, 60_000);
  afterAll(() => app?.close());

  it(`is run again ${MAX_RECOVERIES} times after killing its worker, then parked: workflow paused with the reason recorded, the body ran ${MAX_RECOVERIES + 1} times`, async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const housekeeping = app.moduleRef.get(HousekeepingService);
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await workflows.start(PoisonWorkflow, await heroes.save(heroes.create({ name: 'poison' })));

    const ran: string[] = [];
    for (let attempt = 1; attempt <= MAX_RECOVERIES + 1; attempt++) {
      const worker = spawnWorker(kind);
      await waitFor(`worker ${attempt} to run the body and die`, async () => worker.exited, { timeoutMs: BOOT_AND_DIE_MS, everyMs: 50 });
      expect({ attempt, exited: worker.exited }).toEqual({ attempt, exited: { code: null, signal: 'SIGKILL' } });
      const runs = bodyRuns(worker.output);
      expect({ attempt, runs: runs.length, output: runs.length === 1 ? '' : worker.output }).toEqual({ attempt, runs: 1, output: '' });
      ran.push(...runs);
      expect(await workflows.executionHistory(wf)).toEqual(expect.arrayContaining([expect.objectContaining({ id: runs[0], state: 'in_progress' })]));

      await sleep(10); // past the 1 ms threshold
      const summary = await housekeeping.run();
      if (attempt <= MAX_RECOVERIES) {
        expect({ attempt, summary }).toMatchObject({ attempt, summary: { stuckInProgressRecovered: 1, pausedAtRecoveryLimit: [], unrecoverable: [] } });
      } else {
        expect(summary).toMatchObject({ stuckInProgressRecovered: 0, pausedAtRecoveryLimit: [wf.id], unrecoverable: [] });
        expect(summary.gauges?.['geneva_drive.recovery_limit_paused']).toEqual({ total: 1, byWorkflow: { PoisonWorkflow: 1 } });
      }
    }

    // The record: two recoveries, then the execution failed with the reason, and the workflow paused.
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['swallow', 'completed', 'recovered'],
      ['swallow', 'completed', 'recovered'],
      ['swallow', 'failed', 'failed'],
    ]);
    expect(ran).toEqual(history.map((e) => e.id));
    expect(history[2]).toMatchObject({ errorClassName: StepRecoveryLimitError.name, metadata: expect.objectContaining({ recoveryLimit: { recoveries: 2, maxRecoveries: 2 } }) });
    expect(history[2].errorMessage).toContain(`after ${MAX_RECOVERIES} recoveries in a row (maxRecoveries ${MAX_RECOVERIES})`);
    expect(await workflows.find(wf.id)).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'swallow' });

    // Parked for good: another worker boots, finds nothing to run and stays up; housekeeping leaves it alone.
    const idle = spawnWorker(kind);
    await waitFor('the idle worker to boot', async () => (idle.assertAlive('idle worker'), idle.messages.some((m) => m.type === 'ready')), { timeoutMs: BOOT_AND_DIE_MS });
    await sleep(1_000);
    idle.assertAlive('idle worker');
    expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 0, stuckScheduledRecovered: 0, pausedAtRecoveryLimit: [] });
    await idle.stop({ type: 'shutdown' });
    expect(bodyRuns(idle.output)).toEqual([]);
    expect(idle.exited).toEqual({ code: 0, signal: null });
    expect(await workflows.executionHistory(wf)).toHaveLength(MAX_RECOVERIES + 1);
  }, 240_000);
});
