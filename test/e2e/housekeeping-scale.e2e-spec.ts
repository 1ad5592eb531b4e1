/**
 * Housekeeping at scale: 50,000 old finished workflows (each with one execution, one in ten with a
 * signal) are deleted in bounded batches and the run terminates. The batches are observed through a
 * TypeORM query subscriber (every DELETE statement and its bound ids), never through timing; the
 * elapsed time is printed for information only (with GD_TEST_LOGS=1).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { AfterQueryEvent, EntitySubscriberInterface } from 'typeorm';
import { HousekeepingService, Signal, StepExecution, WorkflowRecord } from 'geneva-drive';
import { describeEachDatabase } from '../utils/databases.js';
import { createTestApp, informationLine, type TestApp } from '../src/test-app.js';
import { ChoreWorkflow } from '../src/housekeeping-workflows.js';

const WORKFLOWS = 50_000;
const RECENT = 25;
const DAY = 86_400_000;
/** Rows per batch: the default, 1000 (so 50 batches). */
const BATCH = 1000;
const INSERT_CHUNK = 1000;

interface DeleteStatement {
  table: string;
  parameters: number;
}

/** Records every successful DELETE statement with the number of values bound to it. */
class DeleteRecorder implements EntitySubscriberInterface {
  readonly statements: DeleteStatement[] = [];
  afterQuery(event: AfterQueryEvent): void {
    const match = /^\s*DELETE\s+FROM\s+["`]?(\w+)["`]?/i.exec(event.query);
    if (!match || !event.success) return;
    const parameters = Array.isArray(event.parameters) ? event.parameters.length : Object.keys(event.parameters ?? {}).length;
    this.statements.push({ table: match[1], parameters });
  }
  of(table: string): DeleteStatement[] {
    return this.statements.filter((statement) => statement.table === table);
  }
}

describeEachDatabase('housekeeping at scale: 50,000 finished workflows', (kind) => {
  const batch = BATCH;
  let app: TestApp;

  beforeAll(async () => {
    app = await createTestApp(kind, [ChoreWorkflow], { deleteCompletedWorkflowsAfter: '30d', housekeepingBatchSize: batch });
  });
  afterAll(() => app.close());

  it(`deletes them all in ceil(50000 / ${batch}) bounded batches, keeps the recent ones, and terminates`, async () => {
    const ds = app.dataSource;
    const old = new Date(Date.now() - 90 * DAY);
    const recent = new Date(Date.now() - DAY);

    const insertStarted = performance.now();
    const row = (i: number, at: Date): Partial<WorkflowRecord> => ({
      type: 'ChoreWorkflow',
      heroType: 'TestHero',
      heroId: String(i),
      state: i % 3 === 0 ? 'canceled' : 'finished',
      allowMultiple: false,
      startedAt: at,
      transitionedAt: at,
      finishedAt: at,
      createdAt: at,
      updatedAt: at,
    });
    for (let start = 0; start < WORKFLOWS; start += INSERT_CHUNK) {
      const chunk: Partial<WorkflowRecord>[] = [];
      for (let i = start; i < Math.min(start + INSERT_CHUNK, WORKFLOWS); i++) chunk.push(row(i, old));
      await ds.createQueryBuilder().insert().into(WorkflowRecord).values(chunk).updateEntity(false).execute();
    }
    const recentRows: Partial<WorkflowRecord>[] = [];
    for (let i = 0; i < RECENT; i++) recentRows.push(row(WORKFLOWS + i, recent));
    await ds.createQueryBuilder().insert().into(WorkflowRecord).values(recentRows).updateEntity(false).execute();

    // One execution per workflow, one signal per ten workflows: one INSERT ... SELECT each.
    const q = (name: string) => ds.driver.escape(name);
    const at = ds.driver.preparePersistentValue(old, ds.getMetadata(StepExecution).findColumnWithPropertyName('createdAt')!);
    const [executionsSql, executionsParams] = ds.driver.escapeQueryWithParameters(
      `INSERT INTO ${q('geneva_drive_step_executions')} (${['workflow_id', 'step_name', 'state', 'outcome', 'scheduled_for', 'started_at', 'completed_at', 'finished_at', 'created_at', 'updated_at'].map(q).join(', ')}) ` +
        `SELECT ${q('id')}, 'sweep', 'completed', 'success', :at, :at, :at, :at, :at, :at FROM ${q('geneva_drive_workflows')}`,
      { at },
    );
    await ds.query(executionsSql, executionsParams);
    const [signalsSql, signalsParams] = ds.driver.escapeQueryWithParameters(
      `INSERT INTO ${q('geneva_drive_signals')} (${['workflow_id', 'name', 'state', 'payload', 'claimed', 'consumed', 'created_at', 'updated_at'].map(q).join(', ')}) ` +
        `SELECT ${q('id')}, 'delivered', 'consumed', NULL, 1, 1, :at, :at FROM ${q('geneva_drive_workflows')} WHERE MOD(${q('id')}, 10) = 0`,
      { at },
    );
    await ds.query(signalsSql, signalsParams);
    const insertMs = performance.now() - insertStarted;

    const total = WORKFLOWS + RECENT;
    expect(await ds.getRepository(WorkflowRecord).count()).toBe(total);
    expect(await ds.getRepository(StepExecution).count()).toBe(total);
    const oldSignals = await ds
      .getRepository(Signal)
      .createQueryBuilder('s')
      .innerJoin(WorkflowRecord, 'w', 'w.id = s.workflowId')
      .where('w.finishedAt < :cutoff', { cutoff: new Date(Date.now() - 30 * DAY) })
      .getCount();
    const allSignals = await ds.getRepository(Signal).count();
    expect(oldSignals).toBeGreaterThan(4_000);

    const deletes = new DeleteRecorder();
    ds.subscribers.push(deletes);
    const runStarted = performance.now();
    let summary;
    try {
      summary = await app.moduleRef.get(HousekeepingService).run();
    } finally {
      ds.subscribers.splice(ds.subscribers.indexOf(deletes), 1);
    }
    const runMs = performance.now() - runStarted;
    informationLine(
      `[housekeeping-scale ${kind}] inserted ${total} workflows in ${Math.round(insertMs)} ms; ` +
        `housekeeping run (batch ${batch}) in ${Math.round(runMs)} ms (information only)`,
    );

    expect(summary).toMatchObject({
      workflowsDeleted: WORKFLOWS,
      stepExecutionsDeleted: WORKFLOWS,
      signalsDeleted: oldSignals,
      stuckInProgressRecovered: 0,
      stuckScheduledRecovered: 0,
      unrecoverable: [],
    });

    // Bounded batches: exactly ceil(N / batch) DELETEs per table, none binding more than `batch` ids.
    const batches = Math.ceil(WORKFLOWS / batch);
    for (const table of ['geneva_drive_workflows', 'geneva_drive_step_executions', 'geneva_drive_signals']) {
      const statements = deletes.of(table);
      expect(statements).toHaveLength(batches);
      for (const statement of statements) {
        expect(statement.parameters).toBeGreaterThan(0);
        expect(statement.parameters).toBeLessThanOrEqual(batch);
      }
    }
    expect(deletes.statements).toHaveLength(3 * batches);

    // Everything old is gone; the recent workflows keep their rows.
    const remaining = await ds.getRepository(WorkflowRecord).find();
    expect(remaining).toHaveLength(RECENT);
    for (const wf of remaining) expect(wf.finishedAt!.getTime()).toBe(recent.getTime());
    expect(await ds.getRepository(StepExecution).count()).toBe(RECENT);
    expect(await ds.getRepository(Signal).count()).toBe(allSignals - oldSignals);

    // A second run finds nothing left to do.
    const again = await app.moduleRef.get(HousekeepingService).run();
    expect(again).toMatchObject({ workflowsDeleted: 0, stepExecutionsDeleted: 0, signalsDeleted: 0 });
  }, 180_000); // 50k rows inserted and deleted: minutes on a loaded machine, and no timing is asserted
});
