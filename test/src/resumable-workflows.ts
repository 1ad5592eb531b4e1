/**
 * Fixture workflows of the resumable specs. Bodies record what they did in `seen` (reset in each
 * test's beforeEach); statics steer a body from the test and are reset there too.
 */
import { DataSource, Column, Entity, In, PrimaryGeneratedColumn, Table, type QueryRunner } from 'typeorm';
import { ExecutorService, GenevaWorkflow, ResumableStep, SignalMatcher, Step, StepIteration, Workflow, WorkflowRecord } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const seen: unknown[] = [];
export const ITEMS = ['a', 'b', 'c', 'd', 'e'];

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A point in a step body where it stops until the test releases it (a stalled worker). `reached`
 * resolves when the body gets there.
 */
export class Hold {
  readonly reached: Promise<void>;
  release!: () => void;
  private arrive!: () => void;
  private readonly released: Promise<void>;

  constructor() {
    this.reached = new Promise((resolve) => (this.arrive = resolve));
    this.released = new Promise((resolve) => (this.release = resolve));
  }

  async wait(): Promise<void> {
    this.arrive();
    await this.released;
  }
}

/** Holds by item: the first body to reach the item waits there until released. */
export const holds = new Map<unknown, Hold>();

async function holdAt(item: unknown): Promise<void> {
  const hold = holds.get(item);
  if (!hold) return;
  holds.delete(item);
  await hold.wait();
}

// ------------------------------------------------------------------ walks over an array

@Workflow({ hero: () => TestHero })
export class ArrayWalkWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async before() { seen.push('before'); }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) seen.push(item);
  }

  @Step() async after() { seen.push('after'); }
}

@Workflow({ hero: () => TestHero })
export class PausingWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      if (item === 'c' && !iter.resumed) this.pause();
    }
  }
}

@Workflow({ hero: () => TestHero })
export class FailingWalkWorkflow extends GenevaWorkflow<TestHero> {
  static failOn: string | null = 'c';
  @ResumableStep({ onException: 'reattempt' })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      if (item === FailingWalkWorkflow.failOn) {
        FailingWalkWorkflow.failOn = null;
        throw new Error(`failed on ${item}`);
      }
      seen.push(item);
    }
  }
}

/** Pages 1, 2, then `skipTo(5)` after an hour; the successor does 5 and 6. Records `resumed` per execution. */
@Workflow({ hero: () => TestHero })
export class SkipToWorkflow extends GenevaWorkflow<TestHero> {
  static resumedLog: boolean[] = [];
  @ResumableStep()
  async pages(iter: StepIteration<number>) {
    SkipToWorkflow.resumedLog.push(iter.resumed);
    let page = iter.cursor ?? 1;
    for (; page <= 6; page++) {
      seen.push(page);
      if (page === 2) await iter.skipTo(5, { wait: '1h' });
      await iter.set(page + 1);
    }
  }
}

/** Ten items, three checkpoints per execution. */
@Workflow({ hero: () => TestHero })
export class TenItemsWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxIterations: 3 })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])) seen.push(item);
  }

  @Step() async after() { seen.push('after'); }
}

/** A `set`-driven counter from 1 to 5 (the cursor is the next number to do). */
@Workflow({ hero: () => TestHero })
export class CounterWorkflow extends GenevaWorkflow<TestHero> {
  static resumedLog: boolean[] = [];
  @ResumableStep()
  async count(iter: StepIteration<number>) {
    CounterWorkflow.resumedLog.push(iter.resumed);
    let n = iter.cursor ?? 1;
    while (n <= 5) {
      seen.push(n);
      n++;
      await iter.set(n);
    }
  }
}

/** `set(0)` seeds the cursor, then `advance()` moves it: 0..4. */
@Workflow({ hero: () => TestHero })
export class AdvanceWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async count(iter: StepIteration<number>) {
    if (iter.cursor === null) await iter.set(0);
    while (iter.cursor! < 5) {
      seen.push(iter.cursor);
      await iter.advance();
    }
  }
}

