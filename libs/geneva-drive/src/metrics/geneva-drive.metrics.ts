import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Gauge as HousekeepingGauge, HousekeepingSummary } from '../housekeeping/housekeeping.service.js';
import type { StepGauge } from '../persistence/gauges.js';
import { GENEVA_DRIVE_CHANNELS, type PreconditionEvent, type SignalEvent, type SignalTimeoutEvent, type StepEvent } from '../instrumentation/geneva-drive.events.js';

/** The registry the metrics are registered in (the app's own, or prom-client's default). */
export const GENEVA_DRIVE_METRICS_REGISTRY = Symbol('GENEVA_DRIVE_METRICS_REGISTRY');

/** Seconds, from a fast step to a queue backlog of minutes. */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * The Prometheus metrics of geneva-drive, fed by its diagnostics channels. Labels are the workflow
 * class, step and signal names, outcomes and states: never an id, so the series stay bounded.
 * The channels are per process: every engine in the process is counted.
 * @publicApi
 */
@Injectable()
export class GenevaDriveMetrics implements OnModuleDestroy {
  readonly stepExecutions: Counter<'workflow_class' | 'step' | 'outcome'>;
  readonly stepDuration: Histogram<'workflow_class' | 'step' | 'outcome'>;
  readonly queueDelay: Histogram<'workflow_class' | 'step'>;
  readonly signalWakeLatency: Histogram<'workflow_class' | 'step'>;
  readonly signals: Counter<'name' | 'disposition'>;
  readonly waiting: Gauge<'workflow_class'>;
  readonly waitingOverdue: Gauge<'workflow_class'>;
  readonly stuck: Gauge<'state'>;
  readonly recoveryLimitPaused: Gauge<'workflow_class'>;
  readonly paused: Gauge<'workflow_class'>;
  readonly waitingWithDeadline: Gauge<'workflow_class'>;
  readonly deadlinesOverdue: Gauge<'workflow_class'>;
  readonly flowKeyWaiting: Gauge<'workflow_class' | 'step'>;
  readonly flowKeyHolding: Gauge<'workflow_class' | 'step'>;

  private readonly listeners: Record<string, (message: unknown) => void>;
  private readonly names: string[] = [];

  constructor(@Inject(GENEVA_DRIVE_METRICS_REGISTRY) private readonly registry: Registry) {
    this.stepExecutions = new Counter(this.registered({
      name: 'geneva_drive_step_executions_total',
      help: 'Step bodies run, by workflow class, step and outcome.',
      labelNames: ['workflow_class', 'step', 'outcome'],
    }));
    this.stepDuration = new Histogram(this.registered({
      name: 'geneva_drive_step_duration_seconds',
      help: 'Time in the step body (hooks excluded), by workflow class, step and outcome.',
      labelNames: ['workflow_class', 'step', 'outcome'],
      buckets: BUCKETS,
    }));
    this.queueDelay = new Histogram(this.registered({
      name: 'geneva_drive_queue_delay_seconds',
      help: 'From the time a step execution was due to the engine taking it up.',
      labelNames: ['workflow_class', 'step'],
      buckets: BUCKETS,
    }));
    this.signalWakeLatency = new Histogram(this.registered({
      name: 'geneva_drive_signal_wake_latency_seconds',
      help: 'From the delivery that woke a parked step to the engine taking it up.',
      labelNames: ['workflow_class', 'step'],
      buckets: BUCKETS,
    }));
    this.signals = new Counter(this.registered({
      name: 'geneva_drive_signals_total',
      help: 'Signals sent, by name and disposition (woke, buffered, duplicate, rejected).',
      labelNames: ['name', 'disposition'],
    }));
    this.waiting = new Gauge(this.registered({
      name: 'geneva_drive_waiting_step_executions',
      help: 'Step executions parked for a signal, at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    this.waitingOverdue = new Gauge(this.registered({
      name: 'geneva_drive_waiting_overdue_step_executions',
      help: 'Step executions parked longer than waitingVisibilityThreshold, at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    this.stuck = new Gauge(this.registered({
      name: 'geneva_drive_stuck_step_executions',
      help: 'Stuck step executions the last housekeeping run recovered, by the state they were stuck in.',
      labelNames: ['state'],
    }));
    this.recoveryLimitPaused = new Gauge(this.registered({
      name: 'geneva_drive_recovery_limit_paused_workflows',
      help: 'Workflows paused by the recovery limit and not acted on since, at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    this.paused = new Gauge(this.registered({
      name: 'geneva_drive_paused_workflows',
      help: 'Paused workflows, whatever paused them, at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    this.waitingWithDeadline = new Gauge(this.registered({
      name: 'geneva_drive_waiting_with_deadline_step_executions',
      help: 'Step executions parked with a deadline (timeout), at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    this.deadlinesOverdue = new Gauge(this.registered({
      name: 'geneva_drive_deadlines_overdue_step_executions',
      help: 'Parked step executions whose deadline passed more than stuckScheduledThreshold ago (a lost deadline job), at the last housekeeping run.',
      labelNames: ['workflow_class'],
    }));
    // By the step that declares the key, never by key: keys are unbounded (one per customer, say).
    this.flowKeyWaiting = new Gauge(this.registered({
      name: 'geneva_drive_flow_key_waiting_step_executions',
      help: 'Step executions waiting for a slot of their concurrency key, by the step that declares it, at the last housekeeping run.',
      labelNames: ['workflow_class', 'step'],
    }));
    this.flowKeyHolding = new Gauge(this.registered({
      name: 'geneva_drive_flow_key_holding_step_executions',
      help: 'Step executions in progress holding a slot of their concurrency key, by the step that declares it, at the last housekeeping run.',
      labelNames: ['workflow_class', 'step'],
    }));
    this.listeners = {
      [GENEVA_DRIVE_CHANNELS.precondition]: (message) => this.onPrecondition(message as PreconditionEvent),
      [GENEVA_DRIVE_CHANNELS.step]: (message) => this.onStep(message as StepEvent),
      [GENEVA_DRIVE_CHANNELS.signal]: (message) => this.onSignal(message as SignalEvent | SignalTimeoutEvent),
      [GENEVA_DRIVE_CHANNELS.housekeeping]: (message) => this.onHousekeeping(message as HousekeepingSummary),
    };
    for (const [channel, listener] of Object.entries(this.listeners)) subscribe(channel, listener);
  }

