/**
 * uuid primary keys (`genevaDriveMigrations({ primaryKey: 'uuid' })`) on every database: the schema
 * the migrations build, the engine detecting it at boot and assigning time-ordered (v7) ids, and the
 * representative scenarios end to end — plain steps, reattempt counting, waitFor with early, late and
 * redelivered signals, resume after a failure, a resumable chain, housekeeping (cleanup, stuck
 * recovery paged by id), the uniqueness guarantees, Bull and the local queue. A frozen clock puts
 * every row in the same millisecond, where only the ids can keep creation order: histories, reattempt
 * counts, the oldest-first choice of a buffered signal and signal settlement must all still be right.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { DataSource, type QueryRunner, type Repository } from 'typeorm';
import {
  GENEVA_DRIVE_MIGRATIONS,
  genevaDriveMigrations,
  HousekeepingService,
  QUEUE_PORT,
  Signal,
  SignalService,
  StepExecution,
  WorkflowAlreadyOngoingError,
  WorkflowNotOngoingError,
  WorkflowRecord,
  WorkflowService,
} from 'geneva-drive';
import {
  AddGenevaDriveListIndexes1730000000003,
  AddGenevaDriveSignals1730000000001,
  AddGenevaDriveWaitDeadlines1730000000004,
  AddGenevaDriveProcesses1730000000005,
  AddGenevaDriveChildWorkflows1730000000006,
  AddGenevaDriveFlowControl1730000000007,
  AddGenevaDriveFlowKeyIndex1730000000008,
  AddGenevaDriveRateLimits1730000000009,
  PartialGenevaDriveIndexes1730000000010,
  CreateGenevaDriveTables1730000000000,
  ExactGenevaDriveIdentifiers1730000000002,
} from '../../libs/geneva-drive/src/migrations/index.js';
import { detectPrimaryKeyType, uuidv7 } from '../../libs/geneva-drive/src/migrations/primary-keys.js';
import { SchemaCapabilities } from '../../libs/geneva-drive/src/persistence/schema-capabilities.js';
import { WorkflowStore } from '../../libs/geneva-drive/src/persistence/workflow-store.js';
import { isUniqueViolation } from '../../libs/geneva-drive/src/persistence/unique-violation.js';
import { waitUntil } from '../src/bull-wait.js';
import { REDIS_QUEUE_DRIVERS, type RedisQueueDriver } from '../src/redis-queues.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import {
  resetUuidFixtures,
  UUID_WORKFLOWS,
  UuidBoom,
  UuidFlakyWorkflow,
  UuidFragileWorkflow,
  uuidJournal,
  UuidOrderWorkflow,
  UuidPingWorkflow,
  uuidPlan,
  UuidWalkWorkflow,
} from '../src/uuid-workflows.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { CreateTestFixtures1600000000000, UuidHero } from '../utils/fixtures.js';

/** A version-7 uuid in its canonical lowercase text form. */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** Any uuid (rows inserted without the engine get TypeORM's v4 or PostgreSQL's default). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const ago = (ms: number) => new Date(Date.now() - ms);

/** What the uuid migrations declare for every id column, per database (MySQL: type and collation). */
const ID_COLUMN_TYPE: Record<DatabaseKind, string> = { postgres: 'uuid', mysql: 'char(36) ascii_bin', sqlite: 'varchar(36)' };

const ID_COLUMNS: Record<string, string[]> = {
  geneva_drive_workflows: ['id'],
  geneva_drive_step_executions: ['id', 'workflow_id', 'continues_from_id', 'signal_id'],
  geneva_drive_signals: ['id', 'workflow_id'],
};

/** `table.column` → declared type of every id column, read from the catalog. */
async function idColumnTypes(dataSource: DataSource, kind: DatabaseKind): Promise<Record<string, string | undefined>> {
  const types: Record<string, string | undefined> = {};
  for (const [table, names] of Object.entries(ID_COLUMNS)) {
    let rows: Array<{ name: string; type: string }>;
    if (kind === 'sqlite') {
      rows = await dataSource.query(`PRAGMA table_info("${table}")`);
    } else if (kind === 'postgres') {
      rows = await dataSource.query(
        'SELECT column_name AS "name", data_type AS "type" FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1',
        [table],
      );
    } else {
      rows = await dataSource.query(
        "SELECT COLUMN_NAME AS `name`, CONCAT(COLUMN_TYPE, ' ', COLLATION_NAME) AS `type` FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
        [table],
      );
    }
    for (const name of names) types[`${table}.${name}`] = rows.find((row) => row.name === name)?.type.toLowerCase();
  }
  return types;
}

