/**
 * GenevaDriveMetricsModule on prom-client: the values read back from the registry after a workflow
 * with a signal ran for real (local queue on every database, Bull on Redis), the housekeeping
 * gauges, the labels (names and outcomes, never an id) and the choice of registry.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { HousekeepingService, InvalidOptionError, QUEUE_PORT, SignalService, StepExecution, WorkflowNotOngoingError, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { GenevaDriveMetricsModule } from 'geneva-drive/metrics';
import { register, Registry } from 'prom-client';
import type { BullQueueAdapter } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { sleep, waitUntil } from '../src/bull-wait.js';
import { SkipOnTimeoutWorkflow } from '../src/deadline-workflows.js';
import { ChargeWorkflow, CONCURRENCY_WORKFLOWS, PairWorkflow, performHeld, slots } from '../src/concurrency-workflows.js';
import { ChoreWorkflow, DeliveryWorkflow } from '../src/housekeeping-workflows.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { describeEachDatabase, enabledDatabases, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { MetricsEndpoint, registry as workerRegistry, WorkerMetricsModule } from '../../docs/samples/metrics.js';

/** Each series of a metric as `name{label=value,...}` → value, sorted; `suffix` picks a histogram's `_count`, `_sum` or `_bucket`. */
async function series(registry: Registry, name: string, suffix = ''): Promise<Record<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find((candidate) => candidate.name === name);
  if (!metric) throw new Error(`${name} is not registered`);
  const entries = (metric.values as Array<{ metricName?: string; labels: Record<string, string | number>; value: number }>)
    .filter((value) => (value.metricName ?? name) === `${name}${suffix}`)
    .map((value) => [Object.entries(value.labels).map(([key, label]) => `${key}=${label}`).join(','), value.value] as const);
  return Object.fromEntries(entries.sort(([a], [b]) => a.localeCompare(b)));
}

const AWAIT = 'workflow_class=DeliveryWorkflow,step=awaitDelivery';
const ARCHIVE = 'workflow_class=DeliveryWorkflow,step=archive';
const HISTOGRAMS = ['geneva_drive_step_duration_seconds', 'geneva_drive_queue_delay_seconds', 'geneva_drive_signal_wake_latency_seconds'];

/**
 * A DeliveryWorkflow runs by itself on the app's queue: it parks, housekeeping reads the gauges, it
 * gets a signal nothing waits for (buffered), its delivery (woke) and a redelivery (duplicate), runs
 * to its end, then refuses a last signal (rejected) and housekeeping runs again.
 */