/** `advance()` on a cursor that is not an integer: seeded with `seed` (unless undefined), then advanced. */
@Workflow({ hero: () => TestHero })
export class AdvanceMisuseWorkflow extends GenevaWorkflow<TestHero> {
  static seed: unknown = undefined;
  @ResumableStep()
  async count(iter: StepIteration<unknown>) {
    if (AdvanceMisuseWorkflow.seed !== undefined) await iter.set(AdvanceMisuseWorkflow.seed);
    await iter.advance();
    seen.push('advanced');
  }
}

@Workflow({ hero: () => TestHero })
export class CancelingWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5])) {
      seen.push(item);
      if (item === 3) this.cancel();
    }
  }

  @Step() async after() { seen.push('after'); }
}

/** Counter 1..5 that sets the cursor to 4 and pauses at 3 (first run only), then a following step. */
@Workflow({ hero: () => TestHero })
export class PauseCounterWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async count(iter: StepIteration<number>) {
    for (let n = iter.cursor ?? 1; n <= 5; n++) {
      seen.push(n);
      if (n === 3 && !iter.resumed) {
        await iter.set(4);
        this.pause();
      }
      await iter.set(n + 1);
    }
  }

  @Step() async after() { seen.push('after'); }
}

/** x, y, then `reattempt({ rewind: true })` at z on the first run: the replay starts over. */
@Workflow({ hero: () => TestHero })
export class RewindWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(['x', 'y', 'z'])) {
      if (item === 'z' && !iter.resumed) this.reattempt({ rewind: true });
      seen.push(item);
    }
  }
}

/**
 * Upstream's `set!(3); suspend!` (hand on with the persisted cursor): the port has no `suspend()`,
 * `skipTo(3)` persists and hands on in one call.
 */
@Workflow({ hero: () => TestHero })
export class HandOnWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async count(iter: StepIteration<number>) {
    for (let n = iter.cursor ?? 1; n <= 5; n++) {
      if (n === 3 && !iter.resumed) await iter.skipTo(3);
      seen.push(n);
      await iter.set(n + 1);
    }
  }
}

/** First run: `skipTo(value)`; the successor records the cursor it was given. */
@Workflow({ hero: () => TestHero })
export class CursorEchoWorkflow extends GenevaWorkflow<TestHero> {
  static value: unknown = null;
  @ResumableStep()
  async echo(iter: StepIteration<unknown>) {
    if (!iter.resumed) await iter.skipTo(CursorEchoWorkflow.value);
    seen.push(iter.cursor);
  }
}

/** A plain step (records the argument it gets), then a resumable step with `wait` and `onException: 'skip'`. */
@Workflow({ hero: () => TestHero })
export class StandardOptionsWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first(...args: unknown[]) {
    seen.push(['first got', args.length]);
  }

  @ResumableStep({ wait: '5m', onException: 'skip' })
  async slow(iter: StepIteration<number>) {
    for await (const n of iter.over([1, 2, 3, 4])) {
      seen.push(n);
      if (n === 2 && !iter.resumed) await iter.skipTo(2);
      if (n === 3) throw new Error('boom at 3');
    }
  }

  @Step() async after() { seen.push('after'); }
}

/** Two items per execution through `skipTo`: [a, b], [c, d], [e]; steps around it. */
@Workflow({ hero: () => TestHero })
export class ChunkedWalkWorkflow extends GenevaWorkflow<TestHero> {
  @Step() async before() { seen.push('before'); }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      const index = ITEMS.indexOf(item);
      if (index % 2 === 1) await iter.skipTo(index + 1);
    }
  }

  @Step() async after() { seen.push('after'); }
}

// ------------------------------------------------------------------ integration fixtures