/** Asserts `ids` are v7 uuids, distinct and increasing: the engine's ids sort in creation order. */
function expectCreationOrdered(ids: string[]): void {
  for (const id of ids) expect(id).toMatch(UUID_V7);
  expect(new Set(ids).size).toBe(ids.length);
  expect([...ids].sort()).toEqual(ids);
}

describe('uuid keys: the migration sets and the id generator', () => {
  it('GENEVA_DRIVE_MIGRATIONS stays the bigint set; the uuid set has the same class names (TypeORM identifies migrations by them)', () => {
    expect(genevaDriveMigrations()).toEqual(GENEVA_DRIVE_MIGRATIONS);
    expect(genevaDriveMigrations({ primaryKey: 'bigint' })).toEqual([
      CreateGenevaDriveTables1730000000000,
      AddGenevaDriveSignals1730000000001,
      ExactGenevaDriveIdentifiers1730000000002,
      AddGenevaDriveListIndexes1730000000003,
      AddGenevaDriveWaitDeadlines1730000000004,
      AddGenevaDriveProcesses1730000000005,
      AddGenevaDriveChildWorkflows1730000000006,
      AddGenevaDriveFlowControl1730000000007,
      AddGenevaDriveFlowKeyIndex1730000000008,
      AddGenevaDriveRateLimits1730000000009,
      PartialGenevaDriveIndexes1730000000010,
    ]);
    const uuid = genevaDriveMigrations({ primaryKey: 'uuid' });
    expect(uuid.map((migration) => new migration().name)).toEqual([
      'CreateGenevaDriveTables1730000000000',
      'AddGenevaDriveSignals1730000000001',
      'ExactGenevaDriveIdentifiers1730000000002',
      'AddGenevaDriveListIndexes1730000000003',
      'AddGenevaDriveWaitDeadlines1730000000004',
      'AddGenevaDriveProcesses1730000000005',
      'AddGenevaDriveChildWorkflows1730000000006',
      'AddGenevaDriveFlowControl1730000000007',
      'AddGenevaDriveFlowKeyIndex1730000000008',
      'AddGenevaDriveRateLimits1730000000009',
      'PartialGenevaDriveIndexes1730000000010',
    ]);
    expect(uuid[0].prototype).toBeInstanceOf(CreateGenevaDriveTables1730000000000);
    expect(uuid[1].prototype).toBeInstanceOf(AddGenevaDriveSignals1730000000001);
    // The upgrade to exact identifiers does not depend on the key type: one class for both sets.
    expect(uuid[2]).toBe(ExactGenevaDriveIdentifiers1730000000002);
    expect(uuid[3]).toBe(AddGenevaDriveListIndexes1730000000003);
    expect(uuid[4]).toBe(AddGenevaDriveWaitDeadlines1730000000004);
    expect(uuid[5]).toBe(AddGenevaDriveProcesses1730000000005);
    expect(uuid[6]).toBe(AddGenevaDriveChildWorkflows1730000000006);
    expect(uuid[7]).toBe(AddGenevaDriveFlowControl1730000000007);
    expect(uuid[8]).toBe(AddGenevaDriveFlowKeyIndex1730000000008);
    expect(uuid[9]).toBe(AddGenevaDriveRateLimits1730000000009);
    expect(uuid[10]).toBe(PartialGenevaDriveIndexes1730000000010);
    expect(genevaDriveMigrations({ primaryKey: 'uuid' })).toEqual(uuid); // the same classes on every call
    expect(() => genevaDriveMigrations({ primaryKey: 'int' as never })).toThrow(TypeError);
  });

  it('uuidv7 ids increase strictly, within one millisecond, across a clock that steps back, and past 4096 ids in one millisecond', () => {
    const now = Date.now();
    const ids = [uuidv7(now), ...Array.from({ length: 5000 }, () => uuidv7(now)), uuidv7(now - 10_000), uuidv7(now + 1)];
    expectCreationOrdered(ids);
    expect(ids[0].replace(/-/g, '').slice(0, 12)).toBe(now.toString(16).padStart(12, '0')); // 48-bit millisecond prefix
  });
});