async function runDelivery(app: TestApp, registry: Registry): Promise<void> {
  const began = Date.now();
  const workflows = app.moduleRef.get(WorkflowService);
  const signals = app.moduleRef.get(SignalService);
  const housekeeping = app.moduleRef.get(HousekeepingService);
  const heroes = app.dataSource.getRepository(TestHero);
  const wf = await workflows.start(DeliveryWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
  const executions = () => app.dataSource.getRepository(StepExecution).find({ where: { workflowId: wf.id } });
  await waitUntil('the step to park', async () => (await executions()).some((execution) => execution.state === 'waiting'));
  await sleep(20); // past the 1 ms visibility threshold

  await housekeeping.run();
  expect(await series(registry, 'geneva_drive_waiting_step_executions')).toEqual({ 'workflow_class=DeliveryWorkflow': 1 });
  expect(await series(registry, 'geneva_drive_waiting_overdue_step_executions')).toEqual({ 'workflow_class=DeliveryWorkflow': 1 });
  expect(await series(registry, 'geneva_drive_stuck_step_executions')).toEqual({ 'state=in_progress': 0, 'state=scheduled': 0 });
  expect(await series(registry, 'geneva_drive_recovery_limit_paused_workflows')).toEqual({});
  expect(await series(registry, 'geneva_drive_paused_workflows')).toEqual({});
  expect(await series(registry, 'geneva_drive_waiting_with_deadline_step_executions')).toEqual({});
  expect(await series(registry, 'geneva_drive_deadlines_overdue_step_executions')).toEqual({});
  expect(await series(registry, 'geneva_drive_step_executions_total')).toEqual({});
  expect(await series(registry, 'geneva_drive_queue_delay_seconds', '_count')).toEqual({ [AWAIT]: 1 });

  const note = await signals.signal(wf, 'note', { allowUnknownName: true }); // no step waits for it
  const delivered = await signals.signal(wf, 'delivered', { payload: { parcel: 'P-1' }, idempotencyKey: 'evt-1' });
  await signals.signal(wf, 'delivered', { payload: { parcel: 'P-1' }, idempotencyKey: 'evt-1' });
  const record = () => app.dataSource.getRepository(WorkflowRecord).findOneByOrFail({ id: wf.id });
  await waitUntil('the workflow to finish', async () => (await record()).state === 'finished');
  await expect(signals.signal(wf, 'delivered')).rejects.toThrow(WorkflowNotOngoingError);
  await housekeeping.run();

  expect(await series(registry, 'geneva_drive_step_executions_total')).toEqual({ [`${ARCHIVE},outcome=completed`]: 1, [`${AWAIT},outcome=completed`]: 1 });
  expect(await series(registry, 'geneva_drive_step_duration_seconds', '_count')).toEqual({ [`${ARCHIVE},outcome=completed`]: 1, [`${AWAIT},outcome=completed`]: 1 });
  // awaitDelivery was taken up twice: when it parked, and when the delivery woke it.
  expect(await series(registry, 'geneva_drive_queue_delay_seconds', '_count')).toEqual({ [ARCHIVE]: 1, [AWAIT]: 2 });
  expect(await series(registry, 'geneva_drive_signal_wake_latency_seconds', '_count')).toEqual({ [AWAIT]: 1 });
  expect(await series(registry, 'geneva_drive_signals_total')).toEqual({
    'name=note,disposition=buffered': 1,
    'name=delivered,disposition=duplicate': 1,
    'name=delivered,disposition=rejected': 1,
    'name=delivered,disposition=woke': 1,
  });
  // Refreshed: nothing parks any more, so the per-class series are gone.
  expect(await series(registry, 'geneva_drive_waiting_step_executions')).toEqual({});
  expect(await series(registry, 'geneva_drive_waiting_overdue_step_executions')).toEqual({});
  expect(await series(registry, 'geneva_drive_stuck_step_executions')).toEqual({ 'state=in_progress': 0, 'state=scheduled': 0 });

  // Durations are real times: between 0 and the whole run, and every observation is under +Inf.
  const elapsedSeconds = (Date.now() - began) / 1000;
  for (const name of HISTOGRAMS) {
    const counts = await series(registry, name, '_count');
    for (const [labels, sum] of Object.entries(await series(registry, name, '_sum'))) {
      expect([labels, sum >= 0 && sum <= elapsedSeconds]).toEqual([labels, true]);
    }
    const infinite = Object.fromEntries(
      Object.entries(await series(registry, name, '_bucket'))
        .filter(([labels]) => labels.split(',').includes('le=+Inf'))
        .map(([labels, value]) => [labels.split(',').filter((label) => label !== 'le=+Inf').join(','), value]),
    );
    expect(infinite).toEqual(counts);
  }

  // Bounded labels: workflow classes, steps, signal names, outcomes and states — no id of any kind.
  const ids = [wf.id, note.id, delivered.id, ...(await executions()).map((execution) => execution.id), String(wf.heroId)];
  const labelValues = new Set<string>();
  const labelNames = new Set<string>();
  for (const metric of await registry.getMetricsAsJSON()) {
    for (const value of metric.values as Array<{ labels: Record<string, string | number> }>) {
      for (const [key, label] of Object.entries(value.labels)) {
        labelNames.add(key);
        if (key !== 'le') labelValues.add(String(label));
      }
    }
  }
  expect([...labelNames].sort()).toEqual(['disposition', 'le', 'name', 'outcome', 'state', 'step', 'workflow_class']);
  expect([...labelValues].sort()).toEqual(['DeliveryWorkflow', 'archive', 'awaitDelivery', 'buffered', 'completed', 'delivered', 'duplicate', 'in_progress', 'note', 'rejected', 'scheduled', 'woke']);
  expect(ids.filter((id) => labelValues.has(id))).toEqual([]);
}

function metricsSuite(kind: DatabaseKind): void {
  let app: TestApp | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('counts a workflow with a signal run on the local queue, in the registry it was given', async () => {
    const registry = new Registry();
    app = await createTestApp(kind, [DeliveryWorkflow], {
      queue: { adapter: 'local' },
      waitingVisibilityThreshold: 1,
      imports: [GenevaDriveMetricsModule.forRoot({ registry })],
    });
    await runDelivery(app, registry);
    expect(register.getSingleMetric('geneva_drive_signals_total')).toBeUndefined();
  });

  it('reports the stuck executions the last housekeeping run recovered, and the workflows the recovery limit paused', async () => {
    const registry = new Registry();
    app = await createTestApp(kind, [ChoreWorkflow], { stuckInProgressThreshold: '1h', maxRecoveries: 1, imports: [GenevaDriveMetricsModule.forRoot({ registry })] });
    const heroes = app.dataSource.getRepository(TestHero);
    const executions = app.dataSource.getRepository(StepExecution);
    const wf = await app.moduleRef.get(WorkflowService).start(ChoreWorkflow, await heroes.save(heroes.create({ name: 'Bo' })));
    const housekeeping = app.moduleRef.get(HousekeepingService);
    const twoHoursAgo = () => new Date(Date.now() - 2 * 3_600_000);
    /** What a worker killed inside the body leaves behind, two hours ago. */
    const dieMidStep = async () => {
      const execution = await executions.findOneByOrFail({ workflowId: wf.id, state: 'scheduled' });
      await executions.update(execution.id, { state: 'in_progress', startedAt: twoHoursAgo() });
      await app!.dataSource.getRepository(WorkflowRecord).update(wf.id, { state: 'performing', currentStepName: execution.stepName, startedAt: twoHoursAgo() });
    };

    // Its job never ran (manual queue): overdue by hours, it counts as a lost enqueue.
    await executions.update({ workflowId: wf.id }, { scheduledFor: new Date(Date.now() - 3 * 3_600_000) });
    await housekeeping.run();
    expect(await series(registry, 'geneva_drive_stuck_step_executions')).toEqual({ 'state=in_progress': 0, 'state=scheduled': 1 });

    await dieMidStep();
    await housekeeping.run();
    expect(await series(registry, 'geneva_drive_stuck_step_executions')).toEqual({ 'state=in_progress': 1, 'state=scheduled': 0 });
    expect(await series(registry, 'geneva_drive_recovery_limit_paused_workflows')).toEqual({});

    await dieMidStep(); // again: past maxRecoveries 1, the workflow is paused
    await housekeeping.run();
    expect(await series(registry, 'geneva_drive_stuck_step_executions')).toEqual({ 'state=in_progress': 0, 'state=scheduled': 0 });
    expect(await series(registry, 'geneva_drive_recovery_limit_paused_workflows')).toEqual({ 'workflow_class=ChoreWorkflow': 1 });
    expect(await series(registry, 'geneva_drive_paused_workflows')).toEqual({ 'workflow_class=ChoreWorkflow': 1 });
    expect(await series(registry, 'geneva_drive_waiting_step_executions')).toEqual({});
  });

  it('counts the executions waiting for and holding a concurrency key, by workflow class and step, never by key', async () => {
    const registry = new Registry();
    app = await createTestApp(kind, CONCURRENCY_WORKFLOWS, { imports: [GenevaDriveMetricsModule.forRoot({ registry })] });
    slots.reset();
    const workflows = app.moduleRef.get(WorkflowService);
    const housekeeping = app.moduleRef.get(HousekeepingService);
    const started = async (workflowClass: typeof ChargeWorkflow | typeof PairWorkflow, key: string) => {
      const hero = await app!.dataSource.getRepository(TestHero).save({ name: key });
      return { hero, workflow: await workflows.start(workflowClass, hero) };
    };
    // acct-1: one holds, two wait; acct-2: one holds, one waits; PairWorkflow.first (limit 2): two hold, one waits.
    const [a, b, c, d, e] = [await started(ChargeWorkflow, 'acct-1'), await started(ChargeWorkflow, 'acct-1'), await started(ChargeWorkflow, 'acct-1'), await started(ChargeWorkflow, 'acct-2'), await started(ChargeWorkflow, 'acct-2')];
    const [p, q, r] = [await started(PairWorkflow, 'pair'), await started(PairWorkflow, 'pair'), await started(PairWorkflow, 'pair')];
    const held = [await performHeld(app.gd, a), await performHeld(app.gd, d), await performHeld(app.gd, p), await performHeld(app.gd, q)];
    for (const waiter of [b, c, e, r]) expect(await app.gd.performNextStep(waiter.workflow)).toMatchObject({ state: 'scheduled', flowKey: waiter.hero.name });

    const summary = await housekeeping.run();
    expect(summary.gauges?.['geneva_drive.flow_key_waiting']).toEqual({ total: 4, byWorkflow: { ChargeWorkflow: { charge: 3 }, PairWorkflow: { first: 1 } } });
    expect(summary.gauges?.['geneva_drive.flow_key_holding']).toEqual({ total: 4, byWorkflow: { ChargeWorkflow: { charge: 2 }, PairWorkflow: { first: 2 } } });
    expect(await series(registry, 'geneva_drive_flow_key_waiting_step_executions')).toEqual({ 'workflow_class=ChargeWorkflow,step=charge': 3, 'workflow_class=PairWorkflow,step=first': 1 });
    expect(await series(registry, 'geneva_drive_flow_key_holding_step_executions')).toEqual({ 'workflow_class=ChargeWorkflow,step=charge': 2, 'workflow_class=PairWorkflow,step=first': 2 });
    const labels = (await registry.getMetricsAsJSON()).flatMap((metric) => (metric.values as Array<{ labels: Record<string, string | number> }>).flatMap((value) => Object.values(value.labels)));
    expect(labels.filter((label) => ['acct-1', 'acct-2', 'pair'].includes(String(label)))).toEqual([]);

    // Every holder ends, and every waiter runs in turn: nothing waits or holds, and the series are gone.
    for (const hold of held) await hold.release();
    for (const waiter of [b, c, e, r]) expect(await app.gd.performNextStep(waiter.workflow)).toMatchObject({ state: 'completed', flowKey: waiter.hero.name });
    await housekeeping.run();
    expect(await series(registry, 'geneva_drive_flow_key_waiting_step_executions')).toEqual({});
    expect(await series(registry, 'geneva_drive_flow_key_holding_step_executions')).toEqual({});
  });

  it('reports no concurrency-key gauges, and no error, without the flow-control migration', async () => {
    const registry = new Registry();
    app = await createTestApp(kind, CONCURRENCY_WORKFLOWS, { withoutFlowControl: true, imports: [GenevaDriveMetricsModule.forRoot({ registry })] });
    const summary = await app.moduleRef.get(HousekeepingService).run();
    expect(summary.gauges).not.toBeNull();
    expect(summary.gauges).not.toHaveProperty(['geneva_drive.flow_key_waiting']);
    expect(summary.gauges).not.toHaveProperty(['geneva_drive.flow_key_holding']);
    expect(await series(registry, 'geneva_drive_flow_key_waiting_step_executions')).toEqual({});
    expect(await series(registry, 'geneva_drive_flow_key_holding_step_executions')).toEqual({});
  });

  it('does not count a wait that timed out as a signal sent', async () => {
    const registry = new Registry();
    app = await createTestApp(kind, [SkipOnTimeoutWorkflow], { imports: [GenevaDriveMetricsModule.forRoot({ registry })] });
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await app.moduleRef.get(WorkflowService).start(SkipOnTimeoutWorkflow, await heroes.save(heroes.create({ name: 'Di' })));
    await app.gd.performNextStep(wf); // send
    await app.gd.performNextStep(wf); // awaitSignature parks
    await app.gd.expireWait(wf);
    await app.gd.assertTimedOut(wf, 'awaitSignature');
    expect(await series(registry, 'geneva_drive_signals_total')).toEqual({});
  });
}

describeEachDatabase('GenevaDriveMetricsModule', metricsSuite);

describe('GenevaDriveMetricsModule on SQLite: the default registry, forRootAsync, a worker', () => {
  let app: TestApp | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("registers in prom-client's default registry, and takes its metrics out again when the app closes", async () => {
    app = await createTestApp('sqlite', [DeliveryWorkflow], { imports: [GenevaDriveMetricsModule.forRoot()] });
    const workflows = app.moduleRef.get(WorkflowService);
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await workflows.start(DeliveryWorkflow, await heroes.save(heroes.create({ name: 'Cy' })));
    await app.gd.performNextStep(wf); // parks
    await app.moduleRef.get(SignalService).signal(wf, 'delivered');
    expect(await series(register, 'geneva_drive_signals_total')).toEqual({ 'name=delivered,disposition=woke': 1 });
    expect(await series(register, 'geneva_drive_queue_delay_seconds', '_count')).toEqual({ [AWAIT]: 1 });
    await app.close();
    app = undefined;
    expect(register.getSingleMetric('geneva_drive_signals_total')).toBeUndefined();
    expect((await register.getMetricsAsJSON()).filter((metric) => metric.name.startsWith('geneva_drive_'))).toEqual([]);
  });

  it('counts in the registry its factory returns, injected from a module of the application', async () => {
    const registry = new Registry();
    @Module({ providers: [{ provide: Registry, useValue: registry }], exports: [Registry] })
    class ScrapeModule {}
    app = await createTestApp('sqlite', [DeliveryWorkflow], {
      imports: [GenevaDriveMetricsModule.forRootAsync({ imports: [ScrapeModule], inject: [Registry], useFactory: (scraped: Registry) => ({ registry: scraped }) })],
    });
    const wf = await app.moduleRef.get(WorkflowService).start(DeliveryWorkflow, await app.dataSource.getRepository(TestHero).save({ name: 'Ed' }));
    await app.gd.performNextStep(wf); // parks
    await app.moduleRef.get(SignalService).signal(wf, 'delivered');
    expect(await series(registry, 'geneva_drive_signals_total')).toEqual({ 'name=delivered,disposition=woke': 1 });
    expect(register.getSingleMetric('geneva_drive_signals_total')).toBeUndefined();
  });

  it("the manual's worker pattern: an application context serves the registry from a port of its own, closed with it", async () => {
    process.env.METRICS_PORT = '0';
    app = await createTestApp('sqlite', [DeliveryWorkflow], { imports: [WorkerMetricsModule] });
    delete process.env.METRICS_PORT; // read as the application bootstrapped
    const wf = await app.moduleRef.get(WorkflowService).start(DeliveryWorkflow, await app.dataSource.getRepository(TestHero).save({ name: 'Flo' }));
    await app.gd.performNextStep(wf); // parks
    await app.moduleRef.get(SignalService).signal(wf, 'delivered');
    const port = app.moduleRef.get(MetricsEndpoint).port;
    const scraped = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect([scraped.status, scraped.headers.get('content-type')]).toEqual([200, workerRegistry.contentType]);
    expect(await scraped.text()).toContain('geneva_drive_signals_total{name="delivered",disposition="woke"} 1');
    await app.close();
    app = undefined;
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  });

  it('refuses at boot what its factory returns that is not an option', async () => {
    const boot = Test.createTestingModule({ imports: [GenevaDriveMetricsModule.forRootAsync({ useFactory: () => ({ registery: new Registry() }) as never })] }).compile();
    await expect(boot).rejects.toThrow(new InvalidOptionError('GenevaDriveMetricsModule', 'registery', 'unknown option "registery" (the options are registry)'));
  });
});

const bullKind = enabledDatabases().includes('postgres') ? 'postgres' : 'sqlite';
(redisAvailable() ? describe : describe.skip)(`GenevaDriveMetricsModule with Bull on Redis [${bullKind}]`, () => {
  let app: TestApp | undefined;

  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('counts the same workflow run by the Bull processor', async () => {
    const registry = new Registry();
    app = await createTestApp(bullKind, [DeliveryWorkflow], {
      queue: { adapter: 'bull', redis: redisUrl(), prefix: `gd-e2e-metrics-${process.pid}`, name: 'gd-metrics' },
      waitingVisibilityThreshold: 1,
      imports: [GenevaDriveMetricsModule.forRoot({ registry })],
    });
    const queue = (app.moduleRef.get(QUEUE_PORT) as BullQueueAdapter).queue;
    // Bull rejects, unhandled, when a queue is closed before its processor finished connecting.
    await waitUntil('the processor to connect', async () => (await queue.getWorkers()).length > 0);
    await runDelivery(app, registry);
  });
});
