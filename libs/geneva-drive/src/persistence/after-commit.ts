import type { DataSource, EntityManager, EntitySubscriberInterface, QueryRunner, TransactionCommitEvent, TransactionRollbackEvent } from 'typeorm';

type Callback = () => void | Promise<void>;
interface Pending {
  depth: number;
  run: Callback;
  workflowId?: string;
}
/** A callback started and not settled yet: the order it started in, and the workflow whose job it enqueues. */
interface Running {
  order: number;
  workflowId?: string;
}

/**
 * Runs callbacks once the OUTERMOST transaction of a query runner commits, and drops them if it (or
 * the savepoint they were registered in) rolls back. This is how jobs are enqueued only for work that
 * is durable — also when the work joined a caller's transaction through a passed-in `manager`.
 */
export class AfterCommitSubscriber implements EntitySubscriberInterface {
  private readonly pending = new WeakMap<QueryRunner, Pending[]>();
  /** Callbacks started after a commit and not settled yet (a job being added to the queue). */
  private readonly running = new Map<Promise<void>, Running>();
  private started = 0;

  constructor(private readonly onError: (error: unknown) => void) {}

  /** The subscriber attached to `dataSource`, if any. */
  static of(dataSource: DataSource): AfterCommitSubscriber | undefined {
    return dataSource.subscribers.find((subscriber): subscriber is AfterCommitSubscriber => subscriber instanceof AfterCommitSubscriber);
  }

  /** Subscribes to the DataSource's transaction events (once). */
  attachTo(dataSource: DataSource): void {
    if (!dataSource.subscribers.includes(this)) dataSource.subscribers.push(this);
  }

  /**
   * Registers `run` for after the outermost commit of `manager`'s transaction. With none, the writes
   * committed as they were made (PostgreSQL's one-statement start()): `run` starts now, and like any
   * after-commit callback it is not waited for by the caller, and its failure is reported, not thrown
   * at the caller. `workflowId`: the workflow whose job `run` enqueues (see settledSince).
   */
  async register(manager: EntityManager, run: Callback, workflowId?: string): Promise<void> {
    const runner = manager.queryRunner;
    if (!runner || !runner.isTransactionActive) {
      this.launch((async () => run())(), workflowId);
      return;
    }
    const list = this.pending.get(runner) ?? [];
    list.push({ depth: transactionDepth(runner), run, workflowId });
    this.pending.set(runner, list);
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    if (event.queryRunner.isTransactionActive) return; // a savepoint was released: still inside the outer transaction
    this.launchPending(event.queryRunner);
  }

  /**
   * The COMMIT of `runner`'s transaction went out and its answer was lost: it may have committed.
   * Its jobs start all the same. A job whose writes did not commit finds nothing to run (the executor
   * reads the execution under its lock: gone, or not scheduled), while one whose writes did would
   * otherwise wait for the stuck-scheduled sweep.
   */
  commitOutcomeUnknown(runner: QueryRunner): void {
    this.launchPending(runner);
  }

  private launchPending(runner: QueryRunner): void {
    const list = this.pending.get(runner);
    if (!list) return;
    this.pending.delete(runner);
    for (const entry of list) this.launch(Promise.resolve().then(entry.run), entry.workflowId);
  }

  /** Tracks a started callback until it settles (see drain), reporting its failure. */
  private launch(started: Promise<void>, workflowId: string | undefined): void {
    const done: Promise<void> = started.catch((error) => this.onError(error)).finally(() => this.running.delete(done));
    this.running.set(done, { order: this.started++, workflowId });
  }

  /** Where the callbacks started from now on begin, for {@link settledSince}. */
  get mark(): number {
    return this.started;
  }

  /**
   * Waits for the callbacks enqueuing a job of `workflowId` that started since `mark` and still run;
   * undefined when there are none (StepJobGate.run: a job's run ends once its workflow's next jobs
   * are in the queue's hands). Not those started before `mark`: one of them is the enqueue that
   * started the run.
   */
  settledSince(mark: number, workflowId: string): Promise<void> | undefined {
    const since: Array<Promise<void>> = [];
    for (const [done, running] of this.running) if (running.order >= mark && running.workflowId === workflowId) since.push(done);
    return since.length === 0 ? undefined : Promise.all(since).then(() => undefined);
  }

  /**
   * Waits for the callbacks already started: a process that stops right after a commit (a CLI
   * command, a deploy) still hands its jobs to the queue before the queue closes.
   */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.keys()]);
  }

  afterTransactionRollback(event: TransactionRollbackEvent): void {
    const runner = event.queryRunner;
    const list = this.pending.get(runner);
    if (!list) return;
    if (!runner.isTransactionActive) {
      this.pending.delete(runner);
      return;
    }
    // A savepoint rolled back: forget what was registered inside it.
    const depth = transactionDepth(runner);
    this.pending.set(runner, list.filter((entry) => entry.depth <= depth));
  }
}

function transactionDepth(runner: QueryRunner): number {
  return (runner as unknown as { transactionDepth?: number }).transactionDepth ?? 1;
}
