/**
 * Fixture workflow of the signal-vs-deadline race (test/proofs/deadline-race.e2e-spec.ts). Loaded by
 * jest (to start workflows) and by the compiled child processes of test/src/deadline-race-process.ts,
 * so it imports the library by relative path.
 *
 * awaitGo (waitFor 'go', timeout 3s, onTimeout 'run') records in `test_deadline_receipts` (created by
 * the spec with raw SQL) who won: the signal (its id) or the deadline (`timed_out`), and the process
 * that ran the body. A step run twice, or run by both sides, shows as two receipts.
 */
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

export const DEADLINE_RECEIPTS_TABLE = 'test_deadline_receipts';

/** Portable DDL (PostgreSQL, MySQL/MariaDB, SQLite). */
export const CREATE_DEADLINE_RECEIPTS_TABLE = `CREATE TABLE ${DEADLINE_RECEIPTS_TABLE} (
  workflow_id VARCHAR(64) NOT NULL,
  winner VARCHAR(64) NOT NULL,
  pid INTEGER NOT NULL
)`;

export const GO = 'go';
/** Long enough for the spec to see every step park and tell the sender when to fire. */
export const RACE_TIMEOUT_MS = 3_000;

export interface DeadlineReceipt {
  workflowId: string;
  /** The signal id, or `timed_out`. */
  winner: string;
  pid: number;
}

export async function readDeadlineReceipts(dataSource: DataSource): Promise<DeadlineReceipt[]> {
  const rows: Record<string, unknown>[] = await dataSource.query(`SELECT workflow_id, winner, pid FROM ${DEADLINE_RECEIPTS_TABLE}`);
  return rows.map((row) => ({ workflowId: String(row.workflow_id), winner: String(row.winner), pid: Number(row.pid) }));
}

@Workflow({ hero: () => TestHero })
export class DeadlineRaceWorkflow extends GenevaWorkflow<TestHero> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  @Step({ waitFor: GO, timeout: RACE_TIMEOUT_MS })
  async awaitGo() {
    const p = (i: number) => (this.dataSource.options.type === 'postgres' ? `$${i}` : '?');
    const winner = this.timedOut ? 'timed_out' : String(this.receivedSignal!.id);
    await this.dataSource.query(`INSERT INTO ${DEADLINE_RECEIPTS_TABLE} (workflow_id, winner, pid) VALUES (${p(1)}, ${p(2)}, ${p(3)})`, [this.record.id, winner, process.pid]);
  }

  /** Keeps the workflow ongoing, so a signal that lost the race is buffered rather than refused. */
  @Step({ wait: '1h' })
  async hold() {}
}

export const DEADLINE_RACE_WORKFLOWS = [DeadlineRaceWorkflow];
