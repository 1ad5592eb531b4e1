/**
 * Several OS processes on one database and one Redis queue, with each Redis queue adapter (`bull`,
 * `bullmq`). Two worker processes (test/src/worker-
 * process.ts, compiled once per run with test/tsconfig.worker.json: jest's TypeScript transform does
 * not reach child processes) consume the queue; the jest process only starts workflows (an
 * enqueue-only application, concurrency 0) and reads the `test_step_runs` table the bodies write.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { QUEUE_PORT, StepExecution, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { dataSourceOptions, describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { REDIS_QUEUE_DRIVERS, type QueueView, type RedisQueueDriver } from '../src/redis-queues.js';
import type { ParentMessage, WorkerMessage } from '../src/worker-process.js';
import {
  CREATE_STEP_RUNS_TABLE,
  readStepRuns,
  STEP_RUNS_TABLE,
  WORKER_WORKFLOWS,
  WorkerDuplicateWorkflow,
  WorkerThreeStepWorkflow,
  type StepRun,
} from '../src/worker-workflows.js';

const QUEUE_NAME = 'geneva-drive-multi-process';
const WORKER_BOOT_TIMEOUT_MS = 60_000; // booting Nest and connecting can take long on a loaded machine

/** Every child this file forked, so afterAll can make sure none survives. */
const children = new Set<ChildProcess>();

/** A forked worker process and what it has told us. */
class WorkerHandle extends ChildHandle<WorkerMessage, ParentMessage> {
  private requests = 0;

  constructor(child: ChildProcess) {
    super(child, children);
  }

  waitForMessage<T extends WorkerMessage>(what: string, predicate: (message: WorkerMessage) => message is T, timeoutMs = 15_000): Promise<T> {
    return waitUntil(
      `${what} from worker ${this.pid}`,
      () => {
        this.assertAlive('worker');
        return (this.messages as WorkerMessage[]).find(predicate) ?? null;
      },
      { timeoutMs, intervalMs: 20 },
    );
  }

  /** Calls ExecutorService.execute(executionId) in the worker; resolves with its report. */
  execute(executionId: string): Promise<Extract<WorkerMessage, { type: 'executed' }>> {
    const requestId = ++this.requests;
    this.send({ type: 'execute', requestId, executionId });
    return this.waitForMessage(`execute #${requestId}`, (m): m is Extract<WorkerMessage, { type: 'executed' }> => m.type === 'executed' && m.requestId === requestId);
  }

  /** Asks the worker to close its application; kills it if it has not exited within 5 s. */
  override stop(): Promise<void> {
    return super.stop({ type: 'shutdown' });
  }
}

async function spawnWorker(entry: string, driver: RedisQueueDriver, kind: DatabaseKind, prefix: string): Promise<WorkerHandle> {
  const options = dataSourceOptions(kind);
  const child = forkCompiled(entry, {
    GD_WORKER_DB: kind,
    GD_WORKER_ADAPTER: driver.adapter,
    GD_WORKER_REDIS: redisUrl(),
    GD_WORKER_PREFIX: prefix,
    GD_WORKER_QUEUE: QUEUE_NAME,
    GD_WORKER_CONCURRENCY: '2',
    ...(options.type === 'better-sqlite3' ? { GD_WORKER_SQLITE_FILE: String(options.database) } : {}),
  });
  const worker = new WorkerHandle(child);
  await worker.waitForMessage('ready', (m): m is Extract<WorkerMessage, { type: 'ready' }> => m.type === 'ready', WORKER_BOOT_TIMEOUT_MS);
  return worker;
}

/** Runs that overlap in time within one workflow, described for a readable failure. */
function overlapsWithinWorkflows(runs: StepRun[]): string[] {
  const byWorkflow = new Map<string, StepRun[]>();
  for (const run of runs) byWorkflow.set(run.workflowId, [...(byWorkflow.get(run.workflowId) ?? []), run]);
  const problems: string[] = [];
  for (const [workflowId, list] of byWorkflow) {
    const sorted = [...list].sort((a, b) => a.startedAt - b.startedAt);
    for (let i = 1; i < sorted.length; i++) {
      const [before, after] = [sorted[i - 1], sorted[i]];
      if (after.startedAt < before.finishedAt) {
        problems.push(`workflow ${workflowId}: ${after.step}@${after.pid} [${after.startedAt}, ${after.finishedAt}] overlaps ${before.step}@${before.pid} [${before.startedAt}, ${before.finishedAt}]`);
      }
    }
  }
  return problems;
}

