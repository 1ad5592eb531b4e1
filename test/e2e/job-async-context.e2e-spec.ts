/**
 * A step job runs in an async context of its own, wherever it starts: a job started in the process
 * that enqueued it (the local queue, or a due job Bull or BullMQ starts without Redis) does not see
 * the AsyncLocalStorage stores of the call that enqueued it — a request's store, a transaction a
 * library keeps in one — just as a job delivered through Redis does not.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { afterEach, expect, it } from '@jest/globals';
import { GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import { waitUntil } from '../src/bull-wait.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/** What the caller's request keeps in AsyncLocalStorage. */
const request = new AsyncLocalStorage<string>();
/** What each body saw of it: `<step>:<store or none>`. */
const seen: string[] = [];

@Workflow({ name: 'JobContextWorkflow', hero: () => TestHero })
class JobContextWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async first() {
    seen.push(`first:${request.getStore() ?? 'none'}`);
  }

  @Step({ waitFor: 'go' }) async woken() {
    seen.push(`woken:${request.getStore() ?? 'none'}`);
  }
}

describeEachDatabase('job async context', (kind: DatabaseKind) => {
  let app: TestApp | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
    seen.length = 0;
  });

  it('a job started in the enqueuing process does not run in the context of start() or signal()', async () => {
    app = await createTestApp(kind, [JobContextWorkflow], { queue: { adapter: 'local', concurrency: 2 } });
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'Ada' }));

    const wf: WorkflowRecord = await request.run('request-1', () => workflows.start(JobContextWorkflow, hero));
    await waitUntil('the second step to park', async () => ((await workflows.executionHistory(wf)).at(-1)?.state === 'waiting' ? true : null));
    await request.run('request-2', () => app!.moduleRef.get(SignalService).signal(wf, 'go'));
    await waitUntil(`workflow ${wf.id} to finish`, async () => ((await workflows.find(wf.id)).state === 'finished' ? true : null));

    expect(seen).toEqual(['first:none', 'woken:none']);
  });
});