/** Sets a cursor of `{ blob: 'x' × size }` (encoded: size + 11 bytes) with `set` or `skipTo`. */
@Workflow({ hero: () => TestHero })
export class CursorBlobWorkflow extends GenevaWorkflow<TestHero> {
  static size = 10;
  static via: 'set' | 'skipTo' = 'set';
  @ResumableStep()
  async big(iter: StepIteration<{ blob: string }>) {
    if (iter.cursor === null) {
      const value = { blob: 'x'.repeat(CursorBlobWorkflow.size) };
      if (CursorBlobWorkflow.via === 'skipTo') await iter.skipTo(value);
      await iter.set(value);
    }
    seen.push('stored');
  }

  @Step() async after() { seen.push('after'); }
}

/** Class-level `onException` reattempt; item 3 fails once, after being recorded. */
@Workflow({ hero: () => TestHero, onException: [{ action: 'reattempt' }] })
export class ClassPolicyWalkWorkflow extends GenevaWorkflow<TestHero> {
  static failed = false;
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5])) {
      seen.push(item);
      if (item === 3 && !ClassPolicyWalkWorkflow.failed) {
        ClassPolicyWalkWorkflow.failed = true;
        throw new Error('item 3 failed');
      }
    }
  }
}

/** Class-level reattempt with two reattempts and `terminalAction: 'cancel'`; item 2 always fails. */
@Workflow({ hero: () => TestHero, onException: [{ action: 'reattempt', maxReattempts: 2, terminalAction: 'cancel' }] })
export class ExhaustingWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3])) {
      seen.push(item);
      if (item === 2) throw new Error('item 2 always fails');
    }
  }
}

/** Workflow-level and per-step job options; two checkpoints per execution. */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true } })
export class JobOptionsWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ jobOptions: { priority: 7 }, maxIterations: 2 })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) seen.push(item);
  }

  @Step({ jobOptions: { priority: 1 } }) async after() { seen.push('after'); }
}

/** Default policy (pause); item `failOn` fails once. */
@Workflow({ hero: () => TestHero })
export class PausingOnErrorWalkWorkflow extends GenevaWorkflow<TestHero> {
  static failOn: string | null = 'c';
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      if (item === PausingOnErrorWalkWorkflow.failOn) {
        PausingOnErrorWalkWorkflow.failOn = null;
        throw new Error(`failed on ${item}`);
      }
      seen.push(item);
    }
  }

  @Step() async after() { seen.push('after'); }
}

/**
 * Pauses its own workflow behind the engine's back at item `pauseAt` (first run only): an operator's
 * pause cannot happen while the workflow is performing (`WorkflowService.pause` refuses), so the
 * body writes the row with SQL, as another process would.
 */
@Workflow({ hero: () => TestHero })
export class OutOfBandPauseWorkflow extends GenevaWorkflow<TestHero> {
  static pauseAt: string | null = 'b';
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      if (item === OutOfBandPauseWorkflow.pauseAt && !iter.resumed) {
        await this.dataSource
          .createQueryBuilder()
          .update(WorkflowRecord)
          .set({ state: 'paused' })
          .where('id = :id', { id: this.record.id })
          .execute();
      }
    }
  }

  @Step() async after() { seen.push('after'); }
}

@Workflow({ hero: () => TestHero })
export class SkipIfWalkWorkflow extends GenevaWorkflow<TestHero> {
  static skip = false;
  @ResumableStep({ skipIf: () => SkipIfWalkWorkflow.skip })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) seen.push(item);
  }

  @Step() async after() { seen.push('after'); }
}

/** Stops at items that have a `Hold` (a stalled worker). */
@Workflow({ hero: () => TestHero })
export class StallingWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      await holdAt(item);
    }
  }

  @Step() async after() { seen.push('after'); }
}

/** Twelve items of 15 ms each, `maxRuntime: '50ms'`. */
@Workflow({ hero: () => TestHero })
export class MaxRuntimeWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ maxRuntime: '50ms' })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])) {
      seen.push(item);
      await sleep(15);
    }
  }
}

/** Begins the executor's shutdown from inside the body, at item 'b'. */
@Workflow({ hero: () => TestHero })
export class ShutdownWalkWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly executor: ExecutorService) {
    super();
  }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over(ITEMS)) {
      seen.push(item);
      if (item === 'b') this.executor.beginShutdown();
    }
  }
}

