import { afterEach, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { GENEVA_DRIVE_CHANNELS, GenevaWorkflow, QUEUE_PORT, Step, Workflow, WorkflowRecord } from 'geneva-drive';
import { sleep, waitUntil } from '../src/bull-wait.js';
import { REDIS_QUEUE_DRIVERS } from '../src/redis-queues.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { ROOT } from '../src/child-process.js';
import { enabledDatabases, redisAvailable, redisUrl } from '../utils/databases.js';

@Workflow()
class ScheduleWorkflow extends GenevaWorkflow {
  @Step() async only() {}
}

/** Counts housekeeping runs published on the diagnostics channel while `during` runs. */
async function countRuns(during: (runsSoFar: () => number) => Promise<void>): Promise<number> {
  let runs = 0;
  const listener = () => runs++;
  subscribe(GENEVA_DRIVE_CHANNELS.housekeeping, listener);
  try {
    await during(() => runs);
  } finally {
    unsubscribe(GENEVA_DRIVE_CHANNELS.housekeeping, listener);
  }
  return runs;
}

/** A finished workflow 40 days old: housekeeping's 30-day retention deletes it. */
async function oldFinishedWorkflow(app: TestApp): Promise<string> {
  const old = new Date(Date.now() - 40 * 86_400_000);
  const rows = app.dataSource.getRepository(WorkflowRecord);
  const saved = await rows.save(
    rows.create({ type: 'ScheduleWorkflow', heroType: 'TestHero', heroId: '1', state: 'finished', allowMultiple: false, finishedAt: old, transitionedAt: old, createdAt: old, updatedAt: old }),
  );
  return String(saved.id);
}

describe('housekeeping on a schedule [sqlite, local queue]', () => {
  let app: TestApp | undefined;
  afterEach(async () => app?.close());

  it('runs periodically by itself with housekeeping.every', async () => {
    app = await createTestApp('sqlite', [ScheduleWorkflow], { queue: { adapter: 'local' }, housekeeping: { every: 150 } });
    const id = await oldFinishedWorkflow(app);
    // Runs again after the one that deleted it: a schedule, not a run at boot.
    await countRuns(async (runsSoFar) => {
      await waitUntil('the old workflow to be deleted', async () => (await app!.dataSource.getRepository(WorkflowRecord).countBy({ id })) === 0);
      await waitUntil('a run after the one that deleted it', () => runsSoFar() >= 2);
    });
  });

  it('does not run with housekeeping: false', async () => {
    app = await createTestApp('sqlite', [ScheduleWorkflow], { queue: { adapter: 'local' }, housekeeping: false });
    const id = await oldFinishedWorkflow(app);
    const runs = await countRuns(() => sleep(500));
    expect(runs).toBe(0);
    expect(await app.dataSource.getRepository(WorkflowRecord).countBy({ id })).toBe(1);
  });
});

const DAY_MS = 86_400_000;
const kind = enabledDatabases().includes('postgres') ? 'postgres' : 'sqlite';
for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) {
  (redisAvailable() ? describe : describe.skip)(`housekeeping on a schedule [${kind}, ${driver.adapter} on Redis${redisAvailable() ? '' : ': skipped, Redis not reachable'}]`, () => {
    const prefix = `gd-hk-schedule-${driver.adapter}-${process.pid}`;
    const apps: TestApp[] = [];
    afterEach(async () => {
      while (apps.length) await apps.pop()!.close();
      const cleaner = driver.handle('geneva-drive', prefix);
      await cleaner.obliterate();
      await cleaner.close();
    });

    const boot = async (everyMs: number, prepare: boolean) => {
      const app = await createTestApp(kind, [ScheduleWorkflow], {
        queue: driver.options({ name: 'geneva-drive', prefix, concurrency: 1 }),
        housekeeping: { every: everyMs },
        prepare,
      });
      apps.push(app);
      return app;
    };

    it('runs once per period across two workers with their own Redis clients on one queue (a repeatable job, not a timer each)', async () => {
      const first = await boot(400, true);
      const second = await boot(400, false);
      // Each run is a job of the one schedule in Redis: its id ends in the period it stands for, so
      // two workers never run one period twice, and a run without a job (a timer in each process)
      // would outnumber the jobs. Counted from here, at most one job per worker was already running.
      const periods: number[] = [];
      const onHousekeepingJob = (job: { jobId: string; executionId: string }) => {
        if (job.executionId === undefined) periods.push(Number(/:(\d+)$/.exec(job.jobId)?.[1]));
      };
      driver.onActive(first.moduleRef.get(QUEUE_PORT), onHousekeepingJob);
      driver.onActive(second.moduleRef.get(QUEUE_PORT), onHousekeepingJob);
      let jobsAtEnd = 0;
      const runs = await countRuns(async () => {
        await waitUntil('four housekeeping jobs to start', () => periods.length >= 4);
        jobsAtEnd = periods.length;
      });
      expect(periods.every(Number.isFinite)).toBe(true);
      expect(new Set(periods).size).toBe(periods.length);
      expect(runs).toBeGreaterThanOrEqual(jobsAtEnd - 2);
      expect(runs).toBeLessThanOrEqual(jobsAtEnd + 2);
      expect(await driver.view(first.moduleRef.get(QUEUE_PORT)).schedules()).toEqual([['geneva-drive-housekeeping', 400]]);
    });

    if (driver.adapter === 'bull') {
      // In a process of its own: jest keeps unhandled rejections from a test's process.on. The
      // adapter on a real Bull queue; repeat() uses neither the gate nor the starter.
      const exitsCleanly = (steps: string) => {
        const adapterModule = path.join(ROOT, 'libs/geneva-drive/dist/queue/bull-queue.adapter.js');
        const script = `
          import Bull from 'bull';
          import { BullQueueAdapter } from ${JSON.stringify(pathToFileURL(adapterModule).href)};
          const queue = new Bull('geneva-drive', ${JSON.stringify(redisUrl())}, { prefix: ${JSON.stringify(prefix)} });
          const logger = { log() {}, warn() {}, error(line) { console.error(line); } };
          const adapter = new BullQueueAdapter(queue, undefined, { adapter: 'bull', concurrency: 1 }, logger, undefined);
          ${steps}
          setTimeout(() => { console.log('exited cleanly'); process.exit(0); }, 300);`;
        const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
        expect({ status: child.status, stdout: child.stdout.trim(), unhandled: /unhandled|UnhandledPromiseRejection|Connection is closed/i.test(child.stderr) }).toEqual({
          status: 0,
          stdout: 'exited cleanly',
          unhandled: false,
        });
      };

      it('a queue closed while Bull still sets up the repeated task leaves no unhandled rejection (which would end the process)', () => {
        exitsCleanly(`
          const scheduled = adapter.repeat('geneva-drive-housekeeping', 60000, async () => undefined);
          await queue.close();
          await scheduled.catch(() => undefined);`);
      });

      it('a queue closed while the repeated task’s worker name waits behind the step processor’s blocking read leaves no unhandled rejection', () => {
        // The step processor blocks its connection in BRPOPLPUSH (up to Bull's drainDelay); the
        // repeated task's processor names the worker on that connection, so the name waits.
        exitsCleanly(`
          queue.process('step', 1, async () => undefined);
          while (!queue.bclient.blocked) await new Promise((resolve) => setTimeout(resolve, 10));
          await adapter.repeat('geneva-drive-housekeeping', 60000, async () => undefined);
          await queue.close();`);
      });
    }

    it('replaces the schedule of an earlier period when the configuration changes', async () => {
      // A day: the earlier schedule's job (due at the next multiple of its period) never starts while
      // the test runs. One that starts as the schedule is dropped may put it back (Bull reads, then
      // re-adds, a schedule as its job starts), which is not what this test is about.
      await boot(DAY_MS, true);
      const app = await boot(1_000, false);
      expect((await driver.view(app.moduleRef.get(QUEUE_PORT)).schedules()).map(([, every]) => every)).toEqual([1_000]);
    });
  });
}
