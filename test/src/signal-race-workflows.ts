/**
 * Fixture workflows of the signals race spec (test/e2e/signals-race.e2e-spec.ts). Loaded by jest (to
 * start workflows) and by the compiled child processes of test/src/signal-race-process.ts (to run
 * them or to signal them), so they import the library by relative path, not through the
 * `geneva-drive` alias that only jest and the type checker know.
 *
 * The `waitFor: 'go'` step records what it received in `test_signal_receipts` (created by the spec
 * with raw SQL): which workflow, which signal, its payload and the process that ran the body. A step
 * woken twice, or a signal delivered to two executions, shows as two receipts.
 */
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

export const RECEIPTS_TABLE = 'test_signal_receipts';

/** Portable DDL (PostgreSQL, MySQL/MariaDB, SQLite). */
export const CREATE_RECEIPTS_TABLE = `CREATE TABLE ${RECEIPTS_TABLE} (
  workflow_id VARCHAR(64) NOT NULL,
  signal_id VARCHAR(64),
  payload TEXT,
  pid INTEGER NOT NULL
)`;

/** The signal the race spec waits for. */
export const GO = 'go';

export interface Receipt {
  workflowId: string;
  signalId: string | null;
  payload: unknown;
  pid: number;
}

export async function readReceipts(dataSource: DataSource): Promise<Receipt[]> {
  const rows: Record<string, unknown>[] = await dataSource.query(`SELECT workflow_id, signal_id, payload, pid FROM ${RECEIPTS_TABLE}`);
  return rows.map((row) => ({
    workflowId: String(row.workflow_id),
    signalId: row.signal_id === null ? null : String(row.signal_id),
    payload: row.payload === null ? null : JSON.parse(String(row.payload)),
    pid: Number(row.pid),
  }));
}

/** Messages the workflow bodies send to the parent of the worker process running them. */
export type WarmupMessage = { type: 'warmup'; pid: number; workflowId: string; at: number };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

abstract class ReceiptWorkflow extends GenevaWorkflow<TestHero> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  protected async recordReceipt(): Promise<void> {
    const signal = this.receivedSignal;
    const p = (i: number) => (this.dataSource.options.type === 'postgres' ? `$${i}` : '?');
    await this.dataSource.query(`INSERT INTO ${RECEIPTS_TABLE} (workflow_id, signal_id, payload, pid) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)})`, [
      this.record.id,
      signal?.id ?? null,
      signal ? JSON.stringify(signal.payload) : null,
      process.pid,
    ]);
  }
}

/**
 * warmup (random 0-40 ms) → awaitGo (waitFor 'go', records a receipt) → done. The warmup body tells
 * its process's parent when it starts, so the spec's sender can start its own random delay from the
 * same moment: whether the signal finds awaitGo parked or is buffered before its gate is a real race.
 * LIFO jobs: a step enqueued by its predecessor is not queued behind other workflows' warmups.
 */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true } })
export class SignalRaceWorkflow extends ReceiptWorkflow {
  @Step()
  async warmup() {
    const message: WarmupMessage = { type: 'warmup', pid: process.pid, workflowId: this.record.id, at: Date.now() };
    process.send?.(message);
    await sleep(Math.floor(Math.random() * 41));
  }

  @Step({ waitFor: GO })
  async awaitGo() {
    await this.recordReceipt();
  }

  @Step()
  async done() {}
}

/**
 * hold (due in an hour: the spec promotes its job when it wants) → awaitGo → done. Signals sent
 * while hold is pending find no parked step: they are buffered, and awaitGo's gate claims them.
 */
@Workflow({ hero: () => TestHero })
export class SignalRaceHeldWorkflow extends ReceiptWorkflow {
  @Step({ wait: '1h' })
  async hold() {}

  @Step({ waitFor: GO })
  async awaitGo() {
    await this.recordReceipt();
  }

  @Step()
  async done() {}
}

export const SIGNAL_RACE_WORKFLOWS = [SignalRaceWorkflow, SignalRaceHeldWorkflow];
