/**
 * A worker process SIGKILLed with steps in hand that Redis does not hold, with each Redis queue
 * adapter, housekeeping off everywhere: the steps are taken over by another worker within seconds.
 *
 * The victim (test/src/takeover-process.ts, concurrency 2, chainSteps on) takes TakeoverChainWorkflow's
 * first job from Redis; its second step is chained inline and, once running, starts two workflows
 * from inside the body: the first one's step the process starts itself (in its free slot) and holds,
 * the second one's it takes and keeps waiting for a slot, so that it never reaches phase 1. The
 * victim reports when all three are in place and the spec kills it: a chained step in progress under
 * a Bull job, an in-process step in progress, and an in-process job not started, none of the last
 * two in Redis. Then a worker starts in this process (with the same short locks) and every one of
 * them finishes: the chained step and the in-process one recovered and run again, the waiting job run.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { QUEUE_PORT, StepExecution, WorkflowService } from 'geneva-drive';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import { waitUntil } from '../src/bull-wait.js';
import { REDIS_ADAPTERS, REDIS_QUEUE_DRIVERS, type RedisAdapter } from '../src/redis-queues.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { TAKEOVER_LOCKS, TAKEOVER_WORKFLOWS, TakeoverChainWorkflow, TakeoverLaterWorkflow, TakeoverParkedWorkflow, type TakeoverVictimMessage } from '../src/takeover-workflows.js';
import { deadlineJobId, timeoutJobId } from '../../libs/geneva-drive/src/queue/deadline-job.js';
import { describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const QUEUE_NAME = 'geneva-drive-takeover';
/** Generous: on a machine busy with other test runs a Nest application takes long to boot. */
const BOOT_TIMEOUT_MS = 60_000;
/** Locks of 2 s: a takeover takes a lock and a half at most once a worker is up; the rest is margin for a loaded machine. */
const TAKEOVER_WITHIN_MS = 20_000;

const children = new Set<ChildProcess>();
const buildDir = path.join(ROOT, '.tmp', `takeover-build-${process.pid}`);
let entry = '';

class Victim extends ChildHandle<TakeoverVictimMessage, { type: 'shutdown' }> {
  waitFor<T extends TakeoverVictimMessage['type']>(type: T, timeoutMs: number): Promise<Extract<TakeoverVictimMessage, { type: T }>> {
    return waitUntil(
      `${type} from the victim ${this.pid}`,
      () => {
        this.assertAlive('victim');
        return (this.messages as TakeoverVictimMessage[]).find((m): m is Extract<TakeoverVictimMessage, { type: T }> => m.type === type) ?? null;
      },
      { timeoutMs, intervalMs: 20 },
    );
  }

  kill(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    return exited;
  }
}

