/**
 * The local adapter (in-process timers), with nothing driven by hand: workflows run by themselves,
 * and a restart rebuilds the timers from the database.
 */
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { QUEUE_PORT, SignalService, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { LocalQueueAdapter } from '../../libs/geneva-drive/src/queue/local-queue.adapter.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { sleep, waitUntil } from '../src/bull-wait.js';
import {
  APP_LABEL,
  journalOf,
  QUEUE_WORKFLOWS,
  queueJournal,
  QueueRestartWorkflow,
  QueueSignalWorkflow,
  QueueThreeStepWorkflow,
} from '../src/bull-workflows.js';

describeEachDatabase('local queue adapter', (kind: DatabaseKind) => {
  const apps: TestApp[] = [];

  /** Boots an application on the local adapter whose bodies journal `label`. */
  async function boot(label: string, options: { prepare?: boolean } = {}): Promise<TestApp> {
    const app = await createTestApp(kind, [...QUEUE_WORKFLOWS, { provide: APP_LABEL, useValue: label }], {
      queue: { adapter: 'local', concurrency: 2 },
      // Chains never stop on time here, however loaded the machine: which steps had a job is exact.
      chainSteps: { maxDuration: '10m' },
      prepare: options.prepare,
    });
    apps.push(app);
    expect(app.moduleRef.get(QUEUE_PORT)).toBeInstanceOf(LocalQueueAdapter);
    return app;
  }

  async function createHero(app: TestApp): Promise<TestHero> {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name: 'Ada' }));
  }

  const waitForState = (workflows: WorkflowService, wf: WorkflowRecord, state: WorkflowRecord['state']) =>
    waitUntil(`workflow ${wf.id} to be ${state}`, async () => {
      const record = await workflows.find(wf.id);
      return record.state === state ? record : null;
    });

  beforeEach(() => {
    queueJournal.length = 0;
  });

  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  it('runs a three-step workflow to finished by itself', async () => {
    const app = await boot('only');
    const workflows = app.moduleRef.get(WorkflowService);
    const wf = await workflows.start(QueueThreeStepWorkflow, await createHero(app));

    await waitForState(workflows, wf, 'finished');
    expect(journalOf(wf.id)).toEqual(['one', 'two', 'three']);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['stepOne', 'completed', 'success'],
      ['stepTwo', 'completed', 'success'],
      ['stepThree', 'completed', 'success'],
    ]);
    const [one, two] = history;
    expect(two.scheduledFor.getTime() - one.finishedAt!.getTime()).toBeGreaterThanOrEqual(290);
    expect(two.startedAt!.getTime()).toBeGreaterThanOrEqual(two.scheduledFor.getTime() - 10);
    // Each row records the job that ran it, the execution's own id; stepThree, due the moment
    // stepTwo completed, started inline in the same transaction and had none.
    expect(history.map((e) => e.jobId)).toEqual([one.id, two.id, null]);
  });

  it('a signal wakes a parked step with a job of its own, and the row records that job id', async () => {
    const app = await boot('only');
    const workflows = app.moduleRef.get(WorkflowService);
    const wf = await workflows.start(QueueSignalWorkflow, await createHero(app));
    const parked = await waitUntil('the step to park', async () => {
      const current = await workflows.currentExecution(wf);
      return current?.state === 'waiting' ? current : null;
    });
    const signal = await app.moduleRef.get(SignalService).signal(wf, 'go');
    await waitForState(workflows, wf, 'finished');
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.jobId])).toEqual([
      ['first', 'completed', history[0].id],
      ['awaitGo', 'completed', `${parked.id}-wake-${signal.id}`],
    ]);
  });

  it('survives a restart: the next application rebuilds the timer from the database and runs the step on time', async () => {
    const appA = await boot('A');
    const workflowsA = appA.moduleRef.get(WorkflowService);
    const wf = await workflowsA.start(QueueRestartWorkflow, await createHero(appA));
    const pending = (await workflowsA.currentExecution(wf))!;
    expect(pending).toMatchObject({ stepName: 'afterRestart', state: 'scheduled' });
    expect(pending.scheduledFor.getTime() - Date.now()).toBeGreaterThan(500); // closing well before it fires

    await appA.close();
    apps.splice(apps.indexOf(appA), 1);
    expect(journalOf(wf.id)).toEqual([]);

    const appB = await boot('B', { prepare: false }); // same database, not wiped
    const workflowsB = appB.moduleRef.get(WorkflowService);
    await waitForState(workflowsB, wf, 'finished');

    // Both steps ran exactly once, in application B, the first one not before it was due.
    expect(queueJournal.filter((entry) => entry.workflowId === wf.id).map((entry) => `${entry.label}:${entry.step}`)).toEqual(['B:afterRestart', 'B:last']);
    const history = await workflowsB.executionHistory(wf);
    expect(history.map((e) => [e.id, e.stepName, e.state, e.outcome])).toEqual([
      [pending.id, 'afterRestart', 'completed', 'success'],
      [expect.any(String), 'last', 'completed', 'success'],
    ]);
    expect(history[0].startedAt!.getTime()).toBeGreaterThanOrEqual(pending.scheduledFor.getTime() - 10);
    await sleep(50);
    expect(journalOf(wf.id)).toHaveLength(2);
  });
});
