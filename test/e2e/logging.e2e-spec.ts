/**
 * Logging through an injected LoggerService (reference §7.3, SPEC §2.1 `logger`): every line the
 * engine writes about an execution — and every line step code writes through `this.logger` — carries
 * the workflow class, workflow id, hero type and id, execution id and step name, on every path:
 * success, flow control, exceptions under each kind of policy, preconditions, late and duplicate
 * jobs, missing heroes and step definitions. The capturing logger is the public seam.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { LoggerService } from '@nestjs/common';
import { ExecutorService, GenevaDriveError, StepExecution, StepNotDefinedError, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { QUEUE_WORKFLOWS, QueueFailingWorkflow } from '../src/bull-workflows.js';
import { ChattyWorkflow, policyPlan, resetPolicies, TransientError, UuidChattyWorkflow } from '../src/policy-workflows.js';
import { describeEachDatabase } from '../utils/databases.js';
import { TestHero, UuidHero } from '../utils/fixtures.js';

type Level = 'log' | 'error' | 'warn' | 'debug' | 'verbose';
interface Line {
  level: Level;
  message: string;
  rest: unknown[];
}

const lines: Line[] = [];
const capture =
  (level: Level) =>
  (message: unknown, ...rest: unknown[]) =>
    void lines.push({ level, message: String(message), rest });
const capturingLogger: LoggerService = {
  log: capture('log'),
  error: capture('error'),
  warn: capture('warn'),
  debug: capture('debug'),
  verbose: capture('verbose'),
};

describeEachDatabase('logging', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [ChattyWorkflow, UuidChattyWorkflow], { logger: capturingLogger });
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetPolicies();
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
    lines.length = 0;
  });

  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const rejection = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error);
  /** The exact tag prefix of a line about `execution` of workflow `wf`. */
  const tagsOf = (wf: WorkflowRecord, execution: Pick<StepExecution, 'id' | 'stepName'>, heroType = 'TestHero', heroId = wf.heroId) =>
    `[${wf.type} id=${wf.id} hero_type=${heroType} hero_id=${heroId}] [execution_id=${execution.id} step_name=${execution.stepName}] `;
  /** Runs the execution, capturing only its lines; returns them and what it threw. */
  const run = async (execution: StepExecution) => {
    lines.length = 0;
    const error = await rejection(executor.execute(execution.id));
    return { captured: [...lines], error };
  };
  const expectAllTagged = (captured: Line[], prefix: string) => {
    expect(captured.length).toBeGreaterThan(0);
    for (const line of captured) expect(line.message.startsWith(prefix)).toBe(true);
  };
  const start = async () => {
    const wf = await workflows.start(ChattyWorkflow, hero);
    return { wf, first: (await history(wf))[0] };
  };

  it('step code’s this.logger lines carry every tag, at the level they were written', async () => {
    const { wf, first } = await start();
    const { captured } = await run(first);
    const prefix = tagsOf(wf, first);
    expect(prefix).toBe(`[Chatty id=${wf.id} hero_type=TestHero hero_id=${hero.id}] [execution_id=${first.id} step_name=talk] `);
    expectAllTagged(captured, prefix);
    const fromStep = captured.filter((line) => line.message.includes('step says'));
    expect(fromStep.map((line) => [line.level, line.message.slice(prefix.length)])).toEqual([
      ['log', 'step says log'],
      ['warn', 'step says warn'],
      ['error', 'step says error'],
      ['debug', 'step says debug'],
    ]);
    // The engine's own lines about this execution are tagged the same way.
    expect(captured.length).toBeGreaterThan(fromStep.length);
  });

  it('each execution’s lines name that execution: the next step’s lines carry its own id and step name', async () => {
    const { wf, first } = await start();
    await run(first);
    const [, second] = await history(wf);
    const { captured } = await run(second);
    expectAllTagged(captured, tagsOf(wf, second));
    expect(second.stepName).toBe('last');
    expect(captured.some((line) => line.message.endsWith('last step says log'))).toBe(true);
  });

  it('an exception: the error line (with the stack) and the policy lines are tagged; exhausting reattempts warns', async () => {
    policyPlan.otherwise = () => new TransientError('noisy failure');
    const { wf, first } = await start();
    const failed = await run(first);
    expect(failed.error).toBeInstanceOf(TransientError);
    expectAllTagged(failed.captured, tagsOf(wf, first));
    const errorLine = failed.captured.find((line) => line.level === 'error' && line.message.includes('noisy failure'));
    expect(errorLine).toBeDefined();
    expect(String(errorLine!.rest[0])).toMatch(/noisy failure\n\s+at /); // the stack
    expect(failed.captured.some((line) => /reattempt/.test(line.message))).toBe(true);

    const [, retry] = await history(wf);
    const exhausted = await run(retry); // maxReattempts 1: the second failure is terminal
    expectAllTagged(exhausted.captured, tagsOf(wf, retry));
    expect(exhausted.captured.some((line) => line.level === 'warn' && /exhausted/i.test(line.message))).toBe(true);
    expect((await app.gd.reload(wf)).state).toBe('paused');
  });

  it('a raising precondition is logged as an error, tagged', async () => {
    policyPlan.preconditionErrors = 1;
    const { wf, first } = await start();
    const { captured, error } = await run(first);
    expect(error).not.toBeNull();
    expectAllTagged(captured, tagsOf(wf, first));
    expect(captured.some((line) => line.level === 'error' && line.message.includes('skipIf exploded'))).toBe(true);
  });

  it('flow control lines are tagged', async () => {
    policyPlan.script = ['flow:pause'];
    const { wf, first } = await start();
    const { captured } = await run(first);
    expectAllTagged(captured, tagsOf(wf, first));
    expect((await app.gd.reload(wf)).state).toBe('paused');
  });

  it('a duplicate or late job is logged with the tags of the execution it was for', async () => {
    const { wf, first } = await start();
    await run(first);
    const { captured } = await run(first);
    expectAllTagged(captured, tagsOf(wf, first));
    expect(captured.some((line) => /duplicate or late/.test(line.message))).toBe(true);
  });

  it('a job for a paused workflow, and a workflow whose hero is gone, are logged with the tags', async () => {
    const { wf, first } = await start();
    await workflows.pause(wf);
    const paused = await run(first);
    expectAllTagged(paused.captured, tagsOf(wf, first));

    const heroes = app.dataSource.getRepository(TestHero);
    const doomed = await heroes.save(heroes.create({ name: 'doomed' }));
    const orphan = await workflows.start(ChattyWorkflow, doomed);
    const [orphanFirst] = await history(orphan);
    await heroes.delete(doomed.id);
    const gone = await run(orphanFirst);
    expectAllTagged(gone.captured, tagsOf(orphan, orphanFirst, 'TestHero', String(doomed.id)));
  });

  it('a step this process does not define is warned about once per class and step, not per job; a failure while preparing is logged with the tags', async () => {
    const { wf, first } = await start();
    const executions = app.dataSource.getRepository(StepExecution);
    await executions.update(first.id, { stepName: 'removedStep' });
    const missing = await run({ ...first, stepName: 'removedStep' } as StepExecution);
    expect(missing.error).toBeInstanceOf(StepNotDefinedError);
    // A line about the step of the class, not about one execution: one warning, whatever the number of jobs.
    expect(missing.captured.map(({ level, message }) => [level, message])).toEqual([
      ['warn', `Step "removedStep" of workflow ${wf.type} is not defined in this process: its step jobs are left to a process that has the step (warned once)`],
    ]);
    const again = await run({ ...first, stepName: 'removedStep' } as StepExecution);
    expect(again.error).toBeInstanceOf(StepNotDefinedError);
    expect(again.captured).toEqual([]);

    const other = await workflows.start(ChattyWorkflow, hero, { allowMultiple: true });
    const [otherFirst] = await history(other);
    await app.dataSource.getRepository(WorkflowRecord).update(other.id, { heroType: 'MissingEntity' });
    const preparing = await run(otherFirst);
    expect(preparing.error).not.toBeNull();
    expectAllTagged(preparing.captured, tagsOf(other, otherFirst, 'MissingEntity'));
  });

  it('a uuid hero id appears in the tags as stored', async () => {
    const uuidHeroes = app.dataSource.getRepository(UuidHero);
    const uuidHero = await uuidHeroes.save(uuidHeroes.create({ name: 'Grace' }));
    const wf = await workflows.start(UuidChattyWorkflow, uuidHero);
    const [first] = await history(wf);
    const { captured } = await run(first);
    const prefix = `[UuidChattyWorkflow id=${wf.id} hero_type=UuidHero hero_id=${uuidHero.id}] [execution_id=${first.id} step_name=talk] `;
    expectAllTagged(captured, prefix);
    expect(captured.some((line) => line.message === `${prefix}uuid hero Grace`)).toBe(true);
  });

  it('a job for an execution that does not exist is logged with its id (there is no workflow to tag)', async () => {
    const { captured } = await run({ id: '987654321' } as StepExecution);
    expect(captured).toHaveLength(1);
    expect(captured[0].level).toBe('warn');
    expect(captured[0].message).toContain('987654321');
  }, 10_000);

  it('outside a step, this.logger is refused instead of logging untagged lines', () => {
    expect(() => new ChattyWorkflow().logger).toThrow(GenevaDriveError);
  });

  describe('on the local queue', () => {
    let local: TestApp;
    beforeAll(async () => {
      await app.reset(); // the local queue would otherwise pick up the rows earlier tests left scheduled
      local = await createTestApp(kind, QUEUE_WORKFLOWS, { queue: { adapter: 'local' }, logger: capturingLogger, prepare: false });
    });
    afterAll(() => local.close());

    it('the line of a job that ended with the step’s error carries the tags', async () => {
      const localWorkflows = local.moduleRef.get(WorkflowService);
      const wf = await localWorkflows.start(QueueFailingWorkflow, hero);
      const [first] = await localWorkflows.executionHistory(wf);
      const ended = await waitUntil('the job to end', async () => lines.find((line) => line.message.includes('ended with')) ?? null);
      expect(ended.level).toBe('warn');
      expect(ended.message).toBe(`${tagsOf(wf, first, 'TestHero', String(hero.id))}Step job ${first.id} ended with QueueStepError: boom in workflow ${wf.id}`);
    });
  });
});