  onModuleDestroy(): void {
    for (const [channel, listener] of Object.entries(this.listeners)) unsubscribe(channel, listener);
    // Another application in this process (a test, a second context) may register the same names.
    for (const name of this.names) this.registry.removeSingleMetric(name);
  }

  /** A metric's configuration, registered in our registry alone, its name kept for onModuleDestroy. */
  private registered<Config extends { name: string }>(config: Config): Config & { registers: Registry[] } {
    this.names.push(config.name);
    return { ...config, registers: [this.registry] };
  }

  private onPrecondition(event: PreconditionEvent): void {
    const labels = { workflow_class: event.workflowClass, step: event.stepName };
    // The phase began durationMs ago; clocks of different hosts may disagree by a little, never below 0.
    const delaySeconds = Math.max(0, (Date.now() - event.durationMs - event.scheduledFor.getTime()) / 1000);
    this.queueDelay.observe(labels, delaySeconds);
    if (event.woken) this.signalWakeLatency.observe(labels, delaySeconds);
  }

  private onStep(event: StepEvent): void {
    const labels = { workflow_class: event.workflowClass, step: event.stepName, outcome: event.outcome };
    this.stepExecutions.inc(labels);
    this.stepDuration.observe(labels, event.durationMs / 1000);
  }

  private onSignal(event: SignalEvent | SignalTimeoutEvent): void {
    // A wait's timeout is published on the same channel; it is no signal sent.
    if ('timedOut' in event) return;
    this.signals.inc({ name: event.name, disposition: event.disposition });
  }

  private onHousekeeping(summary: HousekeepingSummary): void {
    this.stuck.set({ state: 'in_progress' }, summary.stuckInProgressRecovered);
    this.stuck.set({ state: 'scheduled' }, summary.stuckScheduledRecovered);
    const gauges = summary.gauges;
    if (!gauges) return; // without the signals migration housekeeping reads no gauges
    setByWorkflow(this.waiting, gauges['geneva_drive.waiting_step_executions']);
    setByWorkflow(this.waitingOverdue, gauges['geneva_drive.waiting_overdue']);
    setByWorkflow(this.recoveryLimitPaused, gauges['geneva_drive.recovery_limit_paused']);
    setByWorkflow(this.paused, gauges['geneva_drive.paused_workflows']);
    setByWorkflow(this.waitingWithDeadline, gauges['geneva_drive.waiting_with_deadline']);
    setByWorkflow(this.deadlinesOverdue, gauges['geneva_drive.deadlines_overdue']);
    setByStep(this.flowKeyWaiting, gauges['geneva_drive.flow_key_waiting']);
    setByStep(this.flowKeyHolding, gauges['geneva_drive.flow_key_holding']);
  }
}

/** Replaces the gauge's series with the run's counts: a class no longer counted drops out. */
function setByWorkflow(gauge: Gauge<'workflow_class'>, counts: HousekeepingGauge | undefined): void {
  gauge.reset();
  for (const [workflowClass, count] of Object.entries(counts?.byWorkflow ?? {})) gauge.set({ workflow_class: workflowClass }, count);
}

/** As setByWorkflow, a series per workflow class and step. */
function setByStep(gauge: Gauge<'workflow_class' | 'step'>, counts: StepGauge | undefined): void {
  gauge.reset();
  for (const [workflowClass, steps] of Object.entries(counts?.byWorkflow ?? {})) {
    for (const [step, count] of Object.entries(steps)) gauge.set({ workflow_class: workflowClass, step }, count);
  }
}
