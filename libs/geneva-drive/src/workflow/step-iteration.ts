import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import { CursorTooLargeError } from '../errors/cursor-too-large.error.js';
import { GenevaDriveError } from '../errors/geneva-drive.error.js';
import { parseDuration, type Duration } from '../util/duration.js';
import { encodedSize, encodePayload } from '../util/payload-codec.js';

/** Why a resumable execution stops early and hands on to a successor. */
export interface Interruption {
  waitMs: number | undefined;
}

const INTERRUPT = Symbol.for('geneva-drive:interrupt');

/** Thrown at a checkpoint to unwind a resumable step; the recorded interruption is what counts. */
export class InterruptSignal {
  readonly [INTERRUPT] = true;
}

export function isInterrupt(value: unknown): value is InterruptSignal {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[INTERRUPT] === true;
}

/** What the executor gives a step iteration: persistence and the interrupt triggers. */
export interface IterationDriver {
  /** Writes the encoded cursor to the execution row (one UPDATE, no lock). */
  persist(encodedCursor: string): Promise<void>;
  /** True when something outside the step wants it to stop: shutdown, or the workflow paused or canceled. */
  shouldStop(): Promise<boolean>;
  maxCursorSize: number | null;
  /** Checkpoints allowed in this execution before it continues in a successor (undefined: no limit). */
  maxIterations: number | undefined;
  maxRuntimeMs: number | undefined;
  /** False while test helpers run a step to its end: only `skipTo` hands on. */
  interruptible: boolean;
}

/**
 * The iteration object of a `@ResumableStep`: a cursor that the body moves forward and that every
 * checkpoint persists at once. At a checkpoint the step may be stopped (runtime or iteration
 * budget, shutdown, the workflow paused or canceled meanwhile); a successor execution then runs the
 * body again from the top with the last persisted cursor — so the body must use the cursor to skip
 * the work already done.
 * @publicApi
 */
export class StepIteration<Cursor = unknown> {
  private current: Cursor | null;
  private moved = false;
  private checkpoints = 0;
  private readonly startedAt = performance.now();
  /** Set when the step must hand on to a successor; honoured even if user code swallows the throw. */
  interruption: Interruption | undefined;

  constructor(
    cursor: Cursor | null,
    /** True when this execution continues an earlier one of the same step. */
    readonly resumed: boolean,
    private readonly driver: IterationDriver,
  ) {
    this.current = cursor;
  }

  /** The value the body should start from; null on the first execution of a chain. */
  get cursor(): Cursor | null {
    return this.current;
  }

  /** True once this execution changed the cursor. */
  get advanced(): boolean {
    return this.moved;
  }

  /** Sets the cursor (the value the next run should start from) and checkpoints. */
  async set(value: Cursor): Promise<void> {
    this.current = value;
    this.moved = true;
    await this.checkpoint();
  }

  /** `set(cursor + 1)` for a numeric cursor; seed it with `set(0)` first. */
  async advance(): Promise<void> {
    if (typeof this.current !== 'number' || !Number.isInteger(this.current)) {
      throw new GenevaDriveError(`advance() needs an integer cursor, got ${JSON.stringify(this.current)}: seed it with set(0)`);
    }
    await this.set((this.current + 1) as Cursor);
  }

  /** Persists the cursor, then stops the step here if it is due to stop. */
  async checkpoint(): Promise<void> {
    await this.persist();
    this.checkpoints++;
    if (this.driver.interruptible && (await this.dueToStop())) this.interrupt(undefined);
  }

  /** Persists `value` and always hands on to a successor, after `wait` if given. */
  async skipTo(value: Cursor, options: { wait?: Duration } = {}): Promise<never> {
    const waitMs = options.wait === undefined ? undefined : parseDuration(options.wait);
    if (options.wait !== undefined && waitMs === undefined) throw new TypeError(`skipTo wait must be a duration, got ${JSON.stringify(options.wait)}`);
    this.current = value;
    this.moved = true;
    await this.persist();
    return this.interrupt(waitMs);
  }

  /**
   * Walks `items` from the cursor (the index of the next item), checkpointing after each. Only for
   * collections that are the same on every run.
   */
  async *over<T>(items: Iterable<T>): AsyncGenerator<T> {
    const start = this.current === null ? 0 : Number(this.current);
    let index = 0;
    for (const item of items) {
      if (index >= start) {
        yield item;
        await this.set((index + 1) as Cursor);
      }
      index++;
    }
  }

  /**
   * Keyset pagination over `query` on a unique column (default `id`): rows with the column greater
   * than the cursor, in ascending order, loaded `batchSize` at a time; the cursor is the column value
   * of the last row processed.
   */
  async *overRecords<E extends ObjectLiteral>(query: SelectQueryBuilder<E>, options: { cursor?: string; batchSize?: number } = {}): AsyncGenerator<E> {
    const column = options.cursor ?? 'id';
    for await (const batch of this.batches(query, column, options.batchSize ?? 100)) {
      for (const row of batch) {
        yield row;
        await this.set(row[column] as Cursor);
      }
    }
  }

  /**
   * Like `overRecords`, but yields a query per batch of `batchSize` rows (for bulk updates and
   * inserts); the cursor moves to the batch's largest column value after each.
   */
  async *overBatches<E extends ObjectLiteral>(query: SelectQueryBuilder<E>, options: { batchSize: number; cursor?: string }): AsyncGenerator<SelectQueryBuilder<E>> {
    const column = options.cursor ?? 'id';
    const alias = query.alias;
    for await (const batch of this.batches(query, column, options.batchSize)) {
      const values = batch.map((row) => row[column]);
      yield query.clone().andWhere(`${alias}.${column} IN (:...geneva_batch)`, { geneva_batch: values });
      await this.set(values[values.length - 1] as Cursor);
    }
  }

  private async *batches<E extends ObjectLiteral>(query: SelectQueryBuilder<E>, column: string, batchSize: number): AsyncGenerator<E[]> {
    if (!Number.isInteger(batchSize) || batchSize <= 0) throw new TypeError('batchSize must be a positive integer');
    const alias = query.alias;
    for (;;) {
      const page = query.clone().orderBy(`${alias}.${column}`, 'ASC').take(batchSize);
      if (this.current !== null) page.andWhere(`${alias}.${column} > :geneva_cursor`, { geneva_cursor: this.current });
      const rows = await page.getMany();
      if (rows.length === 0) return;
      yield rows;
      if (rows.length < batchSize) return;
    }
  }

  private async persist(): Promise<void> {
    const encoded = encodePayload(this.current, 'Cursor');
    const limit = this.driver.maxCursorSize;
    if (limit !== null && encodedSize(encoded) > limit) throw new CursorTooLargeError(encodedSize(encoded), limit);
    await this.driver.persist(encoded);
  }

  private async dueToStop(): Promise<boolean> {
    const { maxIterations, maxRuntimeMs } = this.driver;
    if (maxIterations !== undefined && this.checkpoints >= maxIterations) return true;
    if (maxRuntimeMs !== undefined && performance.now() - this.startedAt > maxRuntimeMs) return true;
    return this.driver.shouldStop();
  }

  private interrupt(waitMs: number | undefined): never {
    this.interruption = { waitMs };
    throw new InterruptSignal();
  }
}
