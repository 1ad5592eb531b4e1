/**
 * The flow-control schema seen by the engine: on a database without AddGenevaDriveFlowControl1730000000007
 * the engine boots and runs workflows as before (flow_key is in none of its statements, and asking
 * for flow control names the migration), warning at boot of the steps with a concurrency key; with
 * it, executions carry a null flow_key.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { FlowControlNotMigratedError, StepExecution, WorkflowService } from 'geneva-drive';
import { SchemaCapabilities } from '../../libs/geneva-drive/src/persistence/schema-capabilities.js';
import { CONCURRENCY_WORKFLOWS } from '../src/concurrency-workflows.js';
import { BoomError, coreJournal, corePlan, FlakyWorkflow, LinearWorkflow, resetCore } from '../src/core-workflows.js';
import { createTestApp, warningsLogger, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, prepareDatabase } from '../utils/databases.js';
import { loggedDuring } from '../utils/logged-statements.js';
import { TestHero } from '../utils/fixtures.js';

const WORKFLOWS = [LinearWorkflow, FlakyWorkflow];

describeEachDatabase('steps without the flow-control migration', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    await prepareDatabase(kind, { withoutFlowControl: true });
    app = await createTestApp(kind, WORKFLOWS, { prepare: false });
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app?.close());
  beforeEach(async () => {
    await app.reset(); // the flow keys table is absent: reset tolerates it
    resetCore();
  });

  const newHero = (name: string) => {
    const heroes = app.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name }));
  };

  it('boots without flow control; asking for it names the migration', () => {
    const schema = app.moduleRef.get(SchemaCapabilities, { strict: false });
    expect(schema.hasFlowControl).toBe(false);
    expect(() => schema.assertFlowControl('Step LinearWorkflow.first (concurrency)')).toThrow(FlowControlNotMigratedError);
    expect(() => schema.assertFlowControl('Step LinearWorkflow.first (concurrency)')).toThrow(/AddGenevaDriveFlowControl1730000000007/);
  });

  it('warns at boot of the steps with a concurrency key or a rate limit, naming the migration; an application without such steps is not warned', async () => {
    const keyed = warningsLogger();
    await (await createTestApp(kind, CONCURRENCY_WORKFLOWS, { prepare: false, logger: keyed.logger })).close();
    expect(keyed.warnings).toEqual([
      'The flow-control migration (AddGenevaDriveFlowControl1730000000007) has not run: steps with a concurrency key or a rate limit ' +
        '(ChargeWorkflow.charge, UrgentChargeWorkflow.charge, RoutineChargeWorkflow.charge, PairWorkflow.first, PairWorkflow.notify, BadKeyWorkflow.charge, MailWorkflow.send, PacedWorkflow.fetch, PacedWorkflow.report) ' +
        'will pause their workflow at their gate until it does',
    ]);
    const plain = warningsLogger();
    await (await createTestApp(kind, WORKFLOWS, { prepare: false, logger: plain.logger })).close();
    expect(plain.warnings).toEqual([]);
  });

  it('runs a workflow to its end, its waits and a failure resumed included, never naming flow_key', async () => {
    const linear = await workflows.start(LinearWorkflow, await newHero('Ada'));
    corePlan.failures.stepTwo = 1;
    const flaky = await workflows.start(FlakyWorkflow, await newHero('Grace'));
    const sent = await loggedDuring(app.dataSource, async () => {
      await app.gd.speedrunWorkflow(linear);
      await expect(app.gd.speedrunWorkflow(flaky)).rejects.toBeInstanceOf(BoomError); // the failure pauses it
      expect((await workflows.find(flaky.id)).state).toBe('paused');
      await workflows.resume(flaky);
      await app.gd.speedrunWorkflow(flaky);
    });

    expect(sent.length).toBeGreaterThan(0);
    expect(sent.filter((statement) => statement.includes('flow_key'))).toEqual([]);
    expect(coreJournal).toEqual(['first:Ada', 'second', 'third', 'stepOne', 'stepTwo', 'stepTwo', 'stepThree']);
    expect((await workflows.find(linear.id)).state).toBe('finished');
    expect((await workflows.find(flaky.id)).state).toBe('finished');
    const history = await workflows.executionHistory(flaky);
    expect(history.map((execution) => [execution.stepName, execution.state])).toEqual([
      ['stepOne', 'completed'],
      ['stepTwo', 'failed'],
      ['stepTwo', 'completed'],
      ['stepThree', 'completed'],
    ]);
    for (const execution of history) expect(execution.flowKey).toBeUndefined();
  });
});

describeEachDatabase('steps with the flow-control migration', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;

  beforeAll(async () => {
    app = await createTestApp(kind, WORKFLOWS);
    workflows = app.moduleRef.get(WorkflowService);
  });
  afterAll(() => app?.close());
  beforeEach(async () => {
    await app.reset();
    resetCore();
  });

  it('boots the steps with a concurrency key without a warning', async () => {
    const keyed = warningsLogger();
    await (await createTestApp(kind, CONCURRENCY_WORKFLOWS, { prepare: false, logger: keyed.logger })).close();
    expect(keyed.warnings).toEqual([]);
  });

  it('detects it, and the executions of a step without a concurrency key hold none', async () => {
    const schema = app.moduleRef.get(SchemaCapabilities, { strict: false });
    expect(schema.hasFlowControl).toBe(true);
    expect(() => schema.assertFlowControl('Step LinearWorkflow.first (concurrency)')).not.toThrow();

    const heroes = app.dataSource.getRepository(TestHero);
    const linear = await workflows.start(LinearWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    await app.gd.speedrunWorkflow(linear);
    expect((await workflows.find(linear.id)).state).toBe('finished');
    const rows = await app.dataSource.getRepository(StepExecution).find({ where: { workflowId: linear.id }, order: { id: 'ASC' } });
    expect(rows.map((execution) => [execution.stepName, execution.state, execution.flowKey])).toEqual([
      ['first', 'completed', null],
      ['second', 'completed', null],
      ['third', 'completed', null],
    ]);
  });
});
