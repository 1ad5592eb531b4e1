/**
 * Workflows and span reading for the tracing specs (test/e2e/tracing.e2e-spec.ts and the worker
 * process it forks, test/src/tracing-worker.ts): spans are kept by the OpenTelemetry SDK's in-memory
 * exporter and read back as plain summaries, the same in either process.
 */
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

/** Packs (opening a span of its own in the body), waits for `delivered`, archives. */
@Workflow({ name: 'TracedParcel', hero: () => TestHero })
export class TracedParcelWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async pack() {
    trace.getTracer('parcel-app').startSpan('weigh parcel').end();
  }

  @Step({ waitFor: 'delivered' })
  async awaitDelivery() {}

  @Step()
  async archive() {}
}

/** Its only step raises: the workflow pauses (the default policy). */
@Workflow({ name: 'TracedBreakage', hero: () => TestHero })
export class TracedBreakageWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async handle() {
    throw new Error('parcel dropped');
  }
}

export const TRACING_WORKFLOWS = [TracedParcelWorkflow, TracedBreakageWorkflow];

/** A finished span as plain data (what a worker process sends over IPC). */
export interface SpanSummary {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  attributes: Record<string, unknown>;
  /** SpanStatusCode: 0 unset, 2 error. */
  status: number;
  /** The messages of the exceptions recorded on it. */
  exceptions: string[];
  startMs: number;
  endMs: number;
}

const millis = ([seconds, nanos]: [number, number]) => seconds * 1000 + nanos / 1e6;

export function summarize(span: ReadableSpan): SpanSummary {
  return {
    name: span.name,
    kind: span.kind,
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? null,
    attributes: { ...span.attributes },
    status: span.status.code,
    exceptions: span.events.filter((event) => event.name === 'exception').map((event) => String(event.attributes?.['exception.message'])),
    startMs: millis(span.startTime),
    endMs: millis(span.endTime),
  };
}

/** A tracer provider whose finished spans stay in memory. */
export function inMemoryTracerProvider(): { provider: BasicTracerProvider; exporter: InMemorySpanExporter; spans: () => SpanSummary[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { provider, exporter, spans: () => exporter.getFinishedSpans().map(summarize) };
}
