import type { DataSource } from 'typeorm';

/** How many ids one statement takes from the sequence. */
const BLOCK = 64;

/**
 * Ids for new signals, taken from the signals table's own sequence ahead of their inserts, a block
 * at a time. A signal delivered in one message (postgres-signal-message.ts) must know its row's id
 * before the answer comes back: when the answer is lost, that id is how `signal()` finds out whether
 * the message committed. An id the sequence gave is never given again, so a row found with it is
 * this call's. Ids of one process rise; across processes they interleave, as they always could (rows
 * are ordered by `created_at`, then id).
 */
export class PgSignalIds {
  private readonly free: string[] = [];

  constructor(
    private readonly dataSource: DataSource,
    /** The signals table as a quoted identifier. */
    private readonly table: string,
  ) {}

  /**
   * An id from the pool, or the first of a block taken now. A caller that finds the pool empty takes
   * a block of its own rather than waiting for another's: no call waits on another call.
   */
  async next(): Promise<string> {
    const free = this.free.shift();
    if (free !== undefined) return free;
    const rows: Array<{ id: string }> = await this.dataSource.query(`SELECT nextval(pg_get_serial_sequence($1, 'id'))::text AS id FROM generate_series(1, ${BLOCK})`, [this.table]);
    const [id, ...rest] = rows.map((row) => row.id);
    this.free.push(...rest);
    return id;
  }
}
