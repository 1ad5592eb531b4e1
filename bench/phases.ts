/**
 * Names the phase each SQL statement belongs to, without help from the engine: statements issued
 * inside a start() or signal() call (an AsyncLocalStorage context the bench opens around the call)
 * are that call's; every other statement is the queue worker's, placed by the engine's diagnostics
 * events of the workflow in flight: before `precondition` it is the step's prepare (the job's lookup
 * and the locking reads), up to `step` still its prepare (the writes that start it; the no-op body
 * issues none), up to `finalize` its finalize. A prepare whose gate parks the step is named apart.
 * A body that says when it begins (BENCH_BODY_CHANNEL, the ledger shapes') has its statements named
 * apart too, up to `step`. Each event counts only for the execution of the last `precondition`: a
 * step chained inline is prepared in its predecessor's transaction, whose `finalize` event comes
 * after the chained step's `precondition`.
 *
 * The events say nothing of which job a statement serves, so this holds only with one workflow in
 * flight at a time: the caller runs the workflows one after another while it records.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { GENEVA_DRIVE_CHANNELS, type ExecutionEvent, type PreconditionEvent } from 'geneva-drive';
import { BENCH_BODY_CHANNEL, type QueryRecorder } from './app.js';

type WorkerMode = 'pending' | 'prepare' | 'parks' | 'body' | 'finalize';

export class PhaseTracker {
  private readonly calls = new AsyncLocalStorage<{ name: string; open: boolean }>();
  private readonly counts = new Map<string, number>();
  private mode: WorkerMode = 'pending';
  private step = '';
  /** The execution of the last precondition event: the one the worker's statements are about. */
  private execution = '';
  /** Worker statements of a run whose step is not known yet (before its precondition event). */
  private pending: string[] = [];
  /** While set, every statement is also listed here in order, with its phase. */
  listing: Array<{ phase: string; sql: string }> | null = null;

  private readonly onPrecondition = (message: unknown) => {
    const event = message as PreconditionEvent;
    if (!this.ours(event)) return;
    this.step = event.stepName;
    this.execution = event.executionId;
    this.mode = event.outcome === 'waiting' ? 'parks' : 'prepare';
    this.flushPending(this.label());
  };
  private readonly onBody = (message: unknown) => {
    if (!this.current(message as ExecutionEvent)) return;
    this.mode = 'body';
  };
  private readonly onStep = (message: unknown) => {
    if (!this.current(message as ExecutionEvent)) return;
    this.mode = 'finalize';
  };
  private readonly onFinalize = (message: unknown) => {
    if (!this.current(message as ExecutionEvent)) return;
    this.mode = 'pending';
  };

  constructor(
    private readonly recorder: QueryRecorder,
    private readonly workflowClass: string,
  ) {}

  /** Starts attributing every statement the process issues. */
  start(): void {
    this.recorder.observer = (query) => this.record(query);
    subscribe(GENEVA_DRIVE_CHANNELS.precondition, this.onPrecondition);
    subscribe(BENCH_BODY_CHANNEL, this.onBody);
    subscribe(GENEVA_DRIVE_CHANNELS.step, this.onStep);
    subscribe(GENEVA_DRIVE_CHANNELS.finalize, this.onFinalize);
  }

  /** Stops; returns the statement count of each phase (worker statements never placed: `unattributed`). */
  stop(): Map<string, number> {
    this.recorder.observer = undefined;
    unsubscribe(GENEVA_DRIVE_CHANNELS.precondition, this.onPrecondition);
    unsubscribe(BENCH_BODY_CHANNEL, this.onBody);
    unsubscribe(GENEVA_DRIVE_CHANNELS.step, this.onStep);
    unsubscribe(GENEVA_DRIVE_CHANNELS.finalize, this.onFinalize);
    this.flushPending('unattributed');
    // An enabled AsyncLocalStorage hooks every promise of the process: the timed runs after this must not pay for it.
    this.calls.disable();
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

  private record(sql: string): void {
    const context = this.calls.getStore();
    if (context?.open) return this.add(context.name, 1, sql);
    if (this.mode === 'pending') this.pending.push(sql);
    else this.add(this.label(), 1, sql);
  }

  private flushPending(phase: string): void {
    this.add(phase, this.pending.length);
    this.listing?.push(...this.pending.map((sql) => ({ phase, sql })));
    this.pending = [];
  }

  private label(): string {
    return this.mode === 'parks' ? `${this.step}: prepare, parks` : `${this.step}: ${this.mode}`;
  }

  private add(name: string, count: number, sql?: string): void {
    if (count > 0) this.counts.set(name, (this.counts.get(name) ?? 0) + count);
    if (sql !== undefined) this.listing?.push({ phase: name, sql });
  }

  private ours(event: ExecutionEvent): boolean {
    return event.workflowClass === this.workflowClass;
  }

  private current(event: ExecutionEvent): boolean {
    return this.ours(event) && event.executionId === this.execution;
  }
}
