/**
 * Step chaining: a step due the moment the one before it completes starts in the same worker, its
 * start committed with the previous outcome (no job, so no job id on its row); `chainSteps` bounds
 * and switches it, `jobOptions: { chain: false }` opts a step out, and an inline start that fails
 * leaves the outcome recorded and sends the step through the queue.
 */
import { afterEach, beforeEach, expect, it } from '@jest/globals';
import { WorkflowService, type GenevaDriveModuleOptions, type StepExecution, type WorkflowRecord } from 'geneva-drive';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { CHAIN_WORKFLOWS, chainJournal, ChainBrokenStartWorkflow, ChainFiveStepsWorkflow, construction } from '../src/chain-workflows.js';

describeEachDatabase('step chaining', (kind: DatabaseKind) => {
  let app: TestApp | undefined;

  async function boot(options: GenevaDriveModuleOptions = {}): Promise<{ app: TestApp; workflows: WorkflowService; hero: TestHero }> {
    // Chains never stop on time here, however loaded the machine: which steps had a job is exact.
    app = await createTestApp(kind, CHAIN_WORKFLOWS, { queue: { adapter: 'local', concurrency: 2 }, chainSteps: { maxDuration: '10m' }, ...options });
    const heroes = app.dataSource.getRepository(TestHero);
    return { app, workflows: app.moduleRef.get(WorkflowService), hero: await heroes.save(heroes.create({ name: 'Ada' })) };
  }

  const finished = (workflows: WorkflowService, wf: WorkflowRecord) =>
    waitUntil(`workflow ${wf.id} to finish`, async () => ((await workflows.find(wf.id)).state === 'finished' ? true : null));
  /** Each execution's step and job id: null for a step that started inline. */
  const jobs = (history: StepExecution[]) => history.map((e) => [e.stepName, e.jobId === null ? null : e.jobId === e.id ? 'own job' : e.jobId]);

  beforeEach(() => {
    chainJournal.length = 0;
    construction.failNext = false;
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('runs the steps due at once inline, in order, each committed with the outcome before it; a step with chain: false gets its own job', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['one', 'completed', 'success'],
      ['two', 'completed', 'success'],
      ['three', 'completed', 'success'],
      ['four', 'completed', 'success'],
      ['five', 'completed', 'success'],
    ]);
    expect(jobs(history)).toEqual([
      ['one', 'own job'],
      ['two', null],
      ['three', 'own job'],
      ['four', null],
      ['five', null],
    ]);
    // Inline: each step started once the one before it was finished, in the same transaction.
    for (let i = 1; i < history.length; i++) expect(history[i].startedAt!.getTime()).toBeGreaterThanOrEqual(history[i - 1].finishedAt!.getTime());
    expect(chainJournal).toEqual(['one', 'two', 'three', 'four', 'five'].map((step) => `${wf.id}:${step}`));
  });

  it('hands back to the queue after maxSteps steps', async () => {
    const { workflows, hero } = await boot({ chainSteps: { maxSteps: 2, maxDuration: '10m' } });
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    expect(jobs(await workflows.executionHistory(wf))).toEqual([
      ['one', 'own job'],
      ['two', null],
      ['three', 'own job'],
      ['four', null],
      ['five', 'own job'],
    ]);
  });

  it('sends every step through the queue with chainSteps: false', async () => {
    const { workflows, hero } = await boot({ chainSteps: false });
    const wf = await workflows.start(ChainFiveStepsWorkflow, hero);
    await finished(workflows, wf);
    expect(jobs(await workflows.executionHistory(wf))).toEqual(['one', 'two', 'three', 'four', 'five'].map((step) => [step, 'own job']));
  });

  it('an inline start that fails leaves the outcome recorded and the step goes through the queue, where it runs once', async () => {
    const { workflows, hero } = await boot();
    const wf = await workflows.start(ChainBrokenStartWorkflow, hero);
    await finished(workflows, wf);
    const history = await workflows.executionHistory(wf);
    expect(history.map((e) => [e.stepName, e.state, e.outcome])).toEqual([
      ['first', 'completed', 'success'],
      ['second', 'completed', 'success'],
    ]);
    expect(jobs(history)).toEqual([
      ['first', 'own job'],
      ['second', 'own job'],
    ]);
    expect(chainJournal).toEqual([`${wf.id}:first`, `${wf.id}:second`]);
  });
});
