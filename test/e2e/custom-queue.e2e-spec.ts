/**
 * `queue: { adapter: myQueuePort }`: the engine runs on any object implementing QueuePort. The
 * adapter is the manual's own sample (docs/samples/queues.ts), a small timer queue; nothing is driven
 * by hand.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { QUEUE_PORT, QueueConfigurationError, SignalService, WorkflowService, type EnqueueOptions, type StepJob, type WorkflowRecord } from 'geneva-drive';
import { TimerQueue } from '../../docs/samples/queues.js';
import { describeEachDatabase, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { waitUntil } from '../src/bull-wait.js';
import { journalOf, queueJournal, QueueThreeStepWorkflow } from '../src/bull-workflows.js';
import { DeliveryWorkflow, hkJournal } from '../src/housekeeping-workflows.js';

/** The sample queue, noting whether the engine said of each enqueue that it follows a commit no caller waits on. */
class RecordingQueue extends TimerQueue {
  readonly afterCommit: boolean[] = [];

  override async enqueue(job: StepJob, options?: EnqueueOptions): Promise<void> {
    this.afterCommit.push(options?.afterCommit === true);
    await super.enqueue(job);
  }
}

function customQueueSuite(kind: DatabaseKind): void {
  let app: TestApp | undefined;
  let queue: TimerQueue;

  beforeEach(async () => {
    queueJournal.length = 0;
    hkJournal.length = 0;
    queue = new TimerQueue();
    app = await createTestApp(kind, [QueueThreeStepWorkflow, DeliveryWorkflow], { queue: { adapter: queue } });
  });

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  const hero = async () => {
    const heroes = app!.dataSource.getRepository(TestHero);
    return heroes.save(heroes.create({ name: 'Ada' }));
  };
  const waitForState = (wf: WorkflowRecord, state: WorkflowRecord['state']) =>
    waitUntil(`workflow ${wf.id} to be ${state}`, async () => (await app!.moduleRef.get(WorkflowService).find(wf.id)).state === state);

  it('is the QueuePort the engine uses, and runs waits and signals by itself', async () => {
    expect(app!.moduleRef.get(QUEUE_PORT)).toBe(queue);
    const workflows = app!.moduleRef.get(WorkflowService);

    const three = await workflows.start(QueueThreeStepWorkflow, await hero());
    await waitForState(three, 'finished');
    expect(journalOf(three.id)).toEqual(['one', 'two', 'three']);

    const delivery = await workflows.start(DeliveryWorkflow, await hero());
    await waitUntil('the step to park', async () => (await workflows.currentExecution(delivery))?.state === 'waiting');
    await app!.moduleRef.get(SignalService).signal(delivery, 'delivered', { payload: { parcel: 'P-1' } });
    await waitForState(delivery, 'finished');
    expect(hkJournal).toEqual(['delivered P-1', 'archived']);
  });

  it('is told `afterCommit` of every enqueue that follows a commit, and of none awaited inside a transaction (enqueueAfterCommit: false)', async () => {
    await app!.close();
    for (const enqueueAfterCommit of [true, false]) {
      const recording = new RecordingQueue();
      app = await createTestApp(kind, [QueueThreeStepWorkflow, DeliveryWorkflow], { queue: { adapter: recording }, enqueueAfterCommit });
      const workflows = app.moduleRef.get(WorkflowService);
      const delivery = await workflows.start(DeliveryWorkflow, await hero());
      await waitUntil('the step to park', async () => (await workflows.currentExecution(delivery))?.state === 'waiting');
      await app.moduleRef.get(SignalService).signal(delivery, 'delivered', { payload: { parcel: 'P-2' } });
      await waitForState(delivery, 'finished');
      // The start's job and the wake-up at least (steps due at once are chained, with no job).
      expect(recording.afterCommit.length).toBeGreaterThanOrEqual(2);
      expect(new Set(recording.afterCommit)).toEqual(new Set([enqueueAfterCommit]));
      await app.close();
      app = undefined;
    }
  });
}

describeEachDatabase('a queue adapter of the application’s own', customQueueSuite);

describe('queue adapter objects [sqlite]', () => {
  it('refuses an object that does not implement QueuePort, naming the missing methods', async () => {
    const notAPort = { enqueue: async () => undefined, start: async () => undefined };
    await expect(createTestApp('sqlite', [], { queue: { adapter: notAPort as never } })).rejects.toThrow(QueueConfigurationError);
    await expect(createTestApp('sqlite', [], { queue: { adapter: notAPort as never } })).rejects.toThrow(/does not implement QueuePort \(missing repeat, stop\)/);
  });
});
