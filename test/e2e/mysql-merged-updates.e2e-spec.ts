/**
 * MySQL/MariaDB write a phase's updated rows as one multi-table UPDATE, each row a table of its
 * join; those servers join at most 61 tables in one statement. A batch of more rows goes as several
 * such statements, each row written once.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { GenevaWorkflow, Step, StepExecution, Workflow, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { MysqlHotPathSql } from '../../libs/geneva-drive/src/persistence/sql/mysql.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { enabledDatabases } from '../utils/databases.js';
import { loggedDuring } from '../utils/logged-statements.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow({ hero: () => TestHero })
class ManyRowsWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {}
}

(enabledDatabases().includes('mysql') ? describe : describe.skip)('a phase that updates more rows than one statement may join [mysql]', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp('mysql', [ManyRowsWorkflow]);
  });
  afterAll(() => app?.close());

  it('writes 131 updated rows of two tables, each with its own values, in three UPDATEs of at most 61 rows', async () => {
    const hero = await app.dataSource.getRepository(TestHero).save({ name: 'Ada' });
    const started: WorkflowRecord[] = [];
    for (let i = 0; i < 130; i++) started.push(await app.moduleRef.get(WorkflowService).start(ManyRowsWorkflow, hero, { allowMultiple: true }));
    const execution = (await app.moduleRef.get(WorkflowService).currentExecution(started[129]))!;
    const sql = new MysqlHotPathSql(app.dataSource, true, false);
    const sent = await loggedDuring(app.dataSource, () =>
      sql.write(app.dataSource.manager, {
        updates: [
          // Nothing to write: no table of the join.
          { codec: sql.workflows, id: started[0].id, changes: {} },
          ...started.map((workflow, i) => ({ codec: sql.workflows, id: workflow.id, changes: { state: 'paused', currentStepName: `s${i}` } })),
          // Another table, in the last statement.
          { codec: sql.executions, id: execution.id, changes: { state: 'canceled' } },
        ],
        inserts: [],
        consumptions: [],
      }),
    );

    const rows = await app.dataSource.getRepository(WorkflowRecord).findBy({});
    expect(rows).toHaveLength(130);
    for (const [i, workflow] of started.entries()) {
      const row = rows.find(({ id }) => id === workflow.id)!;
      expect([row.state, row.currentStepName]).toEqual(['paused', `s${i}`]);
    }
    expect((await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: execution.id })).state).toBe('canceled');
    expect(sent.filter((text) => text.startsWith('UPDATE ')).map((text) => text.match(/ u\d+\.`?id`? = \?/g)!.length)).toEqual([61, 61, 9]);
  });
});