describeEachDatabase('uuid keys', (kind) => {
  let app: TestApp;
  let workflows: WorkflowService;
  let signals: SignalService;
  let housekeeping: HousekeepingService;
  let heroes: Repository<UuidHero>;
  let workflowRows: Repository<WorkflowRecord>;
  let executionRows: Repository<StepExecution>;
  let signalRows: Repository<Signal>;

  beforeAll(async () => {
    app = await createTestApp(kind, UUID_WORKFLOWS, {
      primaryKey: 'uuid',
      stuckInProgressThreshold: '1h',
      stuckScheduledThreshold: '1h',
      deleteCompletedWorkflowsAfter: '30d',
      housekeepingBatchSize: 2, // every sweep pages by id
    });
    workflows = app.moduleRef.get(WorkflowService);
    signals = app.moduleRef.get(SignalService);
    housekeeping = app.moduleRef.get(HousekeepingService);
    heroes = app.dataSource.getRepository(UuidHero);
    workflowRows = app.dataSource.getRepository(WorkflowRecord);
    executionRows = app.dataSource.getRepository(StepExecution);
    signalRows = app.dataSource.getRepository(Signal);
  });
  afterAll(() => app.close());
  beforeEach(async () => {
    await app.reset();
    resetUuidFixtures();
  });

  const newHero = (name = 'Ada') => heroes.save(heroes.create({ name }));
  const history = (wf: WorkflowRecord) => workflows.executionHistory(wf);
  const outcomes = async (wf: WorkflowRecord) => (await history(wf)).map((e) => `${e.stepName}:${e.outcome ?? e.state}`);

  /** What a worker that died mid-step leaves behind, `startedAgoMs` ago. */
  async function leaveInProgress(wf: WorkflowRecord, startedAgoMs: number): Promise<StepExecution> {
    const execution = (await workflows.currentExecution(wf))!;
    expect(execution.state).toBe('scheduled');
    await executionRows.update(execution.id, { state: 'in_progress', startedAt: ago(startedAgoMs) });
    await workflowRows.update(wf.id, { state: 'performing', currentStepName: execution.stepName, startedAt: ago(startedAgoMs) });
    return execution;
  }

  describe('the schema', () => {
    it('has uuid id columns everywhere, recorded under the usual migration names, and the engine detects them', async () => {
      const types = await idColumnTypes(app.dataSource, kind);
      expect(types).toEqual(Object.fromEntries(Object.keys(types).map((column) => [column, ID_COLUMN_TYPE[kind]])));
      expect(Object.keys(types)).toHaveLength(7);

      const runner = app.dataSource.createQueryRunner();
      try {
        for (const table of Object.keys(ID_COLUMNS)) expect(await detectPrimaryKeyType(runner, table)).toBe('uuid');
        expect(await detectPrimaryKeyType(runner, 'no_such_table')).toBeNull();
      } finally {
        await runner.release();
      }
      expect(app.moduleRef.get(SchemaCapabilities, { strict: false }).primaryKey).toBe('uuid');

      const escape = (name: string) => app.dataSource.driver.escape(name);
      const migrations: Array<{ name: string }> = await app.dataSource.query(`SELECT ${escape('name')} FROM ${escape('migrations')} ORDER BY ${escape('timestamp')}`);
      expect(migrations.map((row) => row.name)).toEqual([
        'CreateTestFixtures1600000000000',
        'CreateGenevaDriveTables1730000000000',
        'AddGenevaDriveSignals1730000000001',
        'ExactGenevaDriveIdentifiers1730000000002',
        'AddGenevaDriveListIndexes1730000000003',
        'AddGenevaDriveWaitDeadlines1730000000004',
        'AddGenevaDriveProcesses1730000000005',
        'AddGenevaDriveChildWorkflows1730000000006',
        'AddGenevaDriveFlowControl1730000000007',
        'AddGenevaDriveFlowKeyIndex1730000000008',
        'AddGenevaDriveRateLimits1730000000009',
        'PartialGenevaDriveIndexes1730000000010',
      ]);
    });
  });

  describe('scenarios', () => {
    it('start → steps → finished: uuid ids throughout, the uuid hero loaded, the history in creation order', async () => {
      const hero = await newHero('Ada');
      const wf = await workflows.start(UuidOrderWorkflow, hero);
      expect(wf.id).toMatch(UUID_V7);
      expect(wf).toMatchObject({ heroType: 'UuidHero', heroId: hero.id, state: 'ready', nextStepName: 'pick' });
      expect(await workflows.findOngoing(UuidOrderWorkflow, hero)).toMatchObject({ id: wf.id });

      await app.gd.speedrunWorkflow(wf);

      expect(wf.state).toBe('finished');
      expect(uuidJournal).toEqual(['pick:Ada', 'pack', 'ship']);
      const rows = await history(wf);
      expect(rows.map((e) => [e.stepName, e.outcome, e.workflowId])).toEqual([
        ['pick', 'success', wf.id],
        ['pack', 'success', wf.id],
        ['ship', 'success', wf.id],
      ]);
      expectCreationOrdered([wf.id, ...rows.map((e) => e.id)]);
      expect(await workflows.find(wf.id)).toMatchObject({ id: wf.id, state: 'finished' });
      expect((await workflows.findForHero(UuidOrderWorkflow, hero)).map((w) => w.id)).toEqual([wf.id]);
      expect(await workflows.currentExecution(wf)).toBeNull();
      expect(await workflows.findOngoing(UuidOrderWorkflow, hero)).toBeNull();
    });

    it('reattempt counting: maxReattempts 2 allows two reattempts, the third failure pauses', async () => {
      uuidPlan.flaky = 10;
      const exhausted = await workflows.start(UuidFlakyWorkflow, await newHero());
      for (let run = 0; run < 3; run++) await expect(app.gd.performNextStep(exhausted)).rejects.toThrow(UuidBoom);
      await app.gd.assertWorkflowState(exhausted, 'paused');
      expect(await outcomes(exhausted)).toEqual(['flaky:reattempted', 'flaky:reattempted', 'flaky:failed']);

      resetUuidFixtures();
      uuidPlan.flaky = 2;
      const recovers = await workflows.start(UuidFlakyWorkflow, await newHero('Bob'));
      for (let run = 0; run < 2; run++) await expect(app.gd.performNextStep(recovers)).rejects.toThrow(UuidBoom);
      await app.gd.speedrunWorkflow(recovers);
      expect(recovers.state).toBe('finished');
      expect(await outcomes(recovers)).toEqual(['flaky:reattempted', 'flaky:reattempted', 'flaky:success', 'done:success']);
    });

    it('waitFor: a signal sent with start, one buffered before the step parks, one after it parked; redeliveries are deduplicated', async () => {
      const wf = await workflows.start(UuidPingWorkflow, await newHero(), { signals: [{ name: 'ping', payload: { n: 1 }, idempotencyKey: 'evt-1' }] });
      await app.gd.performNextStep(wf); // first: takes the signal sent with start

      const early = await signals.signal(wf, 'ping', { payload: { n: 2 }, idempotencyKey: 'evt-2' }); // second is scheduled, not parked
      expect(early).toMatchObject({ duplicateDelivery: false, state: 'pending' });
      await app.gd.performNextStep(wf); // second: finds it buffered
      await app.gd.performNextStep(wf); // third: nothing buffered, parks
      await app.gd.assertWaitingForSignal(wf, 'ping');

      const late = await signals.signal(wf, 'ping', { payload: { n: 3 }, idempotencyKey: 'evt-3' });
      expect(late).toMatchObject({ duplicateDelivery: false, state: 'claimed' });
      const again = await signals.signal(wf, 'ping', { payload: { n: 99 }, idempotencyKey: 'evt-3' });
      expect(again).toMatchObject({ duplicateDelivery: true, id: late.id });
      const first = await signals.signal(wf, 'ping', { payload: { n: 98 }, idempotencyKey: 'evt-1' });
      expect(first.duplicateDelivery).toBe(true);
      // The wake-up job carries its own id, built from the two uuids.
      expect(app.gd.enqueuedJobs.map((job) => job.jobId)).toContain(`${(await workflows.currentExecution(wf))!.id}-wake-${late.id}`);

      await app.gd.speedrunWorkflow(wf);

      expect(wf.state).toBe('finished');
      expect(uuidJournal).toEqual(['first:1', 'second:2', 'third:3']);
      const list = await signals.list(wf);
      expect(list.map((s) => [s.payload.n, s.idempotencyKey, s.state, s.claimed, s.consumed, s.workflowId])).toEqual([
        [1, 'evt-1', 'consumed', 1, 1, wf.id],
        [2, 'evt-2', 'consumed', 1, 1, wf.id],
        [3, 'evt-3', 'consumed', 1, 1, wf.id],
      ]);
      expectCreationOrdered(list.map((s) => s.id));
      expect((await history(wf)).map((e) => e.signalId)).toEqual(list.map((s) => s.id));
      await expect(signals.signal(wf, 'ping')).rejects.toThrow(WorkflowNotOngoingError);
    });

    it('resume after a failure runs the failed step again, then goes on', async () => {
      uuidPlan.risky = 1;
      const wf = await workflows.start(UuidFragileWorkflow, await newHero());
      await expect(app.gd.speedrunWorkflow(wf)).rejects.toThrow(UuidBoom);
      await app.gd.assertWorkflowState(wf, 'paused');

      await workflows.resume(wf);
      await app.gd.speedrunWorkflow(wf);

      expect(wf.state).toBe('finished');
      expect(uuidJournal).toEqual(['risky', 'risky', 'after']);
      expect(await outcomes(wf)).toEqual(['risky:failed', 'risky:success', 'after:success']);
      expectCreationOrdered((await history(wf)).map((e) => e.id));
    });

    it('a resumable step chain: each execution continues the one before (uuid links), and resume continues a failed one from its cursor', async () => {
      const wf = await workflows.start(UuidWalkWorkflow, await newHero());
      await app.gd.runIterations(wf, 2);
      await app.gd.runIterations(wf, 2);
      await app.gd.speedrunWorkflow(wf);
      expect(wf.state).toBe('finished');
      expect(uuidJournal).toEqual(['item:1', 'item:2', 'item:3', 'item:4', 'item:5', 'after']);
      const chain = await history(wf);
      expect(chain.map((e) => [e.stepName, e.outcome, e.cursor])).toEqual([
        ['walk', 'continued', 2],
        ['walk', 'continued', 4],
        ['walk', 'success', 5],
        ['after', 'success', null],
      ]);
      expect(chain.map((e) => e.continuesFromId)).toEqual([null, chain[0].id, chain[1].id, null]);

      resetUuidFixtures();
      uuidPlan.walk = 1;
      const failing = await workflows.start(UuidWalkWorkflow, await newHero('Bob'));
      await expect(app.gd.speedrunWorkflow(failing)).rejects.toThrow(UuidBoom);
      await app.gd.assertWorkflowState(failing, 'paused');
      await workflows.resume(failing);
      await app.gd.speedrunWorkflow(failing);
      expect(failing.state).toBe('finished');
      expect(uuidJournal).toEqual(['item:1', 'item:2', 'item:3', 'item:4', 'item:5', 'after']);
      const resumed = await history(failing);
      expect(resumed.map((e) => [e.stepName, e.outcome, e.cursor])).toEqual([
        ['walk', 'failed', 2],
        ['walk', 'success', 5],
        ['after', 'success', null],
      ]);
      expect(resumed[1].continuesFromId).toBe(resumed[0].id);
    });

    it('housekeeping deletes old finished workflows in batches and recovers stuck executions over several id pages', async () => {
      const old: WorkflowRecord[] = [];
      for (const name of ['A', 'B', 'C']) {
        const wf = await workflows.start(UuidOrderWorkflow, await newHero(name));
        await app.gd.speedrunWorkflow(wf);
        await workflowRows.update(wf.id, { finishedAt: ago(40 * DAY) });
        old.push(wf);
      }
      const recent = await workflows.start(UuidOrderWorkflow, await newHero('Recent'));
      await app.gd.speedrunWorkflow(recent);
      await signals.signal(await workflows.start(UuidPingWorkflow, await newHero('Parked')), 'ping', { payload: { n: 1 } }); // buffered, kept

      const inProgress: StepExecution[] = [];
      const scheduled: StepExecution[] = [];
      for (let i = 0; i < 5; i++) inProgress.push(await leaveInProgress(await workflows.start(UuidOrderWorkflow, await newHero(`Crashed ${i}`)), 2 * HOUR));
      for (let i = 0; i < 3; i++) {
        const wf = await workflows.start(UuidOrderWorkflow, await newHero(`Lost ${i}`));
        const execution = (await workflows.currentExecution(wf))!;
        await executionRows.update(execution.id, { scheduledFor: ago(2 * HOUR) });
        scheduled.push(execution);
      }
      (app.gd.enqueuedJobs as unknown[]).length = 0;

      const summary = await housekeeping.run();

      expect(summary).toMatchObject({
        workflowsDeleted: 3,
        stepExecutionsDeleted: 9,
        signalsDeleted: 0,
        stuckInProgressRecovered: 5,
        stuckScheduledRecovered: 3,
        unrecoverable: [],
      });
      expect(await workflowRows.countBy({ state: 'finished' })).toBe(1);
      for (const wf of old) expect(await workflowRows.findOneBy({ id: wf.id })).toBeNull();
      expect(await signalRows.count()).toBe(1);
      // A stuck scheduled row is enqueued again as itself; a stuck in_progress one is closed and continued.
      const jobIds = app.gd.enqueuedJobs.map((job) => job.executionId);
      for (const execution of scheduled) expect(jobIds).toContain(execution.id);
      for (const execution of inProgress) {
        expect(await executionRows.findOneByOrFail({ id: execution.id })).toMatchObject({ state: 'completed', outcome: 'recovered' });
        const successor = (await workflows.currentExecution(execution.workflowId))!;
        expect(successor).toMatchObject({ stepName: 'pick', state: 'scheduled' });
        expect(successor.id > execution.id).toBe(true);
        expect(jobIds).toContain(successor.id);
      }
      for (const execution of [...inProgress, ...scheduled]) {
        expect(await app.gd.speedrunWorkflow(execution.workflowId)).toMatchObject({ state: 'finished' });
      }
      expect(await housekeeping.run()).toMatchObject({ workflowsDeleted: 0, stuckInProgressRecovered: 0, stuckScheduledRecovered: 0 });
    });
  });

  describe('uniqueness guarantees and cascades', () => {
    it('one ongoing workflow per (type, hero) unless allowMultiple; a finished one frees the slot', async () => {
      const hero = await newHero();
      const wf = await workflows.start(UuidOrderWorkflow, hero);
      const error = await workflows.start(UuidOrderWorkflow, hero).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkflowAlreadyOngoingError);
      expect(error).toMatchObject({ heroType: 'UuidHero', heroId: hero.id });
      const extra = await workflows.start(UuidOrderWorkflow, hero, { allowMultiple: true });
      expect(extra.id).not.toBe(wf.id);

      await app.gd.speedrunWorkflow(wf);
      const next = await workflows.start(UuidOrderWorkflow, hero);
      expect((await workflows.findForHero(UuidOrderWorkflow, hero)).map((w) => w.id).sort()).toEqual([wf.id, extra.id, next.id].sort());
    });

    it('one scheduled/waiting/in_progress execution per workflow; any number of finished ones', async () => {
      const wf = await workflows.start(UuidOrderWorkflow, await newHero());
      const other = await workflows.start(UuidOrderWorkflow, await newHero('Bob'));
      const at = new Date();
      const insert = (workflowId: string, state: StepExecution['state']) =>
        executionRows.insert({ workflowId, stepName: 'pick', state, scheduledFor: at, createdAt: at, updatedAt: at });

      for (const state of ['scheduled', 'waiting', 'in_progress'] as const) {
        const error = await insert(wf.id, state).catch((e: unknown) => e);
        expect(isUniqueViolation(error)).toBe(true);
      }
      // A row inserted without the engine still gets a uuid (TypeORM's, or PostgreSQL's column default).
      const { identifiers } = await insert(wf.id, 'completed');
      expect(String(identifiers[0].id)).toMatch(UUID);
      await insert(wf.id, 'canceled');

      await app.gd.speedrunWorkflow(other);
      await insert(other.id, 'waiting'); // the slot is free again
      expect(isUniqueViolation(await insert(other.id, 'scheduled').catch((e: unknown) => e))).toBe(true);
    });

    it('deleting a workflow deletes its executions and signals (foreign keys on uuid columns)', async () => {
      const wf = await workflows.start(UuidPingWorkflow, await newHero());
      await signals.signal(wf, 'ping', { payload: { n: 1 } });
      await app.gd.performNextStep(wf);
      expect(await executionRows.countBy({ workflowId: wf.id })).toBe(2);
      await workflowRows.delete(wf.id);
      expect(await executionRows.countBy({ workflowId: wf.id })).toBe(0);
      expect(await signalRows.countBy({ workflowId: wf.id })).toBe(0);
    });
  });

  describe('every row in the same millisecond (frozen engine clock): the ids keep creation order', () => {
    // Every created_at and updated_at the engine writes comes from WorkflowStore.now(). Freezing it
    // (rather than the global Date, which TypeORM's SQLite driver compares column types against)
    // makes each tie on created_at certain, so only the ids can order the rows.
    beforeEach(() => {
      const frozen = Date.now();
      jest.spyOn(WorkflowStore.prototype, 'now').mockImplementation(() => new Date(frozen));
    });
    afterEach(() => {
      jest.restoreAllMocks();
    });

    const sameMillisecond = (rows: Array<{ createdAt: Date }>) => expect(new Set(rows.map((row) => row.createdAt.getTime())).size).toBe(1);

    it('histories come back oldest first', async () => {
      const wf = await workflows.start(UuidOrderWorkflow, await newHero());
      await app.gd.speedrunWorkflow(wf);
      const rows = await history(wf);
      sameMillisecond([wf, ...rows]);
      expect(rows.map((e) => e.stepName)).toEqual(['pick', 'pack', 'ship']);
      expect((await app.gd.reload(wf)).state).toBe('finished');
    });

    it('reattempts are counted since the last recovery, not across it', async () => {
      uuidPlan.flaky = 10;
      const wf = await workflows.start(UuidFlakyWorkflow, await newHero());
      for (let run = 0; run < 2; run++) await expect(app.gd.performNextStep(wf)).rejects.toThrow(UuidBoom);
      await leaveInProgress(wf, 2 * HOUR); // the third attempt's worker dies
      expect(await housekeeping.run()).toMatchObject({ stuckInProgressRecovered: 1 });
      // A recovery resets the count: two more reattempts, then the limit.
      for (let run = 0; run < 3; run++) await expect(app.gd.performNextStep(wf)).rejects.toThrow(UuidBoom);
      await app.gd.assertWorkflowState(wf, 'paused');
      const rows = await history(wf);
      sameMillisecond(rows);
      expect(rows.map((e) => e.outcome)).toEqual(['reattempted', 'reattempted', 'recovered', 'reattempted', 'reattempted', 'failed']);
    });

    it('buffered signals are taken oldest first, and a retried step settles its signal (the latest execution decides)', async () => {
      uuidPlan.ping = 1; // `second` fails once after attaching its signal, then succeeds on the retry
      const wf = await workflows.start(UuidPingWorkflow, await newHero(), {
        signals: [1, 2, 3, 4, 5].map((n) => ({ name: 'ping', payload: { n } })),
      });
      await expect(app.gd.speedrunWorkflow(wf)).rejects.toThrow(UuidBoom);
      await app.gd.speedrunWorkflow(wf);

      expect(wf.state).toBe('finished');
      expect(uuidJournal).toEqual(['first:1', 'second:2', 'second:2', 'third:3']);
      const list = await signals.list(wf);
      sameMillisecond(list);
      expect(list.map((s) => [s.payload.n, s.state, s.claimed, s.consumed])).toEqual([
        [1, 'consumed', 1, 1],
        [2, 'consumed', 2, 1],
        [3, 'consumed', 1, 1],
        [4, 'pending', 0, 0],
        [5, 'pending', 0, 0],
      ]);
      const rows = await history(wf);
      sameMillisecond([wf, ...rows]);
      expect(rows.map((e) => `${e.stepName}:${e.outcome}`)).toEqual(['first:success', 'second:reattempted', 'second:success', 'third:success']);
      await app.gd.assertSignalState(wf, 'ping', 'pending'); // the most recent one: n = 5
    });
  });
});

