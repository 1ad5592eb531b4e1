/**
 * Fixture workflows for the multi-process spec. They are loaded both by jest (to start workflows)
 * and by the compiled worker processes (to run them), so they import the library by relative path,
 * not through the `geneva-drive` alias that only jest and the type checker know.
 *
 * Every body records its run in `test_step_runs` (created by the spec): which workflow and step,
 * which process, and when the body started and finished (epoch milliseconds).
 */
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

export const STEP_RUNS_TABLE = 'test_step_runs';

/** Portable DDL (PostgreSQL, MySQL/MariaDB, SQLite) for the runs table. */
export const CREATE_STEP_RUNS_TABLE = `CREATE TABLE ${STEP_RUNS_TABLE} (
  workflow_id VARCHAR(64) NOT NULL,
  step VARCHAR(64) NOT NULL,
  pid INTEGER NOT NULL,
  started_at BIGINT NOT NULL,
  finished_at BIGINT NOT NULL
)`;

export interface StepRun {
  workflowId: string;
  step: string;
  pid: number;
  startedAt: number;
  finishedAt: number;
}

/** Every recorded run, oldest first. */
export async function readStepRuns(dataSource: DataSource): Promise<StepRun[]> {
  const rows: Record<string, unknown>[] = await dataSource.query(
    `SELECT workflow_id, step, pid, started_at, finished_at FROM ${STEP_RUNS_TABLE} ORDER BY started_at, finished_at`,
  );
  return rows.map((row) => ({
    workflowId: String(row.workflow_id),
    step: String(row.step),
    pid: Number(row.pid),
    startedAt: Number(row.started_at),
    finishedAt: Number(row.finished_at),
  }));
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

abstract class RecordingWorkflow extends GenevaWorkflow<TestHero> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  /** The body of every step: sleep `ms`, then record the run with its start and end times. */
  protected async run(step: string, ms: number): Promise<void> {
    const startedAt = Date.now();
    await sleep(ms);
    const finishedAt = Date.now();
    const p = (i: number) => (this.dataSource.options.type === 'postgres' ? `$${i}` : '?');
    await this.dataSource.query(
      `INSERT INTO ${STEP_RUNS_TABLE} (workflow_id, step, pid, started_at, finished_at) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)})`,
      [this.record.id, step, process.pid, startedAt, finishedAt],
    );
  }
}

/**
 * A slow first step that is due only in an hour (so the queue leaves it alone and the spec delivers
 * it twice on purpose), then a quick second step that the queue runs normally.
 */
@Workflow({ hero: () => TestHero })
export class WorkerDuplicateWorkflow extends RecordingWorkflow {
  @Step({ wait: '1h' })
  async slow() {
    await this.run('slow', 400);
  }

  @Step()
  async quick() {
    await this.run('quick', 10);
  }
}

const randomMs = () => 20 + Math.floor(Math.random() * 61); // 20..80

/**
 * Three steps that each sleep a random 20-80 ms. LIFO jobs: a step enqueued by its predecessor goes
 * to the head of the queue, not behind the backlog of other workflows, so it would be picked up at
 * once if the engine ever released it before the predecessor was done (overlaps would show).
 */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true } })
export class WorkerThreeStepWorkflow extends RecordingWorkflow {
  @Step()
  async one() {
    await this.run('one', randomMs());
  }

  @Step()
  async two() {
    await this.run('two', randomMs());
  }

  @Step()
  async three() {
    await this.run('three', randomMs());
  }
}

export const WORKER_WORKFLOWS = [WorkerDuplicateWorkflow, WorkerThreeStepWorkflow];
