/**
 * The workflow of the fault proofs (test/proofs/*.e2e-spec.ts). Loaded by jest (to start workflows
 * and read the tables) and by the compiled child processes of proof-process.ts (to run or signal
 * them), so it imports the library by relative path, not through the `geneva-drive` alias that only
 * jest and the type checker know.
 *
 * Every body performs one side effect of its own: a row in `proof_side_effects`, committed by the
 * body itself (outside the engine's transactions), between two random sleeps. A crash after the row
 * and before the step's outcome commits is exactly the at-least-once window: the row of the
 * recovered execution stays, and its successor writes another.
 *
 * In a proof's worker process (GD_PROOF_ROLE=worker) each body reports its start and its end to the
 * spec, so that a kill knows the steps it interrupts, those a Redis job runs and those the process
 * runs without one (chained inline, or started in-process) alike.
 */
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaWorkflow, Step, Workflow } from '../../../libs/geneva-drive/src/index.js';
import { TestHero } from '../../utils/fixtures.js';

export const SIDE_EFFECTS_TABLE = 'proof_side_effects';

/** Portable DDL (PostgreSQL, MySQL/MariaDB, SQLite). */
export const CREATE_SIDE_EFFECTS_TABLE = `CREATE TABLE ${SIDE_EFFECTS_TABLE} (
  workflow_id VARCHAR(64) NOT NULL,
  execution_id VARCHAR(64) NOT NULL,
  step VARCHAR(64) NOT NULL,
  signal_id VARCHAR(64),
  pid INTEGER NOT NULL,
  at BIGINT NOT NULL
)`;

/** The signal the proof workflow waits for. */
export const GO = 'go';

/** The idempotency key of a workflow's one signal: every delivery of it, redeliveries included, uses it. */
export const goKey = (workflowId: string) => `go-${workflowId}`;

export interface SideEffect {
  workflowId: string;
  executionId: string;
  step: string;
  signalId: string | null;
  pid: number;
  at: number;
}

export async function readSideEffects(dataSource: DataSource): Promise<SideEffect[]> {
  const rows: Record<string, unknown>[] = await dataSource.query(`SELECT workflow_id, execution_id, step, signal_id, pid, at FROM ${SIDE_EFFECTS_TABLE}`);
  return rows.map((row) => ({
    workflowId: String(row.workflow_id),
    executionId: String(row.execution_id),
    step: String(row.step),
    signalId: row.signal_id === null ? null : String(row.signal_id),
    pid: Number(row.pid),
    at: Number(row.at),
  }));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const random = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));

/** What a worker's step bodies tell the spec (see the file). */
export interface BodyReport {
  type: 'body';
  pid: number;
  event: 'start' | 'end';
  executionId: string;
}

function reportBody(event: BodyReport['event'], executionId: string): void {
  if (process.env.GD_PROOF_ROLE === 'worker') process.send?.({ type: 'body', pid: process.pid, event, executionId } satisfies BodyReport);
}

/**
 * prepare → awaitGo (waitFor 'go') → work. `prepare`'s first execution asks to be run again at once
 * (before its side effect): the worker enqueues its successor, due now, which it starts itself
 * (DueJobStarter) — an in-process start in every workflow; `awaitGo` and `work` are chained inline
 * when their turn comes in the same run. LIFO jobs: a step enqueued by its predecessor is not queued
 * behind the backlog of other workflows, so the chain runs while the sender is still busy.
 */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true } })
export class ProofWorkflow extends GenevaWorkflow<TestHero> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async prepare() {
    const p = this.dataSource.options.type === 'postgres' ? '$1' : '?';
    const [{ n }] = await this.dataSource.query(`SELECT COUNT(*) AS n FROM geneva_drive_step_executions WHERE workflow_id = ${p} AND step_name = 'prepare'`, [this.record.id]);
    if (Number(n) === 1) this.reattempt();
    await this.sideEffect('prepare');
  }

  @Step({ waitFor: GO })
  async awaitGo() {
    await this.sideEffect('awaitGo');
  }

  @Step()
  async work() {
    await this.sideEffect('work');
  }

  /** Sleep, write the row, sleep again: a crash can land before the side effect or after it. */
  private async sideEffect(step: string): Promise<void> {
    reportBody('start', this.currentExecution.id);
    try {
      await this.write(step);
    } finally {
      reportBody('end', this.currentExecution.id);
    }
  }

  private async write(step: string): Promise<void> {
    await sleep(random(5, 40));
    const p = (i: number) => (this.dataSource.options.type === 'postgres' ? `$${i}` : '?');
    await this.dataSource.query(
      `INSERT INTO ${SIDE_EFFECTS_TABLE} (workflow_id, execution_id, step, signal_id, pid, at) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`,
      [this.record.id, this.currentExecution.id, step, this.receivedSignal?.id ?? null, process.pid, Date.now()],
    );
    await sleep(random(5, 40));
  }
}

export const PROOF_WORKFLOWS = [ProofWorkflow];
