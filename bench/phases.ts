/**
 * Names the phase each SQL statement belongs to, without help from the engine: statements issued
 * inside a start() or signal() call (an AsyncLocalStorage context the bench opens around the call)
 * are that call's; every other statement is the queue worker's, placed by the engine's diagnostics
 * events of the workflow in flight: before `precondition` it is the step's prepare (the job's lookup
 * and the locking reads), up to `step` still its prepare (the writes that start it; the no-op body
 * issues none), up to `finalize` its finalize. A prepare whose gate parks the step is named apart.
 *
 * The events say nothing of which job a statement serves, so this holds only with one workflow in
 * flight at a time: the caller runs the workflows one after another while it records.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { GENEVA_DRIVE_CHANNELS, type ExecutionEvent, type PreconditionEvent } from 'geneva-drive';
import type { QueryRecorder } from './app.js';

type WorkerMode = 'pending' | 'prepare' | 'parks' | 'finalize';

export class PhaseTracker {
  private readonly calls = new AsyncLocalStorage<{ name: string; open: boolean }>();
  private readonly counts = new Map<string, number>();
  private mode: WorkerMode = 'pending';
  private step = '';
  /** Worker statements of a run whose step is not known yet (before its precondition event). */
  private pending = 0;

  private readonly onPrecondition = (message: unknown) => {
    const event = message as PreconditionEvent;
    if (!this.ours(event)) return;
    this.step = event.stepName;
    this.mode = event.outcome === 'waiting' ? 'parks' : 'prepare';
    this.add(this.label(), this.pending);
    this.pending = 0;
  };
  private readonly onStep = (message: unknown) => {
    if (!this.ours(message as ExecutionEvent)) return;
    this.mode = 'finalize';
  };
  private readonly onFinalize = (message: unknown) => {
    if (!this.ours(message as ExecutionEvent)) return;
    this.mode = 'pending';
  };

  constructor(
    private readonly recorder: QueryRecorder,
    private readonly workflowClass: string,
  ) {}

  /** Starts attributing every statement the process issues. */
  start(): void {
    this.recorder.observer = () => this.record();
    subscribe(GENEVA_DRIVE_CHANNELS.precondition, this.onPrecondition);
    subscribe(GENEVA_DRIVE_CHANNELS.step, this.onStep);
    subscribe(GENEVA_DRIVE_CHANNELS.finalize, this.onFinalize);
  }

  /** Stops; returns the statement count of each phase (worker statements never placed: `unattributed`). */
  stop(): Map<string, number> {
    this.recorder.observer = undefined;
    unsubscribe(GENEVA_DRIVE_CHANNELS.precondition, this.onPrecondition);
    unsubscribe(GENEVA_DRIVE_CHANNELS.step, this.onStep);
    unsubscribe(GENEVA_DRIVE_CHANNELS.finalize, this.onFinalize);
    this.add('unattributed', this.pending);
    return this.counts;
  }

  /** Runs an API call (`start()`, `signal()`) as a phase of its own. */
  async call<T>(name: string, work: () => Promise<T>): Promise<T> {
    const context = { name, open: true };
    try {
      return await this.calls.run(context, work);
    } finally {
      // Work the call scheduled (a queue timer inherits this context) is the worker's from now on.
      context.open = false;
      // A call after a park (the wake) means the parked run is over.
      if (this.mode === 'parks') this.mode = 'pending';
    }
  }

  private record(): void {
    const context = this.calls.getStore();
    if (context?.open) return this.add(context.name, 1);
    if (this.mode === 'pending') this.pending++;
    else this.add(this.label(), 1);
  }

  private label(): string {
    return this.mode === 'parks' ? `${this.step}: prepare, parks` : `${this.step}: ${this.mode}`;
  }

  private add(name: string, count: number): void {
    if (count > 0) this.counts.set(name, (this.counts.get(name) ?? 0) + count);
  }

  private ours(event: ExecutionEvent): boolean {
    return event.workflowClass === this.workflowClass;
  }
}
