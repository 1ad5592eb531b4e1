/**
 * PostgreSQL: `signal()`'s message finds the parked execution of its workflow by the one-active
 * unique index on the workflow while the table has no statistics yet (a new table, a burst before
 * autovacuum). Other workflows' parked rows fill an index that begins with the state; a plan that
 * went by it read every one of them on every signal (2,000 parked: 2,000 rows per call). The plan
 * checked is the generic one, which a session keeps for a prepared statement once it has run it a
 * few times; sequential scans are off for it, so that a vacuum of the small table meanwhile does not
 * decide the plan.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GenevaWorkflow, SignalService, Step, Workflow, WorkflowService } from 'geneva-drive';
import type { AfterQueryEvent, EntitySubscriberInterface } from 'typeorm';
import { waitUntil } from '../src/bull-wait.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { enabledDatabases } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

const PARKED = 150;
/** The executions' indexes that begin with the state. */
const STATE_FIRST = ['geneva_drive_step_executions_scheduled', 'geneva_drive_step_executions_state_flow_key', 'geneva_drive_step_executions_state_timeout'];

@Workflow({ name: 'PlanParked', hero: () => TestHero })
class ParkedWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'go' }) async woken() {}
}

/** The first `signal()` message the engine sends, and its values. */
class SignalMessage implements EntitySubscriberInterface {
  seen?: { query: string; parameters: unknown[] };

  afterQuery(event: AfterQueryEvent): void {
    if (!this.seen && event.query.startsWith('BEGIN; SELECT 1 FROM "geneva_drive_workflows"')) this.seen = { query: event.query, parameters: Array.isArray(event.parameters) ? [...event.parameters] : [] };
  }
}

/** A value as a literal for EXECUTE (which takes no bound parameters). */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  const text = value instanceof Date ? value.toISOString() : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return `'${text.replaceAll("'", "''")}'`;
}

/** The indexes a JSON plan reads on `relation`. */
function indexesOn(plan: unknown, relation: string): string[] {
  const node = plan as { 'Relation Name'?: string; 'Index Name'?: string; Plans?: unknown[] };
  const own = node['Relation Name'] === relation && node['Index Name'] ? [node['Index Name']] : [];
  return [...own, ...(node.Plans ?? []).flatMap((child) => indexesOn(child, relation))];
}

(enabledDatabases().includes('postgres') ? describe : describe.skip)('reads of a workflow’s current execution [postgres]', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp('postgres', [ParkedWorkflow], { queue: { adapter: 'local', concurrency: 4 } });
  });
  afterAll(() => app?.close());

  it(`signal() finds the parked execution by the one-active index, with ${PARKED} others parked`, async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const started = [];
    for (let i = 0; i < PARKED + 1; i++) started.push(await workflows.start(ParkedWorkflow, await heroes.save(heroes.create({ name: `parked ${i}` }))));
    await waitUntil('every workflow to park', async () => {
      const [{ n }] = await app.dataSource.query(`SELECT count(*) AS n FROM geneva_drive_step_executions WHERE state = 'waiting'`);
      return Number(n) === PARKED + 1 ? true : null;
    });
    const message = new SignalMessage();
    app.dataSource.subscribers.push(message);
    await app.moduleRef.get(SignalService).signal(started[0], 'go');
    expect(message.seen).toBeDefined();
    // BEGIN; the lock read; the statement; COMMIT.
    const statement = message.seen!.query.split('; ')[2];
    expect(statement).toMatch(/^WITH w AS \(SELECT /);

    const runner = app.dataSource.createQueryRunner();
    try {
      await runner.query('SET plan_cache_mode = force_generic_plan');
      await runner.query('SET enable_seqscan = off');
      await runner.query(`PREPARE plan_check AS ${statement}`);
      const [{ 'QUERY PLAN': plan }] = await runner.query(`EXPLAIN (FORMAT JSON) EXECUTE plan_check(${message.seen!.parameters.map(literal).join(', ')})`);
      const used = indexesOn(plan[0].Plan, 'geneva_drive_step_executions');
      expect(used).toContain('geneva_drive_step_executions_one_active');
      expect(used.filter((name) => STATE_FIRST.includes(name))).toEqual([]);
    } finally {
      await runner.query('DEALLOCATE plan_check').catch(() => undefined);
      await runner.query('RESET plan_cache_mode').catch(() => undefined);
      await runner.query('RESET enable_seqscan').catch(() => undefined);
      await runner.release();
    }
  });
});