function takeoverSuite(adapter: RedisAdapter, kind: DatabaseKind): void {
  const driver = REDIS_QUEUE_DRIVERS[adapter];
  const prefix = `gd-e2e-takeover-${adapter}-${process.pid}-${kind}`;
  let admin: ReturnType<typeof driver.handle>;
  let app: TestApp;
  let survivor: TestApp | undefined;
  let victim: Victim | undefined;

  beforeAll(async () => {
    admin = driver.handle(QUEUE_NAME, prefix);
    await admin.obliterate();
    // Enqueue-only until the victim is dead: the victim is the one worker that takes the first job.
    app = await createTestApp(kind, TAKEOVER_WORKFLOWS, { queue: driver.options({ prefix, name: QUEUE_NAME, concurrency: 0 }) });
  }, BOOT_TIMEOUT_MS);

  afterAll(async () => {
    if (victim && !victim.exited) await victim.kill();
    await survivor?.close();
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
  });

  it('a chained step in progress, an in-process step in progress and an in-process job not started all run again after their worker is SIGKILLed', async () => {
    victim = new Victim(
      forkCompiled(entry, {
        GD_TAKEOVER_DB: kind,
        GD_TAKEOVER_ADAPTER: adapter,
        GD_TAKEOVER_REDIS: redisUrl(),
        GD_TAKEOVER_PREFIX: prefix,
        GD_TAKEOVER_QUEUE: QUEUE_NAME,
        GD_TAKEOVER_VICTIM: '1',
      }),
      children,
    );
    await victim.waitFor('ready', BOOT_TIMEOUT_MS);
    const workflows = app.moduleRef.get(WorkflowService);
    const hero = await app.dataSource.getRepository(TestHero).save({ name: 'takeover' });
    const chain = await workflows.start(TakeoverChainWorkflow, hero);
    const holding = await victim.waitFor('holding', 30_000);
    expect(holding.chain).toBe(chain.id);

    const queue = driver.view(app.moduleRef.get(QUEUE_PORT));
    const current = async (workflowId: string) => (await workflows.currentExecution(workflowId))!;
    const [chained, running, held] = await Promise.all([current(holding.chain), current(holding.running), current(holding.held)]);
    expect([chained, running, held].map((e) => [e.stepName, e.state])).toEqual([
      ['hold', 'in_progress'],
      ['block', 'in_progress'],
      ['only', 'scheduled'],
    ]);
    // The two jobs the victim took itself are not in Redis: nothing of Bull's would ever run them again.
    expect(await queue.getJob(running.id)).toBeNull();
    expect(await queue.getJob(held.id)).toBeNull();

    await victim.kill();
    survivor = await createTestApp(kind, TAKEOVER_WORKFLOWS, {
      prepare: false,
      queue: { ...driver.options({ prefix, name: QUEUE_NAME, concurrency: 2 }), ...TAKEOVER_LOCKS[adapter] },
      housekeeping: false,
    });
    // From the moment another worker is up (its boot is no part of the takeover).
    const survivorUpAt = Date.now();
    const ids = [holding.chain, holding.running, holding.held];
    await waitUntil(
      'the victim’s three workflows to finish',
      async () => (await Promise.all(ids.map((id) => workflows.find(id)))).every((wf) => wf.state === 'finished'),
      { timeoutMs: TAKEOVER_WITHIN_MS, intervalMs: 100 },
    ).catch(async (error: Error) => {
      const rows = await app.dataSource.getRepository(StepExecution).find({ order: { id: 'ASC' } });
      throw new Error(`${error.message}\n${rows.map((e) => `${e.workflowId}/${e.stepName}#${e.id}:${e.state}/${e.outcome} job ${e.jobId}`).join('\n')}\n${victim!.output}`);
    });
    const tookMs = Date.now() - survivorUpAt;

    const history = async (id: string) => (await workflows.executionHistory(id)).map((e) => [e.stepName, e.outcome]);
    // The chained step and the in-process one were recovered (closed, run again); the waiting job simply ran.
    expect(await history(holding.chain)).toEqual([
      ['first', 'success'],
      ['hold', 'recovered'],
      ['hold', 'success'],
    ]);
    expect(await history(holding.running)).toEqual([
      ['block', 'recovered'],
      ['block', 'success'],
      ['after', 'success'],
    ]);
    expect(await history(holding.held)).toEqual([['only', 'success']]);
    expect(tookMs).toBeLessThan(TAKEOVER_WITHIN_MS);
  }, BOOT_TIMEOUT_MS * 2 + TAKEOVER_WITHIN_MS);

  /**
   * The worker of the first test (or a new one) runs `first` of `workflow` from Redis, which leaves
   * the step `step` with a delayed job (`jobOf` its execution); that job is then taken away, as if
   * the process had died before adding it, `meanwhile` runs (what happened before the death, time
   * passing while no process runs the workflow), and the dead run is taken over (`first`'s unless
   * `deadRun` names another job), as the run ledger or Bull's stalled check would hand it on.
   * Resolves once `settled` says so (default: the job is back in Redis), with the workflow's executions.
   */
  const takeOverAfterLostJob = async (
    workflow: typeof TakeoverLaterWorkflow | typeof TakeoverParkedWorkflow,
    step: string,
    jobOf: (executionId: string) => string,
    meanwhile: (lost: StepExecution) => Promise<unknown> = async () => undefined,
    settled: (lost: StepExecution) => Promise<boolean> = async (lost) => (await driver.view(app.moduleRef.get(QUEUE_PORT)).getJob(jobOf(lost.id)))?.state === 'delayed',
    /** The dead run taken over: `first`'s (default), or the job of `step`'s execution this names. */
    deadRun?: (executionId: string) => string,
  ) => {
    survivor ??= await createTestApp(kind, TAKEOVER_WORKFLOWS, {
      prepare: false,
      queue: { ...driver.options({ prefix, name: QUEUE_NAME, concurrency: 2 }), ...TAKEOVER_LOCKS[adapter] },
    });
    const workflows = app.moduleRef.get(WorkflowService);
    const queue = driver.view(app.moduleRef.get(QUEUE_PORT));
    const hero = await app.dataSource.getRepository(TestHero).save({ name: `takeover ${step}` });
    const wf = await workflows.start(workflow, hero);
    const lost = await waitUntil(`\`${step}\`'s job`, async () => {
      const current = await workflows.currentExecution(wf.id);
      return current?.stepName === step && (await queue.getJob(jobOf(current.id))) ? current : null;
    });
    await queue.removePending();
    expect(await queue.getJob(jobOf(lost.id))).toBeNull();
    await meanwhile(lost);

    const [first] = await workflows.executionHistory(wf.id);
    const [executionId, takeoverOf] = deadRun ? [lost.id, deadRun(lost.id)] : [first.id, first.jobId!];
    await queue.addStepJob({ executionId, takeoverOf } as { executionId: string }, `${takeoverOf}-takeover`);
    await waitUntil(`\`${step}\` taken over`, () => settled(lost));
    return (await workflows.executionHistory(wf.id)).map((e) => [e.stepName, e.state, e.outcome]);
  };

  it('a takeover enqueues again a step the dead run scheduled, whose job died with it', async () => {
    // `later` is scheduled an hour on.
    expect(await takeOverAfterLostJob(TakeoverLaterWorkflow, 'later', (id) => id)).toEqual([
      ['first', 'completed', 'success'],
      ['later', 'scheduled', null],
    ]);
  }, BOOT_TIMEOUT_MS + TAKEOVER_WITHIN_MS);

  it('a takeover enqueues again the deadline job of a step the dead run parked', async () => {
    // `awaited`, chained after `first`, parks with a deadline an hour on.
    expect(await takeOverAfterLostJob(TakeoverParkedWorkflow, 'awaited', deadlineJobId)).toEqual([
      ['first', 'completed', 'success'],
      ['awaited', 'waiting', null],
    ]);
  }, BOOT_TIMEOUT_MS + TAKEOVER_WITHIN_MS);

  it('a takeover times out now the wait of a step the dead run parked, when its deadline passed meanwhile', async () => {
    const executions = app.dataSource.getRepository(StepExecution);
    // The deadline passed while no process ran the workflow; its default onTimeout ('run') runs the step.
    const passed = (lost: StepExecution) => executions.update(lost.id, { timeoutAt: new Date(Date.now() - 60_000) });
    const ran = async (lost: StepExecution) => (await executions.findOneByOrFail({ id: lost.id })).state === 'completed';
    expect(await takeOverAfterLostJob(TakeoverParkedWorkflow, 'awaited', deadlineJobId, passed, ran)).toEqual([
      ['first', 'completed', 'success'],
      ['awaited', 'completed', 'success'],
    ]);
  }, BOOT_TIMEOUT_MS + TAKEOVER_WITHIN_MS);

  it('a takeover of a deadline job’s run enqueues again the step it timed out to run, whose job died with it', async () => {
    const executions = app.dataSource.getRepository(StepExecution);
    // The deadline job's run timed the wait out (onTimeout 'run'), wrote so as WaitDeadline.expire
    // does, and died before that step's job reached Redis.
    const timedOut = (lost: StepExecution) =>
      executions.update(lost.id, { state: 'scheduled', jobId: timeoutJobId(lost.id), scheduledFor: new Date(), metadata: { timedOut: true } });
    const ran = async (lost: StepExecution) => (await executions.findOneByOrFail({ id: lost.id })).state === 'completed';
    expect(await takeOverAfterLostJob(TakeoverParkedWorkflow, 'awaited', deadlineJobId, timedOut, ran, deadlineJobId)).toEqual([
      ['first', 'completed', 'success'],
      ['awaited', 'completed', 'success'],
    ]);
  }, BOOT_TIMEOUT_MS + TAKEOVER_WITHIN_MS);

  it('a takeover of a deadline job’s run leaves alone the step it timed out to run once that step’s own job started it', async () => {
    const executions = app.dataSource.getRepository(StepExecution);
    const queue = driver.view(app.moduleRef.get(QUEUE_PORT));
    // Timed out as above, and its job, which reached Redis, started it: the execution is that job's.
    const started = (lost: StepExecution) =>
      executions.update(lost.id, { state: 'in_progress', jobId: timeoutJobId(lost.id), startedAt: new Date(), metadata: { timedOut: true } });
    const takenOver = async (lost: StepExecution) => (await queue.getJob(`${deadlineJobId(lost.id)}-takeover`)) === null;
    expect(await takeOverAfterLostJob(TakeoverParkedWorkflow, 'awaited', deadlineJobId, started, takenOver, deadlineJobId)).toEqual([
      ['first', 'completed', 'success'],
      ['awaited', 'in_progress', null],
    ]);
  }, BOOT_TIMEOUT_MS + TAKEOVER_WITHIN_MS);
}

if (!redisAvailable()) {
  describe.skip('dead worker takeover (skipped: Redis not reachable)', () => undefined);
} else {
  beforeAll(async () => {
    entry = await compileChildEntry('test/tsconfig.takeover.json', buildDir, 'test/src/takeover-process.js');
  }, 120_000);
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await rm(buildDir, { recursive: true, force: true });
  });
  describeEachDatabase('A worker SIGKILLed with steps Redis does not hold', (kind) => {
    if (kind === 'sqlite') return describe.skip('one database file on one host: no other worker to take over', () => undefined);
    for (const adapter of REDIS_ADAPTERS) describe(`on ${adapter}`, () => takeoverSuite(adapter, kind));
  });
}
