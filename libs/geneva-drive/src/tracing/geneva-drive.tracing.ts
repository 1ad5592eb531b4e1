import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, tracingChannel, unsubscribe, type TracingChannelSubscribers } from 'node:diagnostics_channel';
import {
  GENEVA_DRIVE_CHANNELS,
  GENEVA_DRIVE_TRACING_CHANNELS,
  type FinalizeEvent,
  type PreconditionEvent,
  type SignalCall,
  type SignalEvent,
  type StartCall,
  type StepEvent,
} from '../instrumentation/geneva-drive.events.js';
import { setJobContextPropagator, type JobContextPropagator } from '../instrumentation/job-context.js';
import { formatTraceparent, parseTraceparent } from './traceparent.js';

/** The tracer the spans are made with. */
export const GENEVA_DRIVE_TRACER = Symbol('GENEVA_DRIVE_TRACER');

/**
 * The attributes of geneva-drive's spans. Span names hold only workflow classes, step and signal
 * names; ids are attributes.
 * @publicApi
 */
export const GENEVA_DRIVE_SPAN_ATTRIBUTES = {
  workflowClass: 'geneva_drive.workflow.class',
  workflowId: 'geneva_drive.workflow.id',
  /** The workflow's state once the finalize phase committed. */
  workflowState: 'geneva_drive.workflow.state',
  executionId: 'geneva_drive.execution.id',
  step: 'geneva_drive.step.name',
  /** The body's outcome (StepEvent.outcome) or, when no body ran, the preconditions' (PreconditionEvent.outcome). */
  outcome: 'geneva_drive.step.outcome',
  /** The execution's state once the finalize phase committed. */
  stepState: 'geneva_drive.step.state',
  precondition: 'geneva_drive.precondition.outcome',
  signalName: 'geneva_drive.signal.name',
  signalId: 'geneva_drive.signal.id',
  signalDisposition: 'geneva_drive.signal.disposition',
} as const;

const A = GENEVA_DRIVE_SPAN_ATTRIBUTES;

/** A `start()` or `signal()` in progress: its span, current for the jobs the call creates. */
interface Call {
  kind: 'start' | 'signal';
  span: Span;
  context: Context;
}

/** One job's execution: the context it carried, and its steps whose spans are still open. */
interface Job {
  parent: Context;
  startedAt: number;
  /** No step has begun yet: the first one's prepare phase starts with the job. */
  fresh: boolean;
  steps: Map<string, OpenStep>;
}

interface OpenStep {
  span: Span;
  name: string;
  startedAt: number;
  attributes: Attributes;
  prepared: boolean;
  outcome?: string;
  exception?: unknown;
}

/** Milliseconds since the epoch, with the monotonic clock's precision (events report durations). */
const now = () => performance.timeOrigin + performance.now();

/**
 * OpenTelemetry spans of geneva-drive: `start()` and `signal()` calls, and each step execution with
 * its prepare, body and finalize phases as children. A job carries the context of the call that
 * created it (see JobContextPropagator), so a step's span is a child of the `start()`, `signal()` or
 * step that scheduled it, in whichever process runs it. Phase spans are built from the diagnostics
 * channels' events, once each phase has ended; spans a step body opens are children of the job's
 * context. One instance per process takes the job context (the latest installed).
 * @publicApi
 */
@Injectable()
export class GenevaDriveTracing implements JobContextPropagator, OnModuleDestroy {
  private readonly calls = new AsyncLocalStorage<Call>();
  private readonly jobs = new AsyncLocalStorage<Job>();
  private readonly callSpans = new WeakMap<object, Call>();
  private readonly startChannel = tracingChannel<unknown, StartCall>(GENEVA_DRIVE_TRACING_CHANNELS.start);
  private readonly signalChannel = tracingChannel<unknown, SignalCall>(GENEVA_DRIVE_TRACING_CHANNELS.signal);
  private readonly callListeners: TracingChannelSubscribers<object> = {
    start: () => undefined,
    end: () => undefined,
    asyncStart: () => undefined,
    asyncEnd: (call) => this.endCall(call),
    error: (call) => this.failCall(call, call.error),
  };
  private readonly listeners: Record<string, (message: unknown) => void> = {
    [GENEVA_DRIVE_CHANNELS.precondition]: (message) => this.onPrecondition(message as PreconditionEvent),
    [GENEVA_DRIVE_CHANNELS.step]: (message) => this.onStep(message as StepEvent),
    [GENEVA_DRIVE_CHANNELS.finalize]: (message) => this.onFinalize(message as FinalizeEvent),
    [GENEVA_DRIVE_CHANNELS.signal]: (message) => this.onSignal(message as SignalEvent),
  };
  private readonly uninstall: () => void;