describeEachDatabase('uuid keys: a migration set must match the tables', (kind) => {
  /** Silent: TypeORM reports a failing migration on the console whatever `logging` says, and these fail on purpose. */
  const quiet = { log() {}, logQuery() {}, logQueryError() {}, logQuerySlow() {}, logSchemaBuild() {}, logMigration() {} };

  async function open(migrations: Function[]): Promise<DataSource> {
    return new DataSource({ ...dataSourceOptions(kind), migrations: [CreateTestFixtures1600000000000, ...migrations], logger: quiet }).initialize();
  }

  async function inspect<T>(dataSource: DataSource, probe: (runner: QueryRunner) => Promise<T>): Promise<T> {
    const runner = dataSource.createQueryRunner();
    try {
      return await probe(runner);
    } finally {
      await runner.release();
    }
  }

  it('the uuid signals migration refuses bigint tables, and the bigint one uuid tables, before changing anything', async () => {
    const [uuidCreate, uuidSignals] = genevaDriveMigrations({ primaryKey: 'uuid' });

    await prepareDatabase(kind, { withoutSignals: true });
    let dataSource = await open([CreateGenevaDriveTables1730000000000, uuidSignals]);
    try {
      await expect(dataSource.runMigrations()).rejects.toThrow(
        "AddGenevaDriveSignals1730000000001 is configured for uuid keys, but geneva_drive_workflows.id is bigint: list the migration set the tables were created with (GENEVA_DRIVE_MIGRATIONS)",
      );
      expect(await inspect(dataSource, (runner) => runner.hasTable('geneva_drive_signals'))).toBe(false);
    } finally {
      await dataSource.destroy();
    }

    await prepareDatabase(kind, { withoutSignals: true, primaryKey: 'uuid' });
    dataSource = await open([uuidCreate, AddGenevaDriveSignals1730000000001]);
    try {
      await expect(dataSource.runMigrations()).rejects.toThrow(/configured for bigint keys, but geneva_drive_workflows\.id is uuid.*primaryKey: 'uuid'/);
      // The matching set upgrades the same database.
      await dataSource.destroy();
      dataSource = await open([uuidCreate, uuidSignals]);
      await dataSource.runMigrations();
      expect(await inspect(dataSource, (runner) => runner.hasColumn('geneva_drive_step_executions', 'signal_id'))).toBe(true);
    } finally {
      await dataSource.destroy();
    }
  });

  it('the engine refuses to boot on tables that disagree on their key type', async () => {
    await prepareDatabase(kind, { withoutSignals: true });
    const dataSource = await open([]);
    try {
      await dataSource.query(`CREATE TABLE ${dataSource.driver.escape('geneva_drive_signals')} (${dataSource.driver.escape('id')} varchar(36) PRIMARY KEY)`);
      await expect(new SchemaCapabilities().detect(dataSource)).rejects.toThrow(
        /disagree on their key type \(geneva_drive_workflows\.id is bigint, geneva_drive_step_executions\.id is bigint, geneva_drive_signals\.id is uuid\)/,
      );
    } finally {
      await dataSource.destroy();
    }
  });

  it('bigint tables keep bigint keys: no metadata switch, ids from the database', async () => {
    await prepareDatabase(kind);
    const dataSource = await open([]);
    try {
      const schema = new SchemaCapabilities();
      await schema.detect(dataSource);
      expect(schema.primaryKey).toBe('bigint');
      expect(dataSource.getMetadata(WorkflowRecord).primaryColumns[0]).toMatchObject({ type: 'bigint', generationStrategy: 'increment' });
      expect(schema.withNewId({ id: undefined as unknown as string }).id).toBeUndefined();
    } finally {
      await dataSource.destroy();
    }
  });
});

