/**
 * Exception policies end to end (upstream reattempt_on_exception_integration_test.rb,
 * max_reattempts_test.rb, class_level_on_exception_integration_test.rb, metadata_accessor_test.rb and
 * the retry-policy backoff_integration_test.rb, adapted), plus SPEC §5: every 'reattempt' form is
 * bounded by 100 by default, imperative handlers record the error, class-level policies may be
 * ExceptionPolicy objects, and backoff attempt numbers agree between the body, precondition and
 * prepare paths.
 *
 * Steps run "through the job": each run executes the job the manual queue recorded last, as the
 * queue processor would. Reattempt counting is also checked against seeded histories (rows written
 * with explicit created_at values), which is how its ordering rules become observable.
 *
 * Not ported: the metadata_accessor cases for a database WITHOUT the metadata column (the first
 * migration always creates it here, so there is no lazy column detection to test).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { DataSource, type Repository } from 'typeorm';
import {
  ExecutorService,
  HeroTypeNotFoundError,
  StepExecution,
  WorkflowRecord,
  WorkflowService,
  type StepExecutionState,
  type StepOutcome,
} from 'geneva-drive';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  ClassHandler,
  ClassMax1,
  ClassPrecedence,
  ClassReattemptCancel,
  ClassReattemptPause,
  ClassSpecific,
  ClassUnlimited,
  CatchInBodyWorkflow,
  ConstantBackoff,
  DEFAULT_LIMIT_FORMS,
  ExponentialBackoff,
  FatalError,
  FlowReattemptMax2,
  HandlerThenLimit,
  HandlerTwin,
  JitteredBackoff,
  LinearFunctionBackoff,
  PolicyChild,
  PolicyParent,
  policyJournal,
  policyPlan,
  PreconditionError,
  PreconditionHandler,
  RateLimitedError,
  resetPolicies,
  ScopedClassHandler,
  SingleReattemptWorkflow,
  SkipIfRaisesMax2,
  StepExplicitPauseBeatsClass,
  StepHandler,
  StepLambdaBeatsClass,
  StepMax1,
  StepMax10,
  StepMax2Cancel,
  StepMax3,
  StepPolicyObjectBeatsClass,
  StepSkipBeatsClass,
  StepUnlimited,
  TransientError,
  type Decision,
  type PolicyWorkflowClass,
} from '../src/policy-workflows.js';
import { dataSourceOptions, describeEachDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;

/** A seeded execution of step `work`: completed/reattempted with reason exception_policy unless told otherwise. */
interface SeedRow {
  state?: StepExecutionState;
  outcome?: StepOutcome;
  /** The metadata reason; null writes no metadata at all (a row from before reasons were recorded). */
  reason?: 'exception_policy' | 'flow_control' | 'precondition' | null;
  /** How long ago the row was created. */
  ageMs: number;
}

