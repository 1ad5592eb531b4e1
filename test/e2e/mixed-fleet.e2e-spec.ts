/**
 * A fleet in the middle of a rolling deploy: on one database and one queue, a worker of the old
 * version (without the workflow class, or with the class but without a step the new version added)
 * next to one of the new version. The old worker decides nothing about executions it cannot run —
 * no state change, no job id written, no pause — and leaves them to the new one, which runs them
 * all: with Bull and BullMQ the old worker hands each job it takes back to Redis, delayed; with the
 * local queue it leaves them out of its boot scan. Several applications in this process stand for
 * the processes (each has its own registry and queue consumer); on Bull with PostgreSQL the old worker
 * is once a separate OS process as well (test/src/worker-process.ts, compiled with
 * test/tsconfig.worker.json and forked, which registers none of the fleet's classes). On Redis, once
 * the new worker is up, the old one stops taking jobs, as at the end of the deploy (see
 * `retireOld`). Every wait is for a condition.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { LoggerService } from '@nestjs/common';
import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { QUEUE_PORT, StepExecution, WorkflowRecord, WorkflowService, type GenevaDriveModuleOptions, type QueuePort } from 'geneva-drive';
import { waitUntil } from '../src/bull-wait.js';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import { createTestApp, warningsLogger, type TestApp } from '../src/test-app.js';
import { FleetApprovalWorkflow, FleetChoreWorkflow, FleetOrderBeforeReserveWorkflow, FleetOrderWorkflow, fleetJournal, setLabel } from '../src/fleet-workflows.js';
import { REDIS_QUEUE_DRIVERS, type RedisQueueDriver } from '../src/redis-queues.js';
import type { ParentMessage, WorkerMessage } from '../src/worker-process.js';
import { describeEachDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const COUNT = 4;
/** A bound for a stuck run, not a verdict: once the old worker takes no more jobs, each waits at most its last hand-back's delay. */
const FINISH_TIMEOUT_MS = 300_000;
/** Each test's own bound, above the waits it contains. */
const TEST_TIMEOUT_MS = 360_000;

/** The fleet's workflows as the database holds them. */
function fleetView(app: TestApp) {
  const workflows = () => app.dataSource.getRepository(WorkflowRecord).find({ where: { type: 'FleetOrder' }, order: { id: 'ASC' } });
  const executions = () => app.dataSource.getRepository(StepExecution).find({ order: { id: 'ASC' } });
  return {
    workflows,
    executions,
    async expectUntouched(ids: string[]) {
      const rows = (await executions()).filter((row) => ids.includes(row.workflowId));
      expect(rows.map((row) => [row.stepName, row.state, row.jobId, row.errorMessage])).toEqual(ids.map(() => ['reserveStock', 'scheduled', null, null]));
      expect((await workflows()).map((wf) => wf.state)).toEqual(ids.map(() => 'ready'));
    },
    async waitAllFinished(ids: string[]) {
      await waitUntil(
        `the ${ids.length} FleetOrder workflows to finish`,
        async () => {
          const states = (await workflows()).filter((wf) => ids.includes(wf.id)).map((wf) => wf.state);
          if (states.includes('paused')) throw new Error(`a workflow paused: ${states.join(', ')}`);
          return states.every((state) => state === 'finished') ? true : null;
        },
        { timeoutMs: FINISH_TIMEOUT_MS, intervalMs: 50 },
      );
    },
  };
}

async function startOrders(app: TestApp, count: number): Promise<string[]> {
  const heroes = app.dataSource.getRepository(TestHero);
  const workflows = app.moduleRef.get(WorkflowService);
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await workflows.start(FleetOrderWorkflow, await heroes.save(heroes.create({ name: `order ${i}` })))).id);
  return ids;
}

