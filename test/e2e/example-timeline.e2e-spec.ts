/**
 * The example application's timeline (apps/example/src/timeline.ts) reads a workflow's steps and its
 * signals in two reads. A step's end, which consumes its signal, committed between them must not
 * show the step beside its signal as they never were together: the test commits that end right
 * after the first of the two reads, whichever it is.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from '@jest/globals';
import { GenevaWorkflow, SignalService, Step, Workflow, WorkflowService, type WorkflowRecord } from 'geneva-drive';
import type { EntityManager } from 'typeorm';
import { workflowTimeline } from '../../apps/example/src/timeline.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

@Workflow({ hero: () => TestHero })
class PaidWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'paid' })
  async capture() {}
}

describeEachDatabase('example timeline', (kind: DatabaseKind) => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp(kind, [PaidWorkflow]);
  });
  afterAll(() => app.close());
  beforeEach(() => app.reset());

  for (const [after, reads] of [['the first of its reads', 1], ['its second read', 2]] as const) {
    it(`a step's end committed right after ${after}: the step and its signal shown as one moment left them`, async () => {
      const hero = await app.dataSource.getRepository(TestHero).save({ name: 'Ada' });
      const workflows = app.moduleRef.get(WorkflowService);
      const workflow = await workflows.start(PaidWorkflow, hero);
      await app.gd.performNextStep(workflow); // capture parks
      await app.moduleRef.get(SignalService).signal(workflow, 'paid'); // claimed, capture scheduled

      // capture runs (its end consumes the signal) once that many of the timeline's reads have answered, whichever they are.
      let answered = 0;
      let ended: Promise<unknown> | undefined;
      const counted = async <T>(read: T): Promise<T> => {
        if (++answered === reads) await (ended = app.gd.performNextStep(workflow));
        return read;
      };
      const reading = Object.create(workflows) as WorkflowService;
      reading.executionHistory = (record) => workflows.executionHistory(record).then(counted);
      const manager = Object.create(app.dataSource.manager) as EntityManager;
      manager.findAndCount = ((...args: Parameters<EntityManager['findAndCount']>) => app.dataSource.manager.findAndCount(...args).then(counted)) as EntityManager['findAndCount'];

      const timeline = await workflowTimeline(reading, manager, (await workflows.find(workflow.id)) as WorkflowRecord);

      expect(ended).toBeDefined();
      expect([timeline.steps.map((s) => s.state), timeline.signals.map((s) => s.state)]).toEqual([['completed'], ['consumed']]);
    });
  }
});
