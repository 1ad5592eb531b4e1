/**
 * GenevaDriveTracingModule on @opentelemetry/api, with the OpenTelemetry SDK's in-memory exporter:
 * the spans of a workflow with a signal run for real (local queue on every database), their
 * attributes and parents, failures marked as errors, the trace context a job carries only when the
 * module is there, and a `signal()` in one process whose woken step, run by a worker process on
 * Bull or BullMQ, joins its trace.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { context, SpanKind, SpanStatusCode, trace, type TracerProvider } from '@opentelemetry/api';
import { Module } from '@nestjs/common';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import type { ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExecutorService, SignalService, StepExecution, WorkflowAlreadyOngoingError, WorkflowNotOngoingError, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { GENEVA_DRIVE_SPAN_ATTRIBUTES as A, GenevaDriveTracingModule } from 'geneva-drive/tracing';
import { waitUntil } from '../src/bull-wait.js';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
import { REDIS_ADAPTERS, REDIS_QUEUE_DRIVERS } from '../src/redis-queues.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import type { TracingParentMessage, TracingWorkerMessage } from '../src/tracing-worker.js';
import { inMemoryTracerProvider, TRACING_WORKFLOWS, TracedBreakageWorkflow, TracedParcelWorkflow, type SpanSummary } from '../src/tracing-workflows.js';
import { dataSourceOptions, describeEachDatabase, enabledDatabases, redisAvailable, redisUrl, type DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

/**
 * The spans as an outline: each under its parent (spans whose parent is not among them are roots),
 * siblings in order of start; a step's outcome in brackets, `!` on an error.
 */