  constructor(@Inject(GENEVA_DRIVE_TRACER) private readonly tracer: Tracer) {
    this.startChannel.start.bindStore(this.calls, (call) =>
      this.beginCall(call, 'start', `start ${call.workflowClass}`, { [A.workflowClass]: call.workflowClass }),
    );
    this.signalChannel.start.bindStore(this.calls, (call) =>
      this.beginCall(call, 'signal', `signal ${call.name}`, { [A.signalName]: call.name, [A.workflowId]: call.workflowId }),
    );
    this.startChannel.subscribe(this.callListeners);
    this.signalChannel.subscribe(this.callListeners);
    for (const [channel, listener] of Object.entries(this.listeners)) subscribe(channel, listener);
    this.uninstall = setJobContextPropagator(this);
  }

  onModuleDestroy(): void {
    this.uninstall();
    for (const [channel, listener] of Object.entries(this.listeners)) unsubscribe(channel, listener);
    this.startChannel.unsubscribe(this.callListeners);
    this.signalChannel.unsubscribe(this.callListeners);
    this.startChannel.start.unbindStore(this.calls);
    this.signalChannel.start.unbindStore(this.calls);
  }

  // ---------------------------------------------------------------- JobContextPropagator

  inject(): string | undefined {
    const span = trace.getSpanContext(this.calls.getStore()?.context ?? context.active());
    return span && trace.isSpanContextValid(span) ? formatTraceparent(span) : undefined;
  }

  run<T>(traceparent: string | undefined, execution: () => Promise<T>): Promise<T> {
    const remote = traceparent === undefined ? undefined : parseTraceparent(traceparent);
    const parent = remote ? trace.setSpanContext(context.active(), remote) : context.active();
    const job: Job = { parent, startedAt: now(), fresh: true, steps: new Map() };
    // Out of any call in progress (a job started in the process of the signal() that woke it): the job's context rules.
    return this.calls.exit(() =>
      this.jobs.run(job, () =>
        context.with(parent, async () => {
          try {
            return await execution();
          } catch (error) {
            this.closeAll(job, error);
            throw error;
          } finally {
            this.closeAll(job);
          }
        }),
      ),
    );
  }

  // ---------------------------------------------------------------- start() and signal()

  private beginCall(call: object, kind: Call['kind'], name: string, attributes: Attributes): Call {
    const span = this.tracer.startSpan(name, { kind: SpanKind.PRODUCER, attributes }, context.active());
    const begun: Call = { kind, span, context: trace.setSpan(context.active(), span) };
    this.callSpans.set(call, begun);
    return begun;
  }

  private failCall(call: object, error: unknown): void {
    const begun = this.callSpans.get(call);
    if (begun) recordError(begun.span, error);
  }

  private endCall(call: object & { result?: unknown }): void {
    const begun = this.callSpans.get(call);
    if (!begun) return;
    this.callSpans.delete(call);
    const result = call.result as { id?: unknown } | undefined;
    if (begun.kind === 'start' && result?.id !== undefined) begun.span.setAttribute(A.workflowId, String(result.id));
    begun.span.end();
  }

  private onSignal(event: SignalEvent): void {
    const call = this.calls.getStore();
    if (call?.kind !== 'signal') return;
    call.span.setAttributes({
      [A.signalDisposition]: event.disposition,
      ...(event.workflowClass === undefined ? {} : { [A.workflowClass]: event.workflowClass }),
      ...(event.signalId === null ? {} : { [A.signalId]: event.signalId }),
    });
  }