function multiProcessSuite(driver: RedisQueueDriver, kind: DatabaseKind, entry: () => string): void {
  const prefix = `gd-e2e-multi-process-${driver.adapter}-${process.pid}-${kind}`;
  let admin: ReturnType<RedisQueueDriver['handle']>;
  let app: TestApp;
  let queue: QueueView;
  let workflows: WorkflowService;
  let workers: WorkerHandle[] = [];

  beforeAll(async () => {
    admin = driver.handle(QUEUE_NAME, prefix);
    await admin.obliterate();
    // Enqueue-only: this process starts workflows, the workers run them.
    app = await createTestApp(kind, WORKER_WORKFLOWS, { queue: driver.options({ prefix, name: QUEUE_NAME, concurrency: 0 }) });
    queue = driver.view(app.moduleRef.get(QUEUE_PORT));
    workflows = app.moduleRef.get(WorkflowService);
    await app.dataSource.query(CREATE_STEP_RUNS_TABLE);
    workers = await Promise.all([spawnWorker(entry(), driver, kind, prefix), spawnWorker(entry(), driver, kind, prefix)]);
  });

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
  });

  beforeEach(async () => {
    await queue.removePending(); // the delayed first step a previous test left behind
    await app.reset();
    await app.dataSource.query(`DELETE FROM ${STEP_RUNS_TABLE}`);
    for (const worker of workers) worker.messages.length = 0;
  });

  const heroes = (count: number) => {
    const repository = app.dataSource.getRepository(TestHero);
    return repository.save(Array.from({ length: count }, (_, i) => repository.create({ name: `hero ${i}` })));
  };
  const waitForState = (wf: WorkflowRecord, state: WorkflowRecord['state']) =>
    waitUntil(`workflow ${wf.id} to be ${state}`, async () => ((await workflows.find(wf.id)).state === state ? true : null));
  const workerOutput = () => workers.map((w) => `--- worker ${w.pid}\n${w.output}`).join('\n');
  const jobMessages = (type: 'active' | 'completed' | 'failed', executionId: string) =>
    workers.flatMap((w) => w.messages).filter((m): m is Extract<WorkerMessage, { type: typeof type }> & { receivedAt: number } => m.type === type && 'executionId' in m && m.executionId === executionId);

  it('runs the body once when two processes execute the same execution at the same time', async () => {
    const [hero] = await heroes(1);
    const wf = await workflows.start(WorkerDuplicateWorkflow, hero); // first step due in an hour: only we deliver it
    const slow = (await workflows.currentExecution(wf))!;

    const reports = await Promise.all(workers.map((worker) => worker.execute(slow.id)));
    expect(reports.map((r) => [r.ok, r.error])).toEqual([
      [true, undefined],
      [true, undefined],
    ]);
    // A real race: both calls were in flight at once (the body alone takes 400 ms).
    const [a, b] = reports;
    expect(a.startedAt).toBeLessThan(b.finishedAt);
    expect(b.startedAt).toBeLessThan(a.finishedAt);

    await waitForState(wf, 'finished');
    const runs = (await readStepRuns(app.dataSource)).filter((run) => run.workflowId === wf.id);
    expect(runs.map((run) => run.step)).toEqual(['slow', 'quick']);
    expect(workers.map((w) => w.pid)).toContain(runs[0].pid);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.id, e.stepName, e.state, e.outcome])).toEqual([
      [slow.id, 'slow', 'completed', 'success'],
      [expect.any(String), 'quick', 'completed', 'success'],
    ]);
  });

  it('runs the body once when the queue delivers the same execution as two jobs to the workers', async () => {
    const [hero] = await heroes(1);
    const wf = await workflows.start(WorkerDuplicateWorkflow, hero);
    const slow = (await workflows.currentExecution(wf))!;
    await waitUntil('the delayed job', () => queue.getJob(slow.id));
    const duplicateId = `${slow.id}-duplicate`;

    // The engine's own job made due now, plus a second job (another id, the same data).
    await Promise.all([queue.promote(slow.id), queue.addStepJob({ executionId: slow.id }, duplicateId)]);

    await waitForState(wf, 'finished');
    await waitUntil('both jobs to be done', () => jobMessages('completed', slow.id).length + jobMessages('failed', slow.id).length === 2);
    const runs = (await readStepRuns(app.dataSource)).filter((run) => run.workflowId === wf.id);
    expect(runs.map((run) => run.step)).toEqual(['slow', 'quick']);
    // Neither delivery failed: the duplicate is a quiet no-op.
    expect(jobMessages('failed', slow.id)).toEqual([]);
    const delivered = jobMessages('active', slow.id);
    expect(delivered.map((m) => m.jobId).sort()).toEqual([slow.id, duplicateId].sort());
    // A real race: the second delivery arrived while the first was still running the 400 ms body.
    const completed = jobMessages('completed', slow.id);
    expect(Math.max(...delivered.map((m) => m.receivedAt))).toBeLessThan(Math.max(...completed.map((m) => m.receivedAt)));

    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['slow', 'completed', 'success'],
      ['quick', 'completed', 'success'],
    ]);
  });

  it('spreads 30 three-step workflows over two processes, never running two steps of one workflow at once', async () => {
    const started: WorkflowRecord[] = [];
    for (const hero of await heroes(30)) started.push(await workflows.start(WorkerThreeStepWorkflow, hero));

    await waitUntil(
      'all 30 workflows to finish',
      async () => (await workflows.findByState('finished', WorkerThreeStepWorkflow)).length === 30,
      { timeoutMs: 30_000, intervalMs: 100 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${workerOutput()}`);
    });

    const runs = await readStepRuns(app.dataSource);
    expect(overlapsWithinWorkflows(runs)).toEqual([]);
    for (const wf of started) {
      const mine = runs.filter((run) => run.workflowId === wf.id).sort((x, y) => x.startedAt - y.startedAt);
      expect({ workflow: wf.id, steps: mine.map((run) => run.step) }).toEqual({ workflow: wf.id, steps: ['one', 'two', 'three'] });
    }
    expect(runs).toHaveLength(90);
    expect([...new Set(runs.map((run) => run.pid))].sort()).toEqual(workers.map((w) => w.pid).sort());

    const executions = await app.dataSource.getRepository(StepExecution).find();
    expect(executions).toHaveLength(90);
    expect(executions.filter((e) => e.state !== 'completed' || e.outcome !== 'success')).toEqual([]);
    expect(workers.flatMap((w) => w.messages).filter((m) => m.type === 'failed')).toEqual([]);
  });
}

if (redisAvailable()) {
  const buildDir = path.join(ROOT, '.tmp', `worker-build-${process.pid}`);
  let entry = '';
  beforeAll(async () => {
    entry = await compileChildEntry('test/tsconfig.worker.json', buildDir, 'test/src/worker-process.js');
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL'); // only if a suite's afterAll could not stop it
    await rm(buildDir, { recursive: true, force: true });
  });
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
    describeEachDatabase(`multiple worker processes on one ${driver.adapter} queue`, (kind) => multiProcessSuite(driver, kind, () => entry));
  }
} else {
  const reason = `Redis not reachable at ${process.env.GD_REDIS_URL ?? 'redis://127.0.0.1:6379'}`;
  console.warn(`multi-process.e2e-spec: ${reason} — multi-process tests skipped (set GENEVA_DRIVE_TEST_REQUIRE=redis to make this a failure)`);
  describe.skip(`multiple worker processes on one Redis queue (skipped: ${reason})`, () =>
    describeEachDatabase('multiple worker processes on one Redis queue', (kind) => multiProcessSuite(REDIS_QUEUE_DRIVERS.bull, kind, () => '')),
  );
}