function outline(spans: SpanSummary[]): string[] {
  const ids = new Set(spans.map((span) => span.spanId));
  const lines: string[] = [];
  const walk = (parentSpanId: string | null, depth: number) => {
    const children = spans
      .filter((span) => (span.parentSpanId !== null && ids.has(span.parentSpanId) ? span.parentSpanId : null) === parentSpanId)
      .sort((a, b) => a.startMs - b.startMs);
    for (const span of children) {
      const outcome = span.name.startsWith('step ') ? ` [${span.attributes[A.outcome]}]` : '';
      lines.push(`${'  '.repeat(depth)}${span.name}${outcome}${span.status === SpanStatusCode.ERROR ? ' !' : ''}`);
      walk(span.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return lines;
}

/** Every span below `root`. */
function below(spans: SpanSummary[], root: SpanSummary): SpanSummary[] {
  const children = spans.filter((span) => span.parentSpanId === root.spanId);
  return children.flatMap((child) => [child, ...below(spans, child)]);
}

const named = (spans: SpanSummary[], name: string) => spans.filter((span) => span.name === name);
const only = (spans: SpanSummary[], name: string) => {
  const found = named(spans, name);
  if (found.length !== 1) throw new Error(`${found.length} spans named ${name}: ${outline(spans).join('\n')}`);
  return found[0];
};

/** Each phase span lies within its step's span, and the phases follow one another. */
function expectPhasesInOrder(spans: SpanSummary[]): void {
  for (const step of spans.filter((span) => span.name.startsWith('step '))) {
    const phases = spans.filter((span) => span.parentSpanId === step.spanId).sort((a, b) => a.startMs - b.startMs);
    expect(phases.length).toBeGreaterThan(0);
    for (const [i, phase] of phases.entries()) {
      expect([phase.name, phase.startMs >= step.startMs, phase.endMs <= step.endMs, phase.startMs <= phase.endMs]).toEqual([phase.name, true, true, true]);
      if (i > 0) expect([phase.name, phases[i - 1].endMs <= phase.startMs]).toEqual([phase.name, true]);
    }
  }
}

/** The outline of TracedParcel's run: start() with the steps it scheduled, signal() with those it woke. */
const PARCEL_OUTLINE = [
  'start TracedParcel',
  '  step TracedParcel.pack [completed]',
  '    prepare TracedParcel.pack',
  '    body TracedParcel.pack',
  '    finalize TracedParcel.pack',
  // Opened by the body: a child of the job's context.
  '  weigh parcel',
  '  step TracedParcel.awaitDelivery [waiting]',
  '    prepare TracedParcel.awaitDelivery',
  'signal delivered',
  '  step TracedParcel.awaitDelivery [completed]',
  '    prepare TracedParcel.awaitDelivery',
  '    body TracedParcel.awaitDelivery',
  '    finalize TracedParcel.awaitDelivery',
  '  step TracedParcel.archive [completed]',
  '    prepare TracedParcel.archive',
  '    body TracedParcel.archive',
  '    finalize TracedParcel.archive',
];

/** Whether a workflow is in `state`, read from its row. */
const inState = (app: TestApp, id: string, state: WorkflowRecord['state']) => async () =>
  (await app.dataSource.getRepository(WorkflowRecord).findOneByOrFail({ id })).state === state;
const parked = (app: TestApp, workflowId: string) => async () =>
  (await app.dataSource.getRepository(StepExecution).find({ where: { workflowId } })).some((execution) => execution.state === 'waiting');

// As an app sets up the SDK: the global tracer provider and context manager (the module's default).
const global = inMemoryTracerProvider();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(global.provider);
});
afterAll(() => {
  trace.disable();
  context.disable();
});

describeEachDatabase('GenevaDriveTracingModule', (kind) => {
  let app: TestApp | undefined;

  beforeEach(() => global.exporter.reset());
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('traces start(), signal() and each step with its phases, each step a child of the call that caused it', async () => {
    app = await createTestApp(kind, TRACING_WORKFLOWS, { queue: { adapter: 'local' }, imports: [GenevaDriveTracingModule.forRoot()] });
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await app.moduleRef.get(WorkflowService).start(TracedParcelWorkflow, await heroes.save(heroes.create({ name: 'Ada' })));
    await waitUntil('the step to park', parked(app, wf.id));
    const delivered = await app.moduleRef.get(SignalService).signal(wf, 'delivered', { payload: { parcel: 'P-1' } });
    await waitUntil('the workflow to finish', inState(app, wf.id, 'finished'));
    await waitUntil('the last step span', () => named(global.spans(), 'step TracedParcel.archive').length === 1);

    const spans = global.spans();
    expect(outline(spans)).toEqual(PARCEL_OUTLINE);
    expectPhasesInOrder(spans);
    const start = only(spans, 'start TracedParcel');
    const signal = only(spans, 'signal delivered');
    expect([start.kind, start.parentSpanId, start.status, start.attributes]).toEqual([
      SpanKind.PRODUCER,
      null,
      SpanStatusCode.UNSET,
      { [A.workflowClass]: 'TracedParcel', [A.workflowId]: wf.id },
    ]);
    expect([signal.kind, signal.parentSpanId, signal.attributes]).toEqual([
      SpanKind.PRODUCER,
      null,
      { [A.signalName]: 'delivered', [A.workflowId]: wf.id, [A.workflowClass]: 'TracedParcel', [A.signalDisposition]: 'woke', [A.signalId]: delivered.id },
    ]);
    // One trace per call: what it caused joins it.
    expect(below(spans, start).map((span) => span.traceId)).toEqual(Array(7).fill(start.traceId));
    expect(below(spans, signal).map((span) => span.traceId)).toEqual(Array(8).fill(signal.traceId));
    expect(spans.filter((span) => span.name.startsWith('step ')).map((span) => span.kind)).toEqual(Array(4).fill(SpanKind.CONSUMER));
    const history = await app.moduleRef.get(WorkflowService).executionHistory(wf);
    const [pack, awaitDelivery, archive] = history;
    const woken = named(spans, 'step TracedParcel.awaitDelivery').find((span) => span.parentSpanId === signal.spanId)!;
    expect(woken.attributes).toEqual({
      [A.workflowClass]: 'TracedParcel',
      [A.step]: 'awaitDelivery',
      [A.workflowId]: wf.id,
      [A.executionId]: awaitDelivery.id,
      [A.outcome]: 'completed',
      [A.workflowState]: 'ready',
      [A.stepState]: 'completed',
    });
    expect(only(spans, 'step TracedParcel.archive').attributes).toMatchObject({ [A.executionId]: archive.id, [A.workflowState]: 'finished', [A.stepState]: 'completed' });
    expect(only(spans, 'step TracedParcel.pack').attributes).toMatchObject({ [A.executionId]: pack.id });
    expect(spans.filter((span) => span.parentSpanId === woken.spanId).map((span) => [span.name, span.attributes[A.precondition], span.attributes[A.outcome]])).toEqual([
      ['prepare TracedParcel.awaitDelivery', 'passed', undefined],
      ['body TracedParcel.awaitDelivery', undefined, 'completed'],
      ['finalize TracedParcel.awaitDelivery', undefined, undefined],
    ]);
    const parkedSpan = named(spans, 'step TracedParcel.awaitDelivery').find((span) => span.parentSpanId === start.spanId)!;
    expect(spans.filter((span) => span.parentSpanId === parkedSpan.spanId).map((span) => span.attributes[A.precondition])).toEqual(['waiting']);
    // Ids are attributes, never names.
    const ids = [wf.id, delivered.id, String(wf.heroId), ...history.map((execution) => execution.id)];
    expect(spans.map((span) => span.name).filter((name) => ids.some((id) => name.includes(id)))).toEqual([]);
  });

  it('marks what failed as errors: a step that raised, a start() refused, a signal() rejected', async () => {
    app = await createTestApp(kind, TRACING_WORKFLOWS, { queue: { adapter: 'local' }, imports: [GenevaDriveTracingModule.forRoot()] });
    const workflows = app.moduleRef.get(WorkflowService);
    const hero = await app.dataSource.getRepository(TestHero).save({ name: 'Bo' });
    const wf = await workflows.start(TracedBreakageWorkflow, hero);
    await waitUntil('the workflow to pause', inState(app, wf.id, 'paused'));
    await waitUntil('the step span', () => named(global.spans(), 'step TracedBreakage.handle').length === 1);
    await expect(workflows.start(TracedBreakageWorkflow, hero)).rejects.toThrow(WorkflowAlreadyOngoingError);
    await workflows.cancel(wf);
    await expect(app.moduleRef.get(SignalService).signal(wf, 'delivered', { allowUnknownName: true })).rejects.toThrow(WorkflowNotOngoingError);

    const spans = global.spans();
    expect(outline(spans)).toEqual([
      'start TracedBreakage',
      '  step TracedBreakage.handle [exception] !',
      '    prepare TracedBreakage.handle',
      '    body TracedBreakage.handle !',
      '    finalize TracedBreakage.handle',
      'start TracedBreakage !',
      'signal delivered !',
    ]);
    const step = only(spans, 'step TracedBreakage.handle');
    expect([step.exceptions, step.attributes[A.workflowState], step.attributes[A.stepState]]).toEqual([['parcel dropped'], 'paused', 'failed']);
    expect(only(spans, 'body TracedBreakage.handle').exceptions).toEqual(['parcel dropped']);
    const [, refused] = named(spans, 'start TracedBreakage');
    expect([refused.exceptions.length, refused.attributes[A.workflowId]]).toEqual([1, undefined]);
    expect(only(spans, 'signal delivered').attributes).toMatchObject({ [A.signalDisposition]: 'rejected', [A.workflowClass]: 'TracedBreakage' });
  });
});

describe('the trace context of a job', () => {
  let app: TestApp | undefined;

  beforeEach(() => global.exporter.reset());
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  /** Starts a TracedParcel inside a span of the caller's; the job the manual queue recorded, and that span. */
  const startInSpan = async (started: TestApp) => {
    const heroes = started.dataSource.getRepository(TestHero);
    const hero = await heroes.save(heroes.create({ name: 'Cy' }));
    const caller = trace.getTracer('caller').startSpan('handle request');
    const wf = await context.with(trace.setSpan(context.active(), caller), () => started.moduleRef.get(WorkflowService).start(TracedParcelWorkflow, hero));
    caller.end();
    const [job] = started.gd.enqueuedJobs;
    return { wf, job, caller: caller.spanContext() };
  };

  it('is not carried without the tracing module', async () => {
    app = await createTestApp('sqlite', TRACING_WORKFLOWS);
    const { job } = await startInSpan(app);
    expect(job.hints).toEqual({ workflowId: expect.any(String), workflowType: expect.any(String), stepName: expect.any(String), heroType: 'TestHero', heroId: expect.any(String) });
  });

  it("is the start() span's, as a W3C traceparent, and the execution that runs the job joins it (spans to the tracer provider given)", async () => {
    const own = inMemoryTracerProvider();
    app = await createTestApp('sqlite', TRACING_WORKFLOWS, { imports: [GenevaDriveTracingModule.forRoot({ tracerProvider: own.provider })] });
    const { wf, job, caller } = await startInSpan(app);
    const start = only(own.spans(), 'start TracedParcel');
    expect([start.traceId, start.parentSpanId]).toEqual([caller.traceId, caller.spanId]);
    expect(job.hints?.traceparent).toBe(`00-${start.traceId}-${start.spanId}-01`);

    // Run as a worker process would: no active span, only what the job carries.
    await app.moduleRef.get(ExecutorService).execute(job.executionId, { hints: job.hints });
    const step = only(own.spans(), 'step TracedParcel.pack');
    expect([step.traceId, step.parentSpanId]).toEqual([start.traceId, start.spanId]);
    // The step it scheduled carries the same context (the manual queue does not chain).
    const [, next] = app.gd.enqueuedJobs;
    expect([next.executionId, next.hints?.traceparent]).toEqual([(await app.moduleRef.get(WorkflowService).currentExecution(wf))!.id, job.hints?.traceparent]);
    // A traceparent that is not one is ignored: the step is a root.
    await app.moduleRef.get(ExecutorService).execute(next.executionId, { hints: { ...next.hints, traceparent: 'not-a-traceparent' } });
    expect(only(own.spans(), 'step TracedParcel.awaitDelivery').parentSpanId).toBeNull();
    // The app's own spans alone went to the global provider.
    expect(global.spans().map((span) => span.name)).toEqual(['handle request', 'weigh parcel']);
  });

  it('goes to the tracer provider a forRootAsync factory returns, injected from a module of the application', async () => {
    const own = inMemoryTracerProvider();
    const TRACER_PROVIDER = Symbol('TRACER_PROVIDER');
    @Module({ providers: [{ provide: TRACER_PROVIDER, useValue: own.provider }], exports: [TRACER_PROVIDER] })
    class TelemetryModule {}
    const tracing = GenevaDriveTracingModule.forRootAsync({ imports: [TelemetryModule], inject: [TRACER_PROVIDER], useFactory: (tracerProvider: TracerProvider) => ({ tracerProvider }) });
    app = await createTestApp('sqlite', TRACING_WORKFLOWS, { imports: [tracing] });
    const { job } = await startInSpan(app);
    expect(job.hints?.traceparent).toBe(`00-${only(own.spans(), 'start TracedParcel').traceId}-${only(own.spans(), 'start TracedParcel').spanId}-01`);
  });
});


const bullKind: DatabaseKind = enabledDatabases().includes('postgres') ? 'postgres' : 'sqlite';
describe.each(REDIS_ADAPTERS)(`GenevaDriveTracingModule across processes, on %s [${bullKind}]`, (adapter) => {
  if (!redisAvailable()) return void it.skip('needs Redis', () => undefined);
  const driver = REDIS_QUEUE_DRIVERS[adapter];
  const prefix = `gd-e2e-tracing-${process.pid}-${adapter}`;
  const queueName = 'gd-tracing';
  const buildDir = path.join(ROOT, '.tmp', `tracing-worker-${process.env.JEST_WORKER_ID ?? '0'}-${process.pid}-${adapter}`);
  const children = new Set<ChildProcess>();
  let app: TestApp;
  let worker: ChildHandle<TracingWorkerMessage, TracingParentMessage>;

  beforeAll(async () => {
    await mkdir(buildDir, { recursive: true });
    const tsconfig = path.join(buildDir, 'tsconfig.json');
    await writeFile(tsconfig, JSON.stringify({ extends: path.join(ROOT, 'test/tsconfig.worker.json'), files: [path.join(ROOT, 'test/src/tracing-worker.ts')], include: [] }));
    const entry = await compileChildEntry(path.relative(ROOT, tsconfig), path.join(buildDir, 'out'), 'test/src/tracing-worker.js');
    // Enqueue-only (concurrency 0): every step runs in the worker.
    app = await createTestApp(bullKind, TRACING_WORKFLOWS, {
      queue: driver.options({ name: queueName, prefix, concurrency: 0 }),
      imports: [GenevaDriveTracingModule.forRoot()],
    });
    const options = dataSourceOptions(bullKind);
    worker = new ChildHandle(
      forkCompiled(entry, {
        GD_TRACING_DB: bullKind,
        GD_TRACING_ADAPTER: adapter,
        GD_TRACING_REDIS: redisUrl(),
        GD_TRACING_PREFIX: prefix,
        GD_TRACING_QUEUE: queueName,
        ...(options.type === 'better-sqlite3' ? { GD_TRACING_SQLITE_FILE: String(options.database) } : {}),
      }),
      children,
    );
    await waitUntil('the worker to boot', () => (worker.assertAlive('tracing worker'), worker.messages.some((message) => message.type === 'ready')), { timeoutMs: 60_000 });
  }, 120_000);

  afterAll(async () => {
    await worker?.stop({ type: 'shutdown' });
    for (const child of children) child.kill('SIGKILL'); // only if it would not stop
    await app?.close();
    const admin = driver.handle(queueName, prefix);
    await admin.obliterate();
    await admin.close();
    await rm(buildDir, { recursive: true, force: true });
  });

  /** The spans the worker has finished so far. */
  const workerSpans = async (): Promise<SpanSummary[]> => {
    const seen = worker.messages.length;
    worker.send({ type: 'spans' });
    const reply = await waitUntil('the worker spans', () => {
      worker.assertAlive('tracing worker');
      return worker.messages.slice(seen).find((message) => message.type === 'spans');
    });
    return reply.type === 'spans' ? reply.spans : [];
  };

  it("runs the step a signal() in this process woke in the worker's process, in the signal's trace", async () => {
    global.exporter.reset();
    const heroes = app.dataSource.getRepository(TestHero);
    const wf = await app.moduleRef.get(WorkflowService).start(TracedParcelWorkflow, await heroes.save(heroes.create({ name: 'Di' })));
    await waitUntil('the step to park', parked(app, wf.id));
    await app.moduleRef.get(SignalService).signal(wf, 'delivered');
    await waitUntil('the workflow to finish', inState(app, wf.id, 'finished'));
    const remote = await waitUntil('the last step span', async () => {
      const spans = await workerSpans();
      return named(spans, 'step TracedParcel.archive').length === 1 && spans;
    });

    const here = global.spans();
    expect(here.map((span) => span.name)).toEqual(['start TracedParcel', 'signal delivered']);
    expect(remote.filter((span) => /^(start|signal) /.test(span.name))).toEqual([]);
    expect(outline([...here, ...remote])).toEqual(PARCEL_OUTLINE);
    expectPhasesInOrder(remote);
    const signal = only(here, 'signal delivered');
    const woken = named(remote, 'step TracedParcel.awaitDelivery').find((span) => span.parentSpanId === signal.spanId)!;
    expect([woken.traceId, woken.attributes[A.outcome]]).toEqual([signal.traceId, 'completed']);
    expect(below([...here, ...remote], signal).map((span) => span.traceId)).toEqual(Array(8).fill(signal.traceId));
  });
});