function redisFleetSuite(driver: RedisQueueDriver, kind: DatabaseKind): void {
  const name = 'geneva-drive-mixed-fleet';
  const prefix = `gd-e2e-mixed-fleet-${driver.adapter}-${process.pid}-${kind}`;
  const queue = (concurrency: number): Pick<GenevaDriveModuleOptions, 'queue'> => ({ queue: driver.options({ prefix, name, concurrency }) });
  let admin: ReturnType<RedisQueueDriver['handle']>;
  let starter: TestApp;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    admin = driver.handle(name, prefix);
    await admin.obliterate();
    // Enqueue-only, with the new version: it starts the workflows and runs nothing.
    starter = await createTestApp(kind, [FleetOrderWorkflow, FleetApprovalWorkflow], queue(0));
  });
  afterAll(async () => {
    await starter?.close();
    await admin?.obliterate();
    await admin?.close();
  });
  beforeEach(async () => {
    await admin.removePending();
    await starter.reset();
    fleetJournal.length = 0;
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  const boot = async (providers: Function[], logger?: LoggerService) => {
    const app = await createTestApp(kind, providers as never[], { ...queue(2), prepare: false, ...(logger ? { logger } : {}) });
    apps.push(app);
    return app;
  };
  /**
   * The old worker takes no more jobs (its application stays up), called once the new one is up.
   * Left running beside it, it races the new worker for each handed-back job: both wake when the job
   * comes due, whichever asks Redis first takes it, and the old one can win round after round, each
   * hand-back a second longer than the last; how soon the new worker got every job would be chance.
   * The queue is paused meanwhile: no job reaches the old worker's blocking read as it is cut.
   */
  const retire = async (stopTaking: () => Promise<void>) => {
    await admin.pause();
    try {
      await stopTaking();
    } finally {
      await admin.resume();
    }
  };
  const retireOld = (old: TestApp) => retire(() => driver.pauseWorker(old.moduleRef.get<QueuePort>(QUEUE_PORT)));
  /** Waits until the old worker has handed every first job back to Redis (a delayed `<execution>-unowned-<n>`). */
  const waitForHandBacks = async (ids: string[]) => {
    const view = fleetView(starter);
    const firsts = (await view.executions()).filter((row) => ids.includes(row.workflowId)).map((row) => row.id);
    const seen = new Set<string>();
    await waitUntil(
      `the old worker to hand the ${firsts.length} jobs back`,
      async () => {
        for (const id of await admin.delayedIds()) {
          const match = /^(.+)-unowned-[12]$/.exec(id);
          if (match) seen.add(match[1]);
        }
        return firsts.every((id) => seen.has(id)) ? true : null;
      },
      { timeoutMs: 30_000, intervalMs: 20 },
    );
  };

  it('a worker without the class hands its jobs back untouched; the worker that has it runs them all', async () => {
    const old = warningsLogger();
    const oldApp = await boot([FleetChoreWorkflow], old.logger);
    const ids = await startOrders(starter, COUNT);
    await waitForHandBacks(ids);
    await fleetView(starter).expectUntouched(ids);
    expect(old.warnings.filter((line) => line.includes('FleetOrder'))).toEqual([
      'Workflow FleetOrder is not registered in this process: its step jobs are left to a process that has the class (warned once)',
    ]);

    setLabel(FleetOrderWorkflow, 'new');
    await boot([FleetOrderWorkflow, FleetChoreWorkflow]);
    await retireOld(oldApp);
    await fleetView(starter).waitAllFinished(ids);
    expect(fleetJournal.filter((line) => line.startsWith('reserveStock')).sort()).toEqual(ids.map(() => 'reserveStock@new'));
  }, TEST_TIMEOUT_MS);

  it('a worker with the class but without a step the new version added hands those jobs back; both versions finish every workflow', async () => {
    const old = warningsLogger();
    setLabel(FleetOrderBeforeReserveWorkflow, 'old');
    const oldApp = await boot([FleetOrderBeforeReserveWorkflow], old.logger);
    const ids = await startOrders(starter, COUNT);
    await waitForHandBacks(ids);
    await fleetView(starter).expectUntouched(ids);
    expect(old.warnings.filter((line) => line.includes('FleetOrder'))).toEqual([
      'Step "reserveStock" of workflow FleetOrder is not defined in this process: its step jobs are left to a process that has the step (warned once)',
    ]);

    setLabel(FleetOrderWorkflow, 'new');
    await boot([FleetOrderWorkflow]);
    await retireOld(oldApp);
    await fleetView(starter).waitAllFinished(ids);
    // reserveStock only where it exists; ship wherever (both versions have it).
    expect(fleetJournal.filter((line) => line.startsWith('reserveStock')).sort()).toEqual(ids.map(() => 'reserveStock@new'));
    expect(fleetJournal.filter((line) => line.startsWith('ship'))).toHaveLength(COUNT);
  }, TEST_TIMEOUT_MS);

  it('a deadline job of a class the worker lacks is handed back too; the worker that has it times the wait out', async () => {
    const heroes = starter.dataSource.getRepository(TestHero);
    setLabel(FleetOrderWorkflow, 'new');
    const owner = await boot([FleetApprovalWorkflow]);
    const wf = await starter.moduleRef.get(WorkflowService).start(FleetApprovalWorkflow, await heroes.save(heroes.create({ name: 'approval' })));
    const parked = await waitUntil('the step to park', async () => {
      const row = await starter.dataSource.getRepository(StepExecution).findOneBy({ workflowId: wf.id, state: 'waiting' });
      return row && row.timeoutAt ? row : null;
    });
    await waitUntil('its deadline job in Redis', async () => ((await admin.getJob(`${parked.id}-deadline`)) ? true : null));
    await owner.close();
    apps.splice(apps.indexOf(owner), 1);

    const lacking = await boot([FleetChoreWorkflow]);
    await waitUntil('the deadline job to be handed back', async () => ((await admin.delayedIds()).some((id) => id.startsWith(`${parked.id}-deadline-unowned-`)) ? true : null), {
      timeoutMs: 30_000,
      intervalMs: 20,
    });
    expect(await starter.dataSource.getRepository(StepExecution).findOneByOrFail({ id: parked.id })).toMatchObject({ state: 'waiting' });
    expect(await starter.moduleRef.get(WorkflowService).find(wf.id)).toMatchObject({ state: 'ready' });

    await boot([FleetApprovalWorkflow]);
    await retireOld(lacking);
    await waitUntil('the workflow to finish', async () => ((await starter.moduleRef.get(WorkflowService).find(wf.id)).state === 'finished' ? true : null), {
      timeoutMs: FINISH_TIMEOUT_MS,
      intervalMs: 50,
    });
    expect(fleetJournal).toEqual(['close']);
  }, TEST_TIMEOUT_MS);

  if (driver.adapter === 'bull' && kind === 'postgres') {
    describe('the worker without the class a separate process', () => {
      const buildDir = path.join(ROOT, '.tmp', `mixed-fleet-worker-${process.env.GD_TEST_DB_PREFIX ?? 'gd_test'}-${process.pid}`);
      const children = new Set<ChildProcess>();
      let entry = '';

      beforeAll(async () => {
        entry = await compileChildEntry('test/tsconfig.worker.json', buildDir, 'test/src/worker-process.js');
      }, 120_000);
      afterAll(async () => {
        for (const child of children) child.kill('SIGKILL'); // only if the test could not stop it
        await rm(buildDir, { recursive: true, force: true });
      });

      it('the other process hands every job back untouched, warning once; the worker that has the class runs them all, none pauses', async () => {
        // The multi-process spec's worker: it registers only its own workflow classes, none of the fleet's.
        const old = new ChildHandle<WorkerMessage, ParentMessage>(
          forkCompiled(entry, {
            GD_WORKER_DB: kind,
            GD_WORKER_ADAPTER: driver.adapter,
            GD_WORKER_REDIS: redisUrl(),
            GD_WORKER_PREFIX: prefix,
            GD_WORKER_QUEUE: name,
            GD_WORKER_CONCURRENCY: '2',
            GD_TEST_LOGS: '1', // its warnings on its output
          }),
          children,
        );
        const warning = 'Workflow FleetOrder is not registered in this process: its step jobs are left to a process that has the class (warned once)';
        const warnings = () => old.output.split('\n').filter((line) => line.includes(warning)).length;
        try {
          const ready = () => {
            old.assertAlive('worker process');
            return old.messages.some((m) => m.type === 'ready') ? true : null;
          };
          await waitUntil('the worker process to be ready', ready, { timeoutMs: 60_000, intervalMs: 20 });
          const ids = await startOrders(starter, COUNT);
          await waitForHandBacks(ids);
          await fleetView(starter).expectUntouched(ids);
          const firsts = (await fleetView(starter).executions()).filter((row) => ids.includes(row.workflowId)).map((row) => row.id);
          const taken = new Set(old.messages.flatMap((m) => (m.type === 'active' ? [m.executionId] : [])));
          expect(firsts.filter((id) => !taken.has(id))).toEqual([]);
          await waitUntil('the warning on the worker process output', () => (warnings() > 0 ? true : null));

          setLabel(FleetOrderWorkflow, 'new');
          await boot([FleetOrderWorkflow, FleetChoreWorkflow]);
          // As retireOld, in the other process.
          await retire(async () => {
            old.send({ type: 'pause' });
            await waitUntil('the worker process to take no more jobs', () => {
              old.assertAlive('worker process');
              return old.messages.some((m) => m.type === 'paused') ? true : null;
            });
          });
          await fleetView(starter).waitAllFinished(ids);
          expect(fleetJournal.filter((line) => line.startsWith('reserveStock')).sort()).toEqual(ids.map(() => 'reserveStock@new'));
          expect(fleetJournal.filter((line) => line.startsWith('ship')).sort()).toEqual(ids.map(() => 'ship@new'));
          old.assertAlive('worker process');
          expect(old.messages.filter((m) => m.type === 'failed')).toEqual([]);
          expect(warnings()).toBe(1);
        } finally {
          await old.stop({ type: 'shutdown' });
        }
      }, TEST_TIMEOUT_MS);
    });
  }
}

describeEachDatabase('mixed fleet', (kind) => {
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
    (redisAvailable() ? describe : describe.skip)(`on ${driver.adapter}`, () => redisFleetSuite(driver, kind));
  }

  describe('on the local queue', () => {
    let starter: TestApp;
    const apps: TestApp[] = [];

    beforeAll(async () => {
      // The manual queue: it starts workflows, and nothing runs them until a local worker boots.
      starter = await createTestApp(kind, [FleetOrderWorkflow, FleetChoreWorkflow]);
    });
    afterAll(() => starter?.close());
    beforeEach(async () => {
      await starter.reset();
      fleetJournal.length = 0;
    });
    afterEach(async () => {
      for (const app of apps.splice(0)) await app.close();
    });

    const boot = async (providers: Function[], logger?: LoggerService) => {
      const app = await createTestApp(kind, providers as never[], { queue: { adapter: 'local', concurrency: 1 }, prepare: false, ...(logger ? { logger } : {}) });
      apps.push(app);
      return app;
    };
    const startChores = async (count: number) => {
      const heroes = starter.dataSource.getRepository(TestHero);
      const ids: string[] = [];
      for (let i = 0; i < count; i++) ids.push((await starter.moduleRef.get(WorkflowService).start(FleetChoreWorkflow, await heroes.save(heroes.create({ name: `chore ${i}` })))).id);
      return ids;
    };
    /**
     * The old worker's boot scan ran, and its queue drained: the chores it has, armed after the
     * orders (higher ids, one job at a time, first in first out), are finished.
     */
    const waitChoresDone = (ids: string[]) =>
      waitUntil('the chores to finish', async () => {
        const rows = await starter.dataSource.getRepository(WorkflowRecord).find({ where: { type: 'FleetChore' } });
        return rows.filter((row) => ids.includes(row.id)).every((row) => row.state === 'finished') ? true : null;
      });

    it('a worker without the class boots against its scheduled executions and leaves them untouched; the worker that has it runs them', async () => {
      const ids = await startOrders(starter, COUNT);
      const chores = await startChores(2);
      const old = warningsLogger();
      await boot([FleetChoreWorkflow], old.logger);
      await waitChoresDone(chores);
      await fleetView(starter).expectUntouched(ids);
      // The boot's pre-deploy check says it too, once (DeployCheck); the queue's own line says what it did.
      expect(old.warnings.filter((line) => line.includes('left untouched at boot'))).toEqual([`${COUNT} scheduled execution(s) of workflow FleetOrder (not registered in this process) left untouched at boot: a process that has it runs them`]);
      expect(old.warnings.filter((line) => line.includes('stand at a step this code cannot run'))).toHaveLength(1);

      setLabel(FleetOrderWorkflow, 'new');
      await boot([FleetOrderWorkflow]);
      await fleetView(starter).waitAllFinished(ids);
      expect(fleetJournal.filter((line) => line.startsWith('reserveStock'))).toEqual(ids.map(() => 'reserveStock@new'));
    });

    it('a worker with the class but without the step leaves those executions untouched too', async () => {
      const ids = await startOrders(starter, COUNT);
      const chores = await startChores(1);
      const old = warningsLogger();
      await boot([FleetOrderBeforeReserveWorkflow, FleetChoreWorkflow], old.logger);
      await waitChoresDone(chores);
      await fleetView(starter).expectUntouched(ids);
      // The boot's pre-deploy check says it too, once (DeployCheck); the queue's own line says what it did.
      expect(old.warnings.filter((line) => line.includes('left untouched at boot'))).toEqual([`${COUNT} scheduled execution(s) of step "reserveStock" of workflow FleetOrder (not defined in this process) left untouched at boot: a process that has it runs them`]);
      expect(old.warnings.filter((line) => line.includes('stand at a step this code cannot run'))).toHaveLength(1);

      setLabel(FleetOrderWorkflow, 'new');
      await boot([FleetOrderWorkflow]);
      await fleetView(starter).waitAllFinished(ids);
    });

    it('a job of such a class enqueued in the old worker is dropped, not run nor armed again', async () => {
      const [id] = await startOrders(starter, 1);
      const old = await boot([FleetChoreWorkflow]);
      const [first] = (await fleetView(starter).executions()).filter((row) => row.workflowId === id);
      const port = old.moduleRef.get<QueuePort>(QUEUE_PORT);
      const job = { executionId: first.id, runAt: new Date(), jobOptions: {}, hints: { workflowId: id, workflowType: 'FleetOrder', stepName: 'reserveStock' } };
      expect(await port.enqueue(job)).toBe(true);
      // One job at a time, first in first out: once the chore enqueued after it is done, the order's job was handled.
      const [chore] = await startChores(1);
      const choreExecution = (await fleetView(starter).executions()).find((row) => row.workflowId === chore)!;
      await port.enqueue({ executionId: choreExecution.id, runAt: new Date(), jobOptions: {}, hints: { workflowId: chore } });
      await waitChoresDone([chore]);
      await fleetView(starter).expectUntouched([id]);
      // Dropped: nothing of that execution is armed any more (the local queue answers false for a job it already holds).
      expect(await port.enqueue(job)).toBe(true);
    });
  });
});
