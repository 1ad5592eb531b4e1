/**
 * A step job's run ends only once the jobs of its workflow that it enqueued after its commits are in
 * the queue's hands (StepJobGate.run, AfterCommitSubscriber.settledSince), with each Redis queue
 * adapter on a real Redis. Until then the job's own record in Redis — Bull's or BullMQ's active job,
 * or the run ledger's entry of a job the process started itself — is what lets another worker take
 * its run over should the process die; dropped earlier, a SIGKILL in between left the next step
 * scheduled with no job, or a parked step with no deadline job.
 *
 * The spec holds the add to Redis of the job the run calls for (`later`'s, due in an hour, or the
 * deadline job of a step that parks), lets the executor finish, and finds the run (StepJobGate.run,
 * after which the queue marks the job done or the ledger drops it) still open; released, the run
 * ends after the add. Deterministic: once the executor returned, the run ends within that turn's
 * microtasks unless it waits for the add.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { GenevaWorkflow, QUEUE_PORT, Step, Workflow, WorkflowService } from 'geneva-drive';
import { ExecutorService } from '../../libs/geneva-drive/src/execution/executor.service.js';
import { STEP_JOB_GATE } from '../../libs/geneva-drive/src/queue/queue.tokens.js';
import type { StepJobGate } from '../../libs/geneva-drive/src/queue/step-job-gate.js';
import { waitUntil } from '../src/bull-wait.js';
import { REDIS_ADAPTERS, REDIS_QUEUE_DRIVERS, type RedisAdapter } from '../src/redis-queues.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, redisAvailable, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/** `first` is started by the process itself (DueJobStarter, under the run ledger). */
@Workflow({ hero: () => TestHero })
class HandOffInProcessWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {}

  @Step({ wait: '1h' })
  async later() {}
}

/** `first` comes from Redis (no in-process start for its job). */
@Workflow({ hero: () => TestHero })
class HandOffFromRedisWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ jobOptions: { chain: false } })
  async first() {}

  @Step({ wait: '1h' })
  async later() {}
}

/** `awaited` parks at once: its deadline job is an add to Redis. */
@Workflow({ hero: () => TestHero })
class HandOffDeadlineWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go', timeout: '10m' })
  async awaited() {}
}

const CASES = [
  { workflow: HandOffInProcessWorkflow, held: 'later', rows: [['first', 'completed'], ['later', 'scheduled']] },
  { workflow: HandOffFromRedisWorkflow, held: 'later', rows: [['first', 'completed'], ['later', 'scheduled']] },
  { workflow: HandOffDeadlineWorkflow, held: 'awaited', rows: [['awaited', 'waiting']] },
];

const QUEUE_NAME = 'geneva-drive-hand-off';
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

function handOffSuite(adapter: RedisAdapter, kind: DatabaseKind): void {
  const driver = REDIS_QUEUE_DRIVERS[adapter];
  const prefix = `gd-e2e-hand-off-${adapter}-${process.pid}-${kind}`;
  let admin: ReturnType<typeof driver.handle>;
  let app: TestApp;
  /** The current test's: what a previous test's run does late lands in that test's list. */
  let events: string[] = [];
  let hold: { step: string; called: () => void; released: Promise<void> } | undefined;
  /** Lets the held add go (also after a failed test, so that the application can close). */
  let release = () => undefined as void;
  let executed: ((executionId: string) => void) | undefined;

  beforeAll(async () => {
    admin = driver.handle(QUEUE_NAME, prefix);
    await admin.obliterate();
    app = await createTestApp(
      kind,
      CASES.map((c) => c.workflow),
      { queue: driver.options({ prefix, name: QUEUE_NAME, concurrency: 2 }) },
    );

    // Holds the add of a job of the held step; records when it settles.
    const queue = (app.moduleRef.get(QUEUE_PORT) as unknown as { queue: { add: (...args: unknown[]) => Promise<unknown> } }).queue;
    const add = queue.add.bind(queue);
    queue.add = async (...args: unknown[]) => {
      const data = args.find((arg): arg is { stepName?: string } => typeof arg === 'object' && arg !== null && 'executionId' in arg);
      const held = hold;
      if (!held || data?.stepName !== held.step) return add(...args);
      const list = events;
      held.called();
      await held.released;
      const added = await add(...args);
      list.push(`${held.step}'s job added`);
      return added;
    };
    // Records when the executor returned, and when the run of a job ended.
    const executor = app.moduleRef.get(ExecutorService);
    const execute = executor.execute.bind(executor);
    executor.execute = async (...args: Parameters<typeof execute>) => {
      try {
        return await execute(...args);
      } finally {
        executed?.(args[0]);
      }
    };
    const gate = app.moduleRef.get<StepJobGate>(STEP_JOB_GATE, { strict: false });
    const run = gate.run.bind(gate);
    gate.run = async (...args: Parameters<typeof run>) => {
      const list = events;
      try {
        return await run(...args);
      } finally {
        list.push(`run of ${args[0]} ended`);
      }
    };
  });

  afterAll(async () => {
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
  });

  afterEach(() => {
    release();
    hold = undefined;
  });

  for (const { workflow, held, rows } of CASES) {
    it(`${workflow.name}: the run of its first job ends only after ${held}'s job is in Redis`, async () => {
      events = [];
      let called!: () => void;
      const addCalled = new Promise<void>((resolve) => (called = resolve));
      hold = { step: held, called, released: new Promise<void>((resolve) => (release = resolve)) };
      const firstExecuted = new Promise<string>((resolve) => (executed = resolve));

      const workflows = app.moduleRef.get(WorkflowService);
      const hero = await app.dataSource.getRepository(TestHero).save({ name: 'hand-off' });
      const wf = await workflows.start(workflow, hero);
      const [first] = await workflows.executionHistory(wf.id);
      await addCalled;
      expect(await firstExecuted).toBe(first.id);
      await nextTurn();
      expect(events).toEqual([]);

      release();
      await waitUntil('the run ended', () => events.includes(`run of ${first.id} ended`));
      expect(events).toEqual([`${held}'s job added`, `run of ${first.id} ended`]);
      expect((await workflows.executionHistory(wf.id)).map((e) => [e.stepName, e.state])).toEqual(rows);
    });
  }
}

if (!redisAvailable()) {
  describe.skip('step job hand-off (skipped: Redis not reachable)', () => undefined);
} else {
  describeEachDatabase("A step job's run ends once its workflow's next jobs are in Redis", (kind) => {
    for (const adapter of REDIS_ADAPTERS) describe(`on ${adapter}`, () => handOffSuite(adapter, kind));
  });
}
