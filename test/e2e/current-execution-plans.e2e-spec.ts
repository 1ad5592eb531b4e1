/**
 * PostgreSQL: `signal()`'s message, and the statement that starts or parks a chained step in its
 * predecessor's outcome message, find the workflow's current execution by the one-active unique
 * index on the workflow while the table has no statistics yet (a new table, a burst before
 * autovacuum). Other workflows' parked (scheduled) rows fill an index that begins with the state; a
 * plan that went by it read every one of them on every call (2,000 parked: 2,000 rows per call). The plan
 * checked is the generic one, which a session keeps for a prepared statement once it has run it a
 * few times; sequential scans are off for it, so that a vacuum of the small table meanwhile does not
 * decide the plan.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type WorkflowRecord } from 'geneva-drive';
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

/** `a`, then `b` chained in after it: the name-only gate decided in `a`'s outcome message. */
@Workflow({ name: 'PlanChained', hero: () => TestHero })
class ChainedWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async a() {}
  @Step({ waitFor: 'go' }) async b() {}
}

/** Its one step scheduled an hour on: a `scheduled` row that stays. */
@Workflow({ name: 'PlanLater', hero: () => TestHero })
class LaterWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ wait: '1h' }) async later() {}
}

/** The first message the engine sends that `matches`, and its values. */
class FirstMessage implements EntitySubscriberInterface {
  seen?: { query: string; parameters: unknown[] };

  constructor(private readonly matches: (query: string) => boolean) {}

  afterQuery(event: AfterQueryEvent): void {
    if (!this.seen && this.matches(event.query)) this.seen = { query: event.query, parameters: Array.isArray(event.parameters) ? [...event.parameters] : [] };
  }
}

/**
 * A statement of a message sent by HotPathSql.sendStatements (its statements joined by '; ', each
 * numbering its parameters from $1, the message's values theirs in turn) with its own values.
 */
function statementOf(message: { query: string; parameters: unknown[] }, index: number): { sql: string; values: unknown[] } {
  const parts = message.query.split('; ');
  const counts = parts.map((part) => Math.max(0, ...[...part.matchAll(/\$(\d+)/g)].map((match) => Number(match[1]))));
  const from = counts.slice(0, index).reduce((sum, count) => sum + count, 0);
  return { sql: parts[index], values: message.parameters.slice(from, from + counts[index]) };
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
    app = await createTestApp('postgres', [ParkedWorkflow, ChainedWorkflow, LaterWorkflow], { queue: { adapter: 'local', concurrency: 4 } });
  });
  afterAll(() => app?.close());

  const waiting = async () => Number((await app.dataSource.query(`SELECT count(*) AS n FROM geneva_drive_step_executions WHERE state = 'waiting'`))[0].n);

  /** Starts `count` workflows of `workflowClass` and waits until each has parked. */
  async function startParked(workflowClass: typeof ParkedWorkflow | typeof ChainedWorkflow, count: number): Promise<WorkflowRecord[]> {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const before = await waiting();
    const started = [];
    for (let i = 0; i < count; i++) started.push(await workflows.start(workflowClass, await heroes.save(heroes.create({ name: `parked ${i}` }))));
    await waitUntil('every workflow to park', async () => ((await waiting()) === before + count ? true : null));
    return started;
  }

  /** The indexes the generic plan of `statement` reads the executions by (sequential scans off, so that a vacuum of the small table does not decide). */
  async function executionIndexes(statement: { sql: string; values: unknown[] }): Promise<string[]> {
    const runner = app.dataSource.createQueryRunner();
    try {
      await runner.query('SET plan_cache_mode = force_generic_plan');
      await runner.query('SET enable_seqscan = off');
      await runner.query(`PREPARE plan_check AS ${statement.sql}`);
      const [{ 'QUERY PLAN': plan }] = await runner.query(`EXPLAIN (FORMAT JSON) EXECUTE plan_check(${statement.values.map(literal).join(', ')})`);
      return indexesOn(plan[0].Plan, 'geneva_drive_step_executions');
    } finally {
      await runner.query('DEALLOCATE plan_check').catch(() => undefined);
      await runner.query('RESET plan_cache_mode').catch(() => undefined);
      await runner.query('RESET enable_seqscan').catch(() => undefined);
      await runner.release();
    }
  }

  it(`signal() finds the parked execution by the one-active index, with ${PARKED} others parked`, async () => {
    const started = await startParked(ParkedWorkflow, PARKED + 1);
    const message = new FirstMessage((query) => query.startsWith('BEGIN; SELECT 1 FROM "geneva_drive_workflows"'));
    app.dataSource.subscribers.push(message);
    await app.moduleRef.get(SignalService).signal(started[0], 'go');
    expect(message.seen).toBeDefined();
    // BEGIN; the lock read; the statement; COMMIT. The lock read's $1 is the statement's: the values are the statement's.
    const statement = { sql: message.seen!.query.split('; ')[2], values: message.seen!.parameters };
    expect(statement.sql).toMatch(/^WITH w AS \(SELECT /);
    const used = await executionIndexes(statement);
    expect(used).toContain('geneva_drive_step_executions_one_active');
    expect(used.filter((name) => STATE_FIRST.includes(name))).toEqual([]);
  });

  it(`a chained step's start in its predecessor's outcome message finds its row by the one-active index, with ${PARKED} others scheduled`, async () => {
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    for (let i = 0; i < PARKED; i++) await workflows.start(LaterWorkflow, await heroes.save(heroes.create({ name: `later ${i}` })));
    const message = new FirstMessage((query) => query.includes('; WITH h AS ('));
    app.dataSource.subscribers.push(message);
    await startParked(ChainedWorkflow, 1); // beside the ones parked above
    expect(message.seen).toBeDefined();
    // a's outcome as a guarded write; b's start or park.
    const statement = statementOf(message.seen!, 1);
    expect(statement.sql).toMatch(/^WITH h AS \(/);
    const used = await executionIndexes(statement);
    expect(used).toContain('geneva_drive_step_executions_one_active');
    expect(used.filter((name) => STATE_FIRST.includes(name))).toEqual([]);
  });
});