describeEachDatabase('exception policies', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let executor: ExecutorService;
  let executions: Repository<StepExecution>;
  let records: Repository<WorkflowRecord>;
  /** A second, independent connection: it only sees what was committed. */
  let observer: DataSource;
  let hero: TestHero;

  beforeAll(async () => {
    app = await createTestApp(kind, [
      SingleReattemptWorkflow,
      ClassReattemptCancel,
      ClassReattemptPause,
      StepMax3,
      StepMax1,
      StepMax2Cancel,
      StepUnlimited,
      StepMax10,
      SkipIfRaisesMax2,
      FlowReattemptMax2,
      ClassMax1,
      ...DEFAULT_LIMIT_FORMS.map(([, cls]) => cls),
      ClassUnlimited,
      ClassSpecific,
      ClassPrecedence,
      StepSkipBeatsClass,
      StepExplicitPauseBeatsClass,
      StepPolicyObjectBeatsClass,
      StepLambdaBeatsClass,
      PolicyParent,
      PolicyChild,
      ClassHandler,
      StepHandler,
      ScopedClassHandler,
      PreconditionHandler,
      HandlerThenLimit,
      CatchInBodyWorkflow,
      HandlerTwin,
      LinearFunctionBackoff,
      ExponentialBackoff,
      ConstantBackoff,
      JitteredBackoff,
    ]);
    workflows = app.moduleRef.get(WorkflowService);
    executor = app.moduleRef.get(ExecutorService);
    executions = app.dataSource.getRepository(StepExecution);
    records = app.dataSource.getRepository(WorkflowRecord);
    observer = await new DataSource(dataSourceOptions(kind)).initialize();
  });
  afterAll(async () => {
    await observer?.destroy();
    await app.close();
  });
  beforeEach(async () => {
    await app.reset();
    resetPolicies();
    const heroes = app.dataSource.getRepository(TestHero);
    hero = await heroes.save(heroes.create({ name: 'Ada' }));
  });

  const start = (workflowClass: new () => unknown) => workflows.start(workflowClass as PolicyWorkflowClass, hero);
  const history = (wf: WorkflowRecord | string) => workflows.executionHistory(wf);
  const summary = async (wf: WorkflowRecord) => (await history(wf)).map((e) => [e.stepName, e.state, e.outcome]);
  const reload = (wf: WorkflowRecord) => app.gd.reload(wf);
  const rejection = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error);
  const lastJob = () => app.gd.enqueuedJobs.at(-1)!;
  /** Runs the most recently enqueued job, as the queue would; resolves to what it threw (or null). */
  const runJob = () => rejection(executor.execute(lastJob().executionId));
  /** Runs `count` jobs, each expected to throw; returns the errors. */
  const failJobs = async (count: number) => {
    const errors: unknown[] = [];
    for (let i = 0; i < count; i++) {
      const error = await runJob();
      expect(error).not.toBeNull();
      errors.push(error);
    }
    return errors;
  };
  const alwaysFail = (message = 'still failing', type: new (message: string) => Error = TransientError) => {
    policyPlan.otherwise = () => new type(message);
  };
  const reattemptedRows = async (wf: WorkflowRecord) => (await history(wf)).filter((e) => e.outcome === 'reattempted');
  const seed = async (wf: WorkflowRecord, rows: SeedRow[]) => {
    const now = Date.now();
    for (const row of rows) {
      const at = new Date(now - row.ageMs);
      const state = row.state ?? 'completed';
      await executions.insert({
        workflowId: wf.id,
        stepName: 'work',
        state,
        outcome: row.outcome ?? 'reattempted',
        scheduledFor: at,
        startedAt: at,
        completedAt: state === 'completed' ? at : null,
        failedAt: state === 'failed' ? at : null,
        canceledAt: state === 'canceled' ? at : null,
        skippedAt: state === 'skipped' ? at : null,
        finishedAt: at,
        metadata: seedMetadata(row, state),
        createdAt: at,
        updatedAt: at,
      } as never);
    }
  };
  /** What the engine writes: a reason on reattempted rows, the exception on failed ones, nothing otherwise. */
  const seedMetadata = (row: SeedRow, state: StepExecutionState) => {
    if (row.reason === null) return null;
    if ((row.outcome ?? 'reattempted') === 'reattempted') return { reattemptReason: row.reason ?? 'exception_policy' };
    if (state === 'failed') return { exception: { class: 'Error', message: 'seeded', backtrace: null } };
    return null;
  };
  const errorReattempts = (count: number, oldestAgeMs = 600_000): SeedRow[] =>
    Array.from({ length: count }, (_, i) => ({ ageMs: oldestAgeMs - i * 100 }));
  /** Expects a successor of `work` scheduled `delayMs` after the run, which took place in [before, after]. */
  const expectSuccessorDelay = async (wf: WorkflowRecord, before: number, after: number, delayMs: number, stepName = 'work') => {
    const successor = (await workflows.currentExecution(wf))!;
    expect(successor).toMatchObject({ stepName, state: 'scheduled' });
    expect(successor.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + delayMs - 1);
    expect(successor.scheduledFor.getTime()).toBeLessThanOrEqual(after + delayMs + 1);
    expect(lastJob()).toMatchObject({ executionId: successor.id });
    expect(lastJob().runAt.getTime()).toBe(successor.scheduledFor.getTime());
    return successor;
  };

  // ---------------------------------------------------------------- reattempt_on_exception_integration

  describe("onException: 'reattempt'", () => {
    it('starts with one scheduled execution and its job, nothing recorded yet', async () => {
      const wf = await start(SingleReattemptWorkflow);
      const rows = await history(wf);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        stepName: 'only',
        state: 'scheduled',
        outcome: null,
        startedAt: null,
        completedAt: null,
        failedAt: null,
        errorClassName: null,
        errorMessage: null,
        errorBacktrace: null,
        metadata: null,
      });
      expect(rows[0].scheduledFor).toBeInstanceOf(Date);
      expect(app.gd.enqueuedJobs.map((job) => job.executionId)).toEqual([rows[0].id]);
    });

    it('a failure re-throws the original error, completes the execution as reattempted and schedules the step again; the next run succeeds', async () => {
      const thrown = new TransientError('flaky once');
      policyPlan.script = [thrown];
      const wf = await start(SingleReattemptWorkflow);
      const [first] = await history(wf);
      const before = Date.now();

      expect(await runJob()).toBe(thrown); // the very object the body threw
      const after = Date.now();
      const afterFailure = await history(wf);
      expect(afterFailure).toHaveLength(2);
      expect(afterFailure[0]).toMatchObject({
        id: first.id,
        state: 'completed',
        outcome: 'reattempted',
        failedAt: null,
        errorClassName: null,
        errorMessage: null,
        errorBacktrace: null,
      });
      expect(afterFailure[0].completedAt).toBeInstanceOf(Date);
      expect(afterFailure[0].startedAt).toBeInstanceOf(Date);
      expect(afterFailure[0].metadata).toEqual({
        reattemptReason: 'exception_policy',
        exception: { class: 'TransientError', message: 'flaky once', backtrace: expect.any(Array) },
      });
      expect(afterFailure[1]).toMatchObject({ stepName: 'only', state: 'scheduled', outcome: null });
      await expectSuccessorDelay(wf, before, after, 0, 'only');
      expect(await reload(wf)).toMatchObject({ state: 'ready', currentStepName: null, nextStepName: 'only' });
      expect(app.gd.enqueuedJobs).toHaveLength(2);
      expect([await records.count(), await executions.count()]).toEqual([1, 2]);

      expect(await runJob()).toBeNull();
      const finished = await reload(wf);
      expect(finished).toMatchObject({ state: 'finished', currentStepName: null, nextStepName: null });
      expect(finished.transitionedAt).toBeInstanceOf(Date);
      expect(await summary(wf)).toEqual([
        ['only', 'completed', 'reattempted'],
        ['only', 'completed', 'success'],
      ]);
      expect([await records.count(), await executions.count()]).toEqual([1, 2]);
      expect(policyJournal).toEqual(['only', 'only']);
    });

    it("class-level { action: 'reattempt', maxReattempts: 2, terminalAction: 'cancel' }: two failures reattempt, the third cancels", async () => {
      alwaysFail();
      const wf = await start(ClassReattemptCancel);
      await failJobs(2);
      expect((await reload(wf)).state).toBe('ready');
      expect(await history(wf)).toHaveLength(3);

      await failJobs(1);
      const canceled = await reload(wf);
      expect(canceled.state).toBe('canceled');
      expect(canceled.finishedAt).toBeInstanceOf(Date);
      const rows = await history(wf);
      expect(rows.map((e) => [e.state, e.outcome])).toEqual([
        ['completed', 'reattempted'],
        ['completed', 'reattempted'],
        ['failed', 'canceled'],
      ]);
      expect(rows[2]).toMatchObject({ errorClassName: 'TransientError', errorMessage: 'still failing' });
      expect(await workflows.currentExecution(wf)).toBeNull();
    });

    it('… with the default terminal action the third failure pauses', async () => {
      alwaysFail();
      const wf = await start(ClassReattemptPause);
      await failJobs(3);
      expect(await reload(wf)).toMatchObject({ state: 'paused', currentStepName: null, nextStepName: 'work' });
      expect((await history(wf)).map((e) => [e.state, e.outcome])).toEqual([
        ['completed', 'reattempted'],
        ['completed', 'reattempted'],
        ['failed', 'failed'],
      ]);
    });
  });

  // ---------------------------------------------------------------- max_reattempts

  describe('maxReattempts', () => {
    it('maxReattempts 3: three failures reattempt; the fourth fails the execution and pauses the workflow', async () => {
      alwaysFail('persistent');
      const wf = await start(StepMax3);
      await failJobs(3);
      expect((await reload(wf)).state).toBe('ready');
      expect(await history(wf)).toHaveLength(4);

      const [error] = await failJobs(1);
      expect(error).toBeInstanceOf(TransientError);
      expect((await reload(wf)).state).toBe('paused');
      const rows = await history(wf);
      expect(rows).toHaveLength(4);
      expect(rows[3]).toMatchObject({ state: 'failed', outcome: 'failed', errorClassName: 'TransientError', errorMessage: 'persistent' });
      expect(rows[3].failedAt).toBeInstanceOf(Date);
      expect(rows[3].metadata).toEqual({ exception: { class: 'TransientError', message: 'persistent', backtrace: expect.any(Array) } });
      expect(policyJournal).toHaveLength(4);
    });

    it('maxReattempts null: ten failures all reattempt', async () => {
      alwaysFail();
      const wf = await start(StepUnlimited);
      await failJobs(10);
      expect((await reload(wf)).state).toBe('ready');
      expect(await history(wf)).toHaveLength(11);
      expect(await reattemptedRows(wf)).toHaveLength(10);
    });

    it('maxReattempts 10, five failures then a success: the step completes and the workflow goes on', async () => {
      policyPlan.script = Array.from({ length: 5 }, (_, i) => new TransientError(`failure ${i + 1}`));
      const wf = await start(StepMax10);
      await failJobs(5);
      expect(await runJob()).toBeNull(); // work succeeds
      expect(await runJob()).toBeNull(); // next
      expect((await reload(wf)).state).toBe('finished');
      const work = (await history(wf)).filter((e) => e.stepName === 'work');
      expect(work).toHaveLength(6);
      expect(work.filter((e) => e.outcome === 'reattempted')).toHaveLength(5);
      expect(work[5]).toMatchObject({ state: 'completed', outcome: 'success' });
    });

    it('a raising skipIf under maxReattempts 2: two reattempts (reason precondition), then a pause with the error recorded; the body never runs', async () => {
      policyPlan.preconditionErrors = Number.POSITIVE_INFINITY;
      const wf = await start(SkipIfRaisesMax2);
      const errors = await failJobs(2);
      expect(errors.every((e) => e instanceof PreconditionError)).toBe(true);
      expect((await reload(wf)).state).toBe('ready');
      const rows = await history(wf);
      expect(rows).toHaveLength(3);
      for (const row of rows.slice(0, 2)) {
        expect(row).toMatchObject({ state: 'completed', outcome: 'reattempted', startedAt: null });
        expect(row.metadata).toMatchObject({ reattemptReason: 'precondition', exception: { class: 'PreconditionError', message: 'skipIf exploded' } });
      }

      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
      const last = (await history(wf))[2];
      expect(last).toMatchObject({ state: 'failed', outcome: 'failed', startedAt: null, errorClassName: 'PreconditionError', errorMessage: 'skipIf exploded' });
      expect(policyJournal).toEqual([]);
    });

    it('reattempt() from the body is never limited: five flow-control reattempts under maxReattempts 2, then the step completes', async () => {
      policyPlan.script = ['flow-reattempt', 'flow-reattempt', 'flow-reattempt', 'flow-reattempt', 'flow-reattempt', 'ok'];
      const wf = await start(FlowReattemptMax2);
      for (let i = 0; i < 6; i++) expect(await runJob()).toBeNull();
      expect(await runJob()).toBeNull(); // next
      expect((await reload(wf)).state).toBe('finished');
      const work = (await history(wf)).filter((e) => e.stepName === 'work');
      expect(work.map((e) => e.outcome)).toEqual(['reattempted', 'reattempted', 'reattempted', 'reattempted', 'reattempted', 'success']);
      expect(work.slice(0, 5).map((e) => e.metadata)).toEqual(Array(5).fill({ reattemptReason: 'flow_control' }));
    });

    it("the default bound is 100: a step-level 'reattempt' reattempts 100 times and the 101st failure pauses", async () => {
      alwaysFail();
      const [, StepString] = DEFAULT_LIMIT_FORMS[0];
      const wf = await start(StepString);
      await failJobs(100);
      expect((await reload(wf)).state).toBe('ready');
      expect(await reattemptedRows(wf)).toHaveLength(100);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
      const rows = await history(wf);
      expect(rows).toHaveLength(101);
      expect(rows[100]).toMatchObject({ state: 'failed', outcome: 'failed' });
    }, 120_000);

    it.each(DEFAULT_LIMIT_FORMS)('the default bound of 100 applies to %s too', async (_form, workflowClass) => {
      alwaysFail();
      const wf = await start(workflowClass);
      await seed(wf, errorReattempts(99));
      await failJobs(1); // the 100th reattempt is still allowed
      expect((await reload(wf)).state).toBe('ready');
      expect(await reattemptedRows(wf)).toHaveLength(100);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
      expect((await history(wf)).at(-1)).toMatchObject({ state: 'failed', outcome: 'failed', errorMessage: 'still failing' });
    });

    it('a class-level ExceptionPolicy with maxReattempts null keeps reattempting past 100', async () => {
      alwaysFail();
      const wf = await start(ClassUnlimited);
      await executions.insert(
        errorReattempts(150).map((row) => {
          const at = new Date(Date.now() - row.ageMs);
          return { workflowId: wf.id, stepName: 'work', state: 'completed', outcome: 'reattempted', scheduledFor: at, finishedAt: at, metadata: { reattemptReason: 'exception_policy' }, createdAt: at, updatedAt: at };
        }) as never,
      );
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
      expect(await reattemptedRows(wf)).toHaveLength(151);
    });

    it("terminalAction 'cancel': the execution fails with outcome canceled, the error recorded, and the workflow is canceled", async () => {
      alwaysFail('gave up');
      const wf = await start(StepMax2Cancel);
      await failJobs(3);
      const workflow = await reload(wf);
      expect(workflow.state).toBe('canceled');
      expect(workflow.finishedAt).toBeInstanceOf(Date);
      const last = (await history(wf))[2];
      expect(last).toMatchObject({ state: 'failed', outcome: 'canceled', errorClassName: 'TransientError', errorMessage: 'gave up' });
      expect(last.errorBacktrace).toContain('policy-workflows');
      expect(last.metadata).toMatchObject({ exception: { class: 'TransientError', message: 'gave up' } });
      expect(last.metadata?.reattemptReason).toBeUndefined();
      expect(await history(wf)).toHaveLength(3);
    });
  });

  // ---------------------------------------------------------------- consecutive counting

  describe('counting consecutive error reattempts', () => {
    it('counts only since the last success', async () => {
      alwaysFail();
      const wf = await start(StepMax3);
      // five error reattempts, a success, two error reattempts: the count is 2, not 7.
      await seed(wf, [...errorReattempts(5, 900_000), { outcome: 'success', ageMs: 500_000 }, ...errorReattempts(2, 400_000)]);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready'); // 3rd consecutive reattempt allowed
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
    });

    it('does not count flow-control reattempts, but counts rows without a recorded reason', async () => {
      alwaysFail();
      const wf = await start(StepMax3);
      await seed(wf, [
        { reason: 'exception_policy', ageMs: 900_000 },
        { reason: 'flow_control', ageMs: 800_000 },
        { reason: 'flow_control', ageMs: 700_000 },
        { reason: null, ageMs: 600_000 }, // counts
        { reason: 'flow_control', ageMs: 500_000 },
      ]);
      await failJobs(1); // count 2 → the 3rd reattempt
      expect((await reload(wf)).state).toBe('ready');
      await failJobs(1); // count 3 → limit
      expect((await reload(wf)).state).toBe('paused');
    });

    it('failed, canceled and skipped executions do not reset the count', async () => {
      alwaysFail();
      const wf = await start(StepMax3);
      await seed(wf, [
        { ageMs: 900_000 },
        { state: 'failed', outcome: 'failed', ageMs: 800_000 },
        { ageMs: 700_000 },
        { state: 'canceled', outcome: 'canceled', ageMs: 600_000 },
        { state: 'skipped', outcome: 'skipped', ageMs: 500_000 },
      ]);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
    });

    it('orders by creation time (then id), not by id: a success with a higher id but an older created_at does not reset the count', async () => {
      alwaysFail();
      const wf = await start(StepMax3);
      // Inserted first (lower ids) but created later: three error reattempts.
      await seed(wf, errorReattempts(3, 300_000));
      // Inserted last (highest id) but created before them: the success.
      await seed(wf, [{ outcome: 'success', ageMs: 900_000 }]);
      const seeded = (await history(wf)).filter((e) => e.state !== 'scheduled');
      expect(seeded.map((e) => e.outcome)).toEqual(['success', 'reattempted', 'reattempted', 'reattempted']);
      expect(Number(seeded[0].id)).toBeGreaterThan(Number(seeded[3].id));

      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused'); // by id it would have been a first reattempt
    });

    it('… and the converse: a success created last resets the count even with the lowest id', async () => {
      alwaysFail();
      const wf = await start(StepMax3);
      await seed(wf, [{ outcome: 'success', ageMs: 100_000 }]);
      await seed(wf, errorReattempts(3, 900_000));
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
    });

    it('resume does not reset the count: after a terminal pause each resume gives one more attempt', async () => {
      alwaysFail('down');
      const wf = await start(StepMax1);
      await failJobs(2);
      expect((await reload(wf)).state).toBe('paused');

      await workflows.resume(wf);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
      expect((await history(wf)).map((e) => [e.state, e.outcome])).toEqual([
        ['completed', 'reattempted'],
        ['failed', 'failed'],
        ['failed', 'failed'],
      ]);

      policyPlan.otherwise = undefined;
      await workflows.resume(wf);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
    });

    it('three flow-control reattempts do not count: under a class limit of 1 the first error still reattempts, the second pauses', async () => {
      policyPlan.script = ['flow-reattempt', 'flow-reattempt', 'flow-reattempt', new TransientError('one'), new TransientError('two')];
      const wf = await start(ClassMax1);
      for (let i = 0; i < 3; i++) expect(await runJob()).toBeNull();
      const flowRows = await reattemptedRows(wf);
      expect(flowRows.map((e) => e.metadata?.reattemptReason)).toEqual(['flow_control', 'flow_control', 'flow_control']);

      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
      expect((await history(wf)).at(-2)?.metadata?.reattemptReason).toBe('exception_policy');
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
    });
  });

  // ---------------------------------------------------------------- metadata

  describe('metadata', () => {
    const rawMetadata = async (id: string) => {
      const escape = (name: string) => app.dataSource.driver.escape(name);
      const placeholder = kind === 'postgres' ? '$1' : '?';
      const [row] = await app.dataSource.query(`SELECT ${escape('metadata')} AS m FROM ${escape('geneva_drive_step_executions')} WHERE ${escape('id')} = ${placeholder}`, [id]);
      return typeof row.m === 'string' ? JSON.parse(row.m) : row.m;
    };

    it('a reattempted execution stores JSON with reattemptReason and exception { class, message, backtrace[] }', async () => {
      policyPlan.script = [new RateLimitedError('slow down')];
      const wf = await start(ClassReattemptPause);
      await failJobs(1);
      const [row] = await history(wf);
      const stored = await rawMetadata(row.id);
      expect(Object.keys(stored).sort()).toEqual(['exception', 'reattemptReason']);
      expect(stored.reattemptReason).toBe('exception_policy');
      expect(stored.exception.class).toBe('RateLimitedError');
      expect(stored.exception.message).toBe('slow down');
      expect(Array.isArray(stored.exception.backtrace)).toBe(true);
      expect(stored.exception.backtrace.length).toBeGreaterThan(0);
      expect(stored.exception.backtrace.every((line: unknown) => typeof line === 'string')).toBe(true);
      expect(stored.exception.backtrace.some((line: string) => line.includes('exception-policies.e2e-spec'))).toBe(true); // where it was thrown
      expect(row.metadata).toEqual(stored); // the entity reads the same thing back
    });

    it('a failed execution carries the same exception in metadata as in its error columns', async () => {
      policyPlan.script = [new FatalError('no way')];
      const wf = await start(ClassSpecific);
      await failJobs(1);
      const [row] = await history(wf);
      expect(row).toMatchObject({ state: 'failed', outcome: 'canceled', errorClassName: 'FatalError', errorMessage: 'no way' });
      expect(await rawMetadata(row.id)).toEqual({
        exception: { class: 'FatalError', message: 'no way', backtrace: row.errorBacktrace!.split('\n') },
      });
    });

    it('a flow-control reattempt records its reason and no exception', async () => {
      policyPlan.script = ['flow-reattempt'];
      const wf = await start(FlowReattemptMax2);
      expect(await runJob()).toBeNull();
      const [row] = await history(wf);
      expect(await rawMetadata(row.id)).toEqual({ reattemptReason: 'flow_control' });
    });

    it('metadata is null until something is recorded; keys written by others survive the engine’s writes', async () => {
      policyPlan.script = [new TransientError('again')];
      const wf = await start(ClassReattemptPause);
      const [first] = await history(wf);
      expect(first.metadata).toBeNull();
      await executions.update(first.id, { metadata: { ticket: 'OPS-7', attempts: [1, 2] } });
      expect((await executions.findOneByOrFail({ id: first.id })).metadata).toEqual({ ticket: 'OPS-7', attempts: [1, 2] });

      await failJobs(1);
      const row = await executions.findOneByOrFail({ id: first.id });
      expect(row.metadata).toMatchObject({ ticket: 'OPS-7', attempts: [1, 2], reattemptReason: 'exception_policy', exception: { message: 'again' } });
      expect(row.metadata?.absentKey).toBeUndefined();
    });
  });

  // ---------------------------------------------------------------- class-level policies

  describe('class-level policies', () => {
    it('a blanket reattempt: the first failure reattempts with reason exception_policy; three failures pause (limit 2)', async () => {
      alwaysFail();
      const wf = await start(ClassReattemptPause);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
      const rows = await history(wf);
      expect(rows).toHaveLength(2);
      expect(rows[0]).toMatchObject({ outcome: 'reattempted' });
      expect(rows[0].metadata?.reattemptReason).toBe('exception_policy');
      await failJobs(2);
      expect((await reload(wf)).state).toBe('paused');
    });

    it.each([
      ['TransientError (by class)', () => new TransientError('t'), 'ready', ['completed', 'reattempted']],
      ['a subclass of TransientError', () => new RateLimitedError('r'), 'ready', ['completed', 'reattempted']],
      ['FatalError (by class name)', () => new FatalError('f'), 'canceled', ['failed', 'canceled']],
      ['an error the predicate matches', () => new Error('skip me'), 'ready', ['skipped', 'skipped']],
      ['an error no policy matches (the step default)', () => new Error('unmatched'), 'paused', ['failed', 'failed']],
    ] as const)('specific policies: %s', async (_what, error, workflowState, [state, outcome]) => {
      policyPlan.script = [error()];
      const wf = await start(ClassSpecific);
      await failJobs(1);
      expect((await reload(wf)).state).toBe(workflowState);
      expect((await history(wf))[0]).toMatchObject({ stepName: 'work', state, outcome });
    });

    it('the predicate-matched skip moves on to the next step', async () => {
      policyPlan.script = [new Error('skip me')];
      const wf = await start(ClassSpecific);
      await failJobs(1);
      expect(await reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'next' });
      expect(await summary(wf)).toEqual([
        ['work', 'skipped', 'skipped'],
        ['next', 'scheduled', null],
      ]);
    });

    it.each([
      ['a specific policy declared before the latest blanket still wins for its errors', () => new TransientError('t'), 'canceled', 'canceled'],
      ['… for subclasses too', () => new RateLimitedError('r'), 'canceled', 'canceled'],
      ['of two specific policies for FatalError the later (cancel) wins over the earlier (skip)', () => new FatalError('f'), 'canceled', 'canceled'],
      ['other errors get the most recent blanket (reattempt), not the earlier one (pause)', () => new Error('other'), 'ready', 'reattempted'],
    ] as const)('precedence: %s', async (_what, error, workflowState, outcome) => {
      policyPlan.script = [error()];
      const wf = await start(ClassPrecedence);
      await failJobs(1);
      expect((await reload(wf)).state).toBe(workflowState);
      expect((await history(wf))[0].outcome).toBe(outcome);
    });

    it("a step's 'skip' beats a class-level reattempt", async () => {
      policyPlan.script = [new TransientError('t')];
      const wf = await start(StepSkipBeatsClass);
      await failJobs(1);
      expect(await reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'next' });
      expect((await history(wf))[0]).toMatchObject({ state: 'skipped', outcome: 'skipped', errorMessage: null });
    });

    it("a step's explicit 'pause' beats a class-level cancel", async () => {
      policyPlan.script = [new TransientError('t')];
      const wf = await start(StepExplicitPauseBeatsClass);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('paused');
      expect((await history(wf))[0]).toMatchObject({ state: 'failed', outcome: 'failed' });
    });

    it("a step's ExceptionPolicy object (reattempt) beats a class-level cancel", async () => {
      policyPlan.script = [new TransientError('t')];
      const wf = await start(StepPolicyObjectBeatsClass);
      await failJobs(1);
      expect((await reload(wf)).state).toBe('ready');
      expect((await history(wf))[0]).toMatchObject({ state: 'completed', outcome: 'reattempted' });
    });

    it("a step's handler calling skip() beats a class-level cancel", async () => {
      policyPlan.script = [new TransientError('t')];
      const wf = await start(StepLambdaBeatsClass);
      await failJobs(1);
      expect(await reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'next' });
      expect((await history(wf))[0]).toMatchObject({ state: 'skipped', outcome: 'skipped' });
    });

    it("a subclass's policies win over its parent's; the parent keeps its own", async () => {
      policyPlan.script = [new Error('plain'), new FatalError('fatal'), new Error('parent')];
      const child = await start(PolicyChild);
      await failJobs(1);
      expect((await reload(child)).state).toBe('ready'); // child's blanket reattempt beats parent's blanket pause
      await failJobs(1);
      expect((await reload(child)).state).toBe('canceled'); // child's specific cancel
      const parent = await start(PolicyParent);
      await failJobs(1);
      expect((await reload(parent)).state).toBe('paused');
    });
  });

  // ---------------------------------------------------------------- imperative handlers

  describe('imperative handlers', () => {
    const HANDLED: Array<[string, PolicyWorkflowClass]> = [
      ['class-level { handler }', ClassHandler],
      ['step-level handler', StepHandler],
    ];

    describe.each(HANDLED)('%s', (_where, workflowClass) => {
      const failOnce = async (decision: Decision) => {
        const thrown = new TransientError('handled');
        policyPlan.script = [thrown];
        policyPlan.decision = decision;
        const wf = await start(workflowClass);
        const before = Date.now();
        const error = await runJob();
        const after = Date.now();
        expect(error).toBe(thrown);
        expect(policyPlan.handled).toEqual([{ error: thrown, heroName: 'Ada', isWorkflow: true }]);
        const [row] = await history(wf);
        // Whatever the handler decides, the error is recorded (SPEC §5).
        expect(row).toMatchObject({ errorClassName: 'TransientError', errorMessage: 'handled' });
        expect(row.errorBacktrace).toContain('exception-policies.e2e-spec');
        expect(row.metadata?.exception).toEqual({ class: 'TransientError', message: 'handled', backtrace: row.errorBacktrace!.split('\n') });
        return { wf, row, before, after };
      };

      it("reattempt({ wait: '30s' }): reattempted after 30 s with reason exception_policy", async () => {
        const { wf, row, before, after } = await failOnce('reattempt:30s');
        expect(row).toMatchObject({ state: 'completed', outcome: 'reattempted' });
        expect(row.metadata?.reattemptReason).toBe('exception_policy');
        expect(await reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'work' });
        await expectSuccessorDelay(wf, before, after, 30 * SECOND);
      });

      it('cancel(): execution canceled, workflow canceled', async () => {
        const { wf, row } = await failOnce('cancel');
        expect(row).toMatchObject({ state: 'canceled', outcome: 'canceled' });
        expect((await reload(wf)).state).toBe('canceled');
      });

      it('pause(): execution canceled, workflow paused at this step', async () => {
        const { wf, row } = await failOnce('pause');
        expect(row).toMatchObject({ state: 'canceled', outcome: 'canceled' });
        expect(await reload(wf)).toMatchObject({ state: 'paused', nextStepName: 'work' });
      });

      it('skip(): execution skipped, the next step scheduled', async () => {
        const { wf, row } = await failOnce('skip');
        expect(row).toMatchObject({ state: 'skipped', outcome: 'skipped' });
        expect(await reload(wf)).toMatchObject({ state: 'ready', nextStepName: 'next' });
      });

      it('finished(): execution completed, workflow finished', async () => {
        const { wf, row } = await failOnce('finished');
        expect(row).toMatchObject({ state: 'completed', outcome: 'success' });
        expect((await reload(wf)).state).toBe('finished');
      });

      it('deciding nothing: execution failed, workflow paused', async () => {
        const { wf, row } = await failOnce('nothing');
        expect(row).toMatchObject({ state: 'failed', outcome: 'failed' });
        expect(row.metadata?.reattemptReason).toBeUndefined();
        expect(await reload(wf)).toMatchObject({ state: 'paused', nextStepName: 'work' });
        expect(await history(wf)).toHaveLength(1);
      });
    });

    it('a handler scoped with on: runs for matching errors only', async () => {
      policyPlan.decision = 'skip';
      policyPlan.script = [new RateLimitedError('matched')];
      const handled = await start(ScopedClassHandler);
      await failJobs(1);
      expect((await reload(handled)).state).toBe('ready');
      expect(policyPlan.handled).toHaveLength(1);

      policyPlan.script = [new FatalError('unmatched')];
      const blanket = await workflows.start(ScopedClassHandler, hero, { allowMultiple: true });
      await failJobs(1);
      expect((await reload(blanket)).state).toBe('canceled');
      expect(policyPlan.handled).toHaveLength(1);
    });

    it.each([
      ['cancel', 'canceled', 'canceled', 'canceled'],
      ['skip', 'skipped', 'skipped', 'ready'],
      ['reattempt:30s', 'completed', 'reattempted', 'ready'],
      ['nothing', 'failed', 'failed', 'paused'],
    ] as const)('a handler for a raising skipIf decides in signal mode (%s), the body never runs', async (decision, state, outcome, workflowState) => {
      policyPlan.preconditionErrors = 1;
      policyPlan.decision = decision;
      const wf = await start(PreconditionHandler);
      const error = await runJob();
      expect(error).toBeInstanceOf(PreconditionError);
      expect(policyPlan.handled).toHaveLength(1);
      const [row] = await history(wf);
      expect(row).toMatchObject({ state, outcome, startedAt: null, errorClassName: 'PreconditionError', errorMessage: 'skipIf exploded' });
      if (outcome === 'reattempted') expect(row.metadata?.reattemptReason).toBe('precondition');
      const workflow = await reload(wf);
      expect(workflow.state).toBe(workflowState);
      if (decision === 'skip') expect(workflow.nextStepName).toBe('next');
      expect(policyJournal).toEqual([]);
    });

    it('handler reattempts count toward a later declarative limit (the handler itself is unbounded)', async () => {
      policyPlan.decision = 'reattempt';
      policyPlan.script = [new TransientError('1'), new TransientError('2'), new TransientError('3'), new Error('declarative')];
      const wf = await start(HandlerThenLimit);
      await failJobs(3); // three handler reattempts: never limited
      expect((await reload(wf)).state).toBe('ready');
      expect((await reattemptedRows(wf)).map((e) => e.metadata?.reattemptReason)).toEqual(['exception_policy', 'exception_policy', 'exception_policy']);
      await failJobs(1); // the blanket reattempt (limit 2) sees 3 consecutive error reattempts
      expect((await reload(wf)).state).toBe('paused');
    });
  });

  // ---------------------------------------------------------------- handler vs try/catch in the body

  describe('flow control from a handler and from a try/catch in the body', () => {
    /** Runs the first step of `workflowClass` deciding `decision`; returns everything observable. */
    const observe = async (workflowClass: new () => unknown, decision: Decision) => {
      resetPolicies();
      policyPlan.decision = decision;
      policyPlan.script = [new TransientError('handled in the handler')];
      const wf = await start(workflowClass);
      const jobsBefore = app.gd.enqueuedJobs.length;
      const before = Date.now();
      const error = await runJob();
      const after = Date.now();
      const [row, successor] = await history(wf);
      const workflow = await reload(wf);
      return {
        error,
        execution: {
          state: row.state,
          outcome: row.outcome,
          startedAt: row.startedAt !== null,
          completedAt: row.completedAt !== null,
          failedAt: row.failedAt !== null,
          canceledAt: row.canceledAt !== null,
          skippedAt: row.skippedAt !== null,
          finishedAt: row.finishedAt !== null,
        },
        metadata: row.metadata,
        errorColumns: [row.errorClassName, row.errorMessage],
        workflow: { state: workflow.state, currentStepName: workflow.currentStepName, nextStepName: workflow.nextStepName, finished: workflow.finishedAt !== null },
        successor: successor && {
          stepName: successor.stepName,
          state: successor.state,
          delayWithin: successor.scheduledFor.getTime() >= before && successor.scheduledFor.getTime() <= after + 30 * SECOND + 1,
          delayAtLeast30s: successor.scheduledFor.getTime() >= before + 30 * SECOND - 1,
        },
        jobsAdded: app.gd.enqueuedJobs.length - jobsBefore,
      };
    };

    it.each(['reattempt:30s', 'cancel', 'pause', 'skip', 'finished'] as const)('%s: the same execution and workflow outcome either way', async (decision) => {
      const body = await observe(CatchInBodyWorkflow, decision);
      // The body swallowed the marker of its flow-control call, and the intent still held.
      expect(policyJournal).toEqual(['CatchInBody:work', 'CatchInBody:swallowed']);
      const handler = await observe(HandlerTwin, decision);

      expect(handler.execution).toEqual(body.execution);
      expect(handler.workflow).toEqual(body.workflow);
      expect(handler.successor).toEqual(body.successor);
      expect(handler.jobsAdded).toBe(body.jobsAdded);

      // What differs is what only the handler knows: the error. The body handled its own error, so
      // nothing is re-thrown or recorded; the handler's error is recorded and re-thrown (SPEC §5).
      expect(body.error).toBeNull();
      expect(handler.error).toBeInstanceOf(TransientError);
      expect(body.errorColumns).toEqual([null, null]);
      expect(handler.errorColumns).toEqual(['TransientError', 'handled in the handler']);
      const { exception, ...handlerRest } = handler.metadata ?? {};
      expect(exception).toMatchObject({ class: 'TransientError', message: 'handled in the handler' });
      if (decision === 'reattempt:30s') {
        // A reattempt decided for an error is an error reattempt (it counts toward declarative limits).
        expect(body.metadata).toEqual({ reattemptReason: 'flow_control' });
        expect(handlerRest).toEqual({ reattemptReason: 'exception_policy' });
      } else {
        expect(body.metadata).toBeNull();
        expect(handlerRest).toEqual({});
      }
    });
  });

  // ---------------------------------------------------------------- committed before re-thrown

  describe('the error reaches the caller only after the outcome is committed', () => {
    const committed = async (executionId: string) => {
      const execution = await observer.getRepository(StepExecution).findOneByOrFail({ id: executionId });
      const workflow = await observer.getRepository(WorkflowRecord).findOneByOrFail({ id: execution.workflowId });
      const all = await observer.getRepository(StepExecution).find({ where: { workflowId: execution.workflowId }, order: { createdAt: 'ASC', id: 'ASC' } });
      return { execution: [execution.state, execution.outcome], workflow: workflow.state, rows: all.length };
    };

    it.each([
      ['a reattempt', ClassReattemptPause, 'nothing', { execution: ['completed', 'reattempted'], workflow: 'ready', rows: 2 }],
      ['the default pause', StepExplicitPauseBeatsClass, 'nothing', { execution: ['failed', 'failed'], workflow: 'paused', rows: 1 }],
      ['a cancel', ClassSpecific, 'nothing', { execution: ['failed', 'canceled'], workflow: 'canceled', rows: 1 }],
      ['an imperative skip', ClassHandler, 'skip', { execution: ['skipped', 'skipped'], workflow: 'ready', rows: 2 }],
    ] as const)('%s: inside the catch, another connection already sees it', async (_what, workflowClass, decision, expected) => {
      policyPlan.decision = decision;
      policyPlan.script = [workflowClass === ClassSpecific ? new FatalError('boom') : new TransientError('boom')];
      const wf = await start(workflowClass);
      const [first] = await history(wf);
      let seen: unknown;
      try {
        await executor.execute(first.id);
      } catch (error) {
        expect((error as Error).message).toBe('boom');
        seen = await committed(first.id);
      }
      expect(seen).toEqual(expected);
    });

    it('a precondition error too', async () => {
      policyPlan.preconditionErrors = 1;
      const wf = await start(SkipIfRaisesMax2);
      const [first] = await history(wf);
      let seen: unknown;
      try {
        await executor.execute(first.id);
      } catch (error) {
        expect(error).toBeInstanceOf(PreconditionError);
        seen = await committed(first.id);
      }
      expect(seen).toEqual({ execution: ['completed', 'reattempted'], workflow: 'ready', rows: 2 });
    });
  });

  // ---------------------------------------------------------------- backoff

  describe('backoff', () => {
    /** Runs the current job expecting a failure; returns the time window it ran in. */
    const failTimed = async () => {
      const before = Date.now();
      expect(await runJob()).not.toBeNull();
      return { before, after: Date.now() };
    };

    it('a wait function gets attempt numbers 1, 2, 3 for body failures (10 s, 20 s, 30 s)', async () => {
      alwaysFail();
      const wf = await start(LinearFunctionBackoff);
      for (const attempt of [1, 2, 3]) {
        const { before, after } = await failTimed();
        await expectSuccessorDelay(wf, before, after, attempt * 10 * SECOND);
      }
    });

    it('… and the same numbers for precondition failures', async () => {
      policyPlan.preconditionErrors = 3;
      const wf = await start(LinearFunctionBackoff);
      for (const attempt of [1, 2, 3]) {
        const { before, after } = await failTimed();
        await expectSuccessorDelay(wf, before, after, attempt * 10 * SECOND);
      }
      expect((await reattemptedRows(wf)).map((e) => e.metadata?.reattemptReason)).toEqual(['precondition', 'precondition', 'precondition']);
      expect(policyJournal).toEqual([]);
    });

    it('body and precondition failures share one count', async () => {
      policyPlan.script = [new TransientError('body 1')];
      const wf = await start(LinearFunctionBackoff);
      let window = await failTimed();
      await expectSuccessorDelay(wf, window.before, window.after, 10 * SECOND);
      policyPlan.preconditionErrors = 1;
      window = await failTimed();
      await expectSuccessorDelay(wf, window.before, window.after, 20 * SECOND);
      policyPlan.script = [new TransientError('body 2')];
      window = await failTimed();
      await expectSuccessorDelay(wf, window.before, window.after, 30 * SECOND);
    });

    it('failures while preparing the step (not of the step itself) take part in the same count: attempts 1, 2, then 3, 4 around body failures', async () => {
      alwaysFail();
      const wf = await start(LinearFunctionBackoff);
      const prepareFailure = async (delayMs: number) => {
        const before = Date.now();
        expect(await runJob()).toBeInstanceOf(HeroTypeNotFoundError);
        await expectSuccessorDelay(wf, before, Date.now(), delayMs);
        expect((await reload(wf)).state).toBe('ready');
      };
      await records.update(wf.id, { heroType: 'MissingEntity' });
      await prepareFailure(10 * SECOND);
      await prepareFailure(20 * SECOND);
      const rows = await history(wf);
      expect(rows.slice(0, 2).map((e) => [e.state, e.outcome, e.errorClassName, e.metadata?.reattemptReason])).toEqual([
        ['failed', 'failed', 'HeroTypeNotFoundError', 'precondition'],
        ['failed', 'failed', 'HeroTypeNotFoundError', 'precondition'],
      ]);

      await records.update(wf.id, { heroType: 'TestHero' });
      const before = Date.now();
      await failJobs(1); // a body failure: attempt 3
      await expectSuccessorDelay(wf, before, Date.now(), 30 * SECOND);
      await records.update(wf.id, { heroType: 'MissingEntity' });
      await prepareFailure(40 * SECOND);
    });

    it('retried prepare failures count toward maxReattempts: a persistent one ends in the terminal action', async () => {
      const wf = await start(StepMax1);
      await records.update(wf.id, { heroType: 'MissingEntity' });
      expect(await runJob()).toBeInstanceOf(HeroTypeNotFoundError);
      expect((await reload(wf)).state).toBe('ready');
      expect(await runJob()).toBeInstanceOf(HeroTypeNotFoundError);
      expect((await reload(wf)).state).toBe('paused');
      const rows = await history(wf);
      expect(rows.map((e) => [e.state, e.outcome])).toEqual([
        ['failed', 'failed'],
        ['failed', 'failed'],
      ]);
      expect(rows[1].metadata?.reattemptReason).toBeUndefined(); // the terminal failure is not a reattempt
      expect(policyJournal).toEqual([]);
    });

    it('an exponential strategy with max: 1 min, 2 min, then capped at 3 min', async () => {
      alwaysFail();
      const wf = await start(ExponentialBackoff);
      for (const minutes of [1, 2, 3, 3]) {
        const { before, after } = await failTimed();
        await expectSuccessorDelay(wf, before, after, minutes * MINUTE);
      }
    });

    it("a class-level literal with wait '30s': 30 s every time", async () => {
      alwaysFail();
      const wf = await start(ConstantBackoff);
      for (let i = 0; i < 2; i++) {
        const { before, after } = await failTimed();
        await expectSuccessorDelay(wf, before, after, 30 * SECOND);
      }
    });

    it('jitter only adds: linear 1 min with jitter 0.5 lands in [n min, 1.5 × n min]', async () => {
      alwaysFail();
      const wf = await start(JitteredBackoff);
      for (const attempt of [1, 2, 3]) {
        const { before, after } = await failTimed();
        const successor = (await workflows.currentExecution(wf))!;
        expect(successor.scheduledFor.getTime()).toBeGreaterThanOrEqual(before + attempt * MINUTE - 1);
        expect(successor.scheduledFor.getTime()).toBeLessThanOrEqual(after + attempt * MINUTE * 1.5 + 1);
      }
    });

    it("a handler's reattempt({ wait }) uses its own wait, not the strategies", async () => {
      policyPlan.script = [new TransientError('t'), new TransientError('t')];
      policyPlan.decision = 'reattempt:30s';
      const wf = await start(ClassHandler);
      for (let i = 0; i < 2; i++) {
        const { before, after } = await failTimed();
        await expectSuccessorDelay(wf, before, after, 30 * SECOND);
      }
    });
  });
});