/** Eight items of 25 ms each, for an application closed while the step runs. */
@Workflow({ hero: () => TestHero })
export class SlowWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4, 5, 6, 7, 8])) {
      seen.push(item);
      await sleep(25);
    }
  }
}

// ------------------------------------------------------------------ keyset iteration over a table

/** Rows for `overRecords`/`overBatches`: `code` is unique and not in id order. */
@Entity({ name: 'resumable_records' })
export class ResumableRecord {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ type: 'varchar', length: 32 })
  code: string;

  @Column({ type: 'varchar', length: 8 })
  grp: string;

  @Column({ type: 'integer', default: 0 })
  touched: number;
}

export async function createRecordsTable(queryRunner: QueryRunner): Promise<void> {
  await queryRunner.createTable(
    new Table({
      name: 'resumable_records',
      columns: [
        { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
        { name: 'code', type: 'varchar', length: '32' },
        { name: 'grp', type: 'varchar', length: '8' },
        { name: 'touched', type: 'integer', default: 0 },
      ],
      uniques: [{ name: 'uq_resumable_records_code', columnNames: ['code'] }],
    }),
    true,
  );
}

/** overRecords on the id (the default), three rows per page, only group 'a'. */
@Workflow({ hero: () => TestHero })
export class RecordsWalkWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @ResumableStep()
  async walk(iter: StepIteration<number>) {
    const query = this.dataSource.getRepository(ResumableRecord).createQueryBuilder('r').where('r.grp = :grp', { grp: 'a' });
    for await (const record of iter.overRecords(query, { batchSize: 3 })) seen.push(record.code);
  }
}

/** overRecords keyed on the unique `code` column, two rows per page. */
@Workflow({ hero: () => TestHero })
export class CodeKeysetWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @ResumableStep()
  async walk(iter: StepIteration<string>) {
    const query = this.dataSource.getRepository(ResumableRecord).createQueryBuilder('r');
    for await (const record of iter.overRecords(query, { cursor: 'code', batchSize: 2 })) seen.push(record.code);
  }
}

/** overBatches of four over group 'a': each batch query is loaded and its rows touched once. */
@Workflow({ hero: () => TestHero })
export class BatchesWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @ResumableStep()
  async touch(iter: StepIteration<number>) {
    const records = this.dataSource.getRepository(ResumableRecord);
    const query = records.createQueryBuilder('r').where('r.grp = :grp', { grp: 'a' });
    for await (const batch of iter.overBatches(query, { batchSize: 4 })) {
      const rows = await batch.orderBy('r.id', 'ASC').getMany();
      seen.push(rows.map((row) => row.code));
      await records.increment({ id: In(rows.map((row) => row.id)) }, 'touched', 1);
    }
  }
}

// ------------------------------------------------------------------ resumable + waitFor (SIG-49)

/** What the signal-walk test steers and observes. */
export const signalProbe = {
  matcherCalls: 0,
  pauseAt: null as number | null,
  failAt: null as number | null,
  onError: 'pause' as 'pause' | 'reattempt',
};

@Workflow({ hero: () => TestHero })
export class SignalWalkWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({
    waitFor: new SignalMatcher<{ batchId: string }>('batch_ready', () => {
      signalProbe.matcherCalls++;
      return true;
    }),
    maxIterations: 2,
    // An imperative handler that decides nothing pauses the workflow with the execution failed.
    onException: (_error, wf: SignalWalkWorkflow) => {
      if (signalProbe.onError === 'reattempt') wf.reattempt();
    },
  })
  async walk(iter: StepIteration<number>) {
    for await (const item of iter.over([1, 2, 3, 4])) {
      seen.push([item, this.receivedSignal!.id, this.receivedSignal!.payload.batchId]);
      if (item === signalProbe.pauseAt && !iter.resumed) this.pause();
      if (item === signalProbe.failAt) {
        signalProbe.failAt = null;
        throw new Error(`item ${item} failed`);
      }
    }
  }

  @Step() async after() { seen.push('after'); }
}