  // ---------------------------------------------------------------- step executions

  private onPrecondition(event: PreconditionEvent): void {
    const job = this.jobs.getStore();
    if (!job) return;
    const end = now();
    const startedAt = job.fresh ? job.startedAt : end - event.durationMs;
    job.fresh = false;
    // A transaction run again (a deadlock) prepares a chained step anew.
    const previous = job.steps.get(event.executionId);
    if (previous) this.close(job, event.executionId, previous, end);
    const name = `${event.workflowClass}.${event.stepName}`;
    const attributes: Attributes = {
      [A.workflowClass]: event.workflowClass,
      [A.step]: event.stepName,
      [A.workflowId]: event.workflowId,
      [A.executionId]: event.executionId,
    };
    const span = this.tracer.startSpan(`step ${name}`, { kind: SpanKind.CONSUMER, startTime: startedAt, attributes }, job.parent);
    const step: OpenStep = { span, name, startedAt, attributes, prepared: false };
    job.steps.set(event.executionId, step);
    if (event.outcome === 'passed') return;
    // No body runs: the step ends with its preconditions.
    step.outcome = event.outcome;
    step.exception = event.exception;
    this.phase(job, step, 'prepare', startedAt, end, { [A.precondition]: event.outcome }, event.exception);
    step.prepared = true;
    this.close(job, event.executionId, step, end);
  }

  private onStep(event: StepEvent): void {
    const job = this.jobs.getStore();
    const step = job?.steps.get(event.executionId);
    if (!job || !step) return;
    const end = now();
    const bodyStartedAt = end - event.durationMs - event.hooksDurationMs;
    this.phase(job, step, 'prepare', step.startedAt, bodyStartedAt, { [A.precondition]: 'passed' });
    step.prepared = true;
    step.outcome = event.outcome;
    step.exception = event.exception;
    this.phase(job, step, 'body', bodyStartedAt, end, { [A.outcome]: event.outcome }, event.exception);
  }

  private onFinalize(event: FinalizeEvent): void {
    const job = this.jobs.getStore();
    const step = job?.steps.get(event.executionId);
    if (!job || !step) return;
    const end = now();
    const states: Attributes = {
      ...(event.workflowState === undefined ? {} : { [A.workflowState]: event.workflowState }),
      ...(event.stepState === undefined ? {} : { [A.stepState]: event.stepState }),
    };
    this.phase(job, step, 'finalize', end - event.durationMs, end, states);
    step.span.setAttributes(states);
    this.close(job, event.executionId, step, end);
  }

  /** A child span of the step, for a phase that has ended. */
  private phase(job: Job, step: OpenStep, phase: string, startedAt: number, endedAt: number, attributes: Attributes, exception?: unknown): void {
    const span = this.tracer.startSpan(
      `${phase} ${step.name}`,
      { startTime: startedAt, attributes: { ...step.attributes, ...attributes } },
      trace.setSpan(job.parent, step.span),
    );
    if (exception !== undefined) recordError(span, exception);
    span.end(endedAt);
  }

  /** Ends the step's span; `error` when its job failed before the step's outcome was recorded. */
  private close(job: Job, executionId: string, step: OpenStep, endedAt: number, error?: unknown): void {
    job.steps.delete(executionId);
    if (!step.prepared) this.phase(job, step, 'prepare', step.startedAt, endedAt, {}, error);
    if (step.outcome !== undefined) step.span.setAttribute(A.outcome, step.outcome);
    const exception = error ?? step.exception;
    if (exception !== undefined) recordError(step.span, exception);
    step.span.end(endedAt);
  }

  /** Ends what the job left open: a phase that failed (its error given) or a chained step abandoned. */
  private closeAll(job: Job, error?: unknown): void {
    const end = now();
    for (const [executionId, step] of [...job.steps]) this.close(job, executionId, step, end, error);
  }
}

function recordError(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
