import type { DataSource, EntityManager, EntitySubscriberInterface, QueryRunner, TransactionCommitEvent, TransactionRollbackEvent } from 'typeorm';

type Callback = () => void | Promise<void>;
interface Pending {
  depth: number;
  run: Callback;
}

/**
 * Runs callbacks once the OUTERMOST transaction of a query runner commits, and drops them if it (or
 * the savepoint they were registered in) rolls back. This is how jobs are enqueued only for work that
 * is durable — also when the work joined a caller's transaction through a passed-in `manager`.
 */
export class AfterCommitSubscriber implements EntitySubscriberInterface {
  private readonly pending = new WeakMap<QueryRunner, Pending[]>();
  /** Callbacks started after a commit and not settled yet (a job being added to the queue), with the order they started in. */
  private readonly running = new Map<Promise<void>, number>();
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
   * after-commit callback it is not waited for and its failure is reported, not thrown at the caller.
   */
  async register(manager: EntityManager, run: Callback): Promise<void> {
    const runner = manager.queryRunner;
    if (!runner || !runner.isTransactionActive) {
      this.launch((async () => run())());
      return;
    }
    const list = this.pending.get(runner) ?? [];
    list.push({ depth: transactionDepth(runner), run });
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
    for (const entry of list) this.launch(Promise.resolve().then(entry.run));
  }

  /** Tracks a started callback until it settles (see drain), reporting its failure. */
  private launch(started: Promise<void>): void {
    const done: Promise<void> = started.catch((error) => this.onError(error)).finally(() => this.running.delete(done));
    this.running.set(done, this.started++);
  }

  /** Where the callbacks started from now on begin, for {@link settledSince}. */
  get mark(): number {
    return this.started;
  }

  /**
   * Waits for the callbacks started since `mark` and still running; undefined when there are none.
   * A step job ends only after those its run started: until the jobs its commits call for are in the
   * queue's hands, its own record in Redis (Bull's active job, the run ledger's entry) is what lets
   * another worker take its run over should this process die. Not the callbacks started before the
   * run: one of them may be the enqueue that runs it (an adapter that runs a job as it is enqueued).
   */
  settledSince(mark: number): Promise<void> | undefined {
    const since = [...this.running].filter(([, order]) => order >= mark).map(([done]) => done);
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
