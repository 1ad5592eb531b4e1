/**
 * GenevaDriveTracingModule on @opentelemetry/api, with the OpenTelemetry SDK's in-memory exporter:
 * the spans of a workflow with a signal run for real (local queue on every database), their
 * attributes and parents, failures marked as errors, the trace context a job carries only when the
 * module is there, and a `signal()` in one process whose woken step, run by a worker process on
 * Bull, joins its trace.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import Bull from 'bull';
import type { ChildProcess } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExecutorService, SignalService, StepExecution, WorkflowAlreadyOngoingError, WorkflowNotOngoingError, WorkflowRecord, WorkflowService } from 'geneva-drive';
import { GENEVA_DRIVE_SPAN_ATTRIBUTES as A, GenevaDriveTracingModule } from 'geneva-drive/tracing';
import { waitUntil } from '../src/bull-wait.js';
import { ChildHandle, compileChildEntry, forkCompiled, ROOT } from '../src/child-process.js';
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
});