describeEachDatabase('uuid keys: the local queue', (kind) => {
  let app: TestApp;
  afterEach(() => app?.close());

  it('runs a workflow to the end by itself (its timers are rebuilt from uuid rows at boot)', async () => {
    resetUuidFixtures();
    // Boot once on the manual queue to leave a scheduled execution behind, then on the local queue.
    app = await createTestApp(kind, UUID_WORKFLOWS, { primaryKey: 'uuid' });
    const heroes = app.dataSource.getRepository(UuidHero);
    const wf = await app.moduleRef.get(WorkflowService).start(UuidOrderWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    await app.close();

    app = await createTestApp(kind, UUID_WORKFLOWS, { primaryKey: 'uuid', prepare: false, queue: { adapter: 'local', concurrency: 1 } });
    const workflows = app.moduleRef.get(WorkflowService);
    await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');
    expect(uuidJournal).toEqual(['pick:Ada', 'pack', 'ship']);
  });
});

function redisQueueSuite(driver: RedisQueueDriver, kind: DatabaseKind): void {
  const prefix = `gd-e2e-uuid-keys-${driver.adapter}-${process.pid}-${kind}`;
  const QUEUE_NAME = 'geneva-drive-uuid-keys';
  let admin: ReturnType<RedisQueueDriver['handle']>;
  let app: TestApp;

  beforeAll(async () => {
    admin = driver.handle(QUEUE_NAME, prefix);
    await admin.obliterate();
    app = await createTestApp(kind, UUID_WORKFLOWS, { primaryKey: 'uuid', queue: driver.options({ prefix, name: QUEUE_NAME, concurrency: 2 }) });
  });
  afterAll(async () => {
    await app?.close();
    await admin?.obliterate();
    await admin?.close();
  });

  it(`a workflow with waitFor steps runs to the end on ${driver.adapter}: jobs keyed by uuid execution ids, wake-ups by uuid pairs`, async () => {
    resetUuidFixtures();
    const workflows = app.moduleRef.get(WorkflowService);
    const signals = app.moduleRef.get(SignalService);
    const jobIds: string[] = [];
    driver.onActive(app.moduleRef.get(QUEUE_PORT), (job) => jobIds.push(job.jobId));
    const heroes = app.dataSource.getRepository(UuidHero);
    const wf = await workflows.start(UuidPingWorkflow, await heroes.save(heroes.create({ name: 'Ada' })), { signals: [{ name: 'ping', payload: { n: 1 } }] });

    for (const n of [2, 3]) {
      await waitUntil(`a parked step of ${wf.id}`, async () => (await workflows.currentExecution(wf))?.state === 'waiting');
      await signals.signal(wf, 'ping', { payload: { n }, idempotencyKey: `evt-${n}` });
    }
    await waitUntil(`workflow ${wf.id} to finish`, async () => (await workflows.find(wf.id)).state === 'finished');

    expect(uuidJournal).toEqual(['first:1', 'second:2', 'third:3']);
    const rows = await workflows.executionHistory(wf);
    const list = await signals.list(wf);
    // Each execution is recorded under its job id, the uuid execution id or the uuid pair of a
    // wake-up, whether the job went through Redis or started in this worker process (due at once,
    // with a free slot); any job the queue ran had one of those ids.
    const expected = [rows[0].id, `${rows[1].id}-wake-${list[1].id}`, `${rows[2].id}-wake-${list[2].id}`];
    expect(rows.map((row) => row.jobId)).toEqual(expected);
    expect(jobIds.filter((id) => !expected.includes(id))).toEqual([]);
  });
}

function bothAdapters(): void {
  for (const driver of Object.values(REDIS_QUEUE_DRIVERS)) describeEachDatabase(`uuid keys: ${driver.adapter} on Redis`, (kind) => redisQueueSuite(driver, kind));
}

if (redisAvailable()) {
  bothAdapters();
} else {
  describe.skip('uuid keys: Redis queues (skipped: Redis not reachable)', bothAdapters);
}
