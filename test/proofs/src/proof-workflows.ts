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
 *
 * LedgerProofWorkflow and PlainLedgerProofWorkflow are the pair of the transactional effects proof:
 * the same steps writing the same rows, through a transactional step's `this.manager` in the first
 * (each row commits with its step's completion) and through the DataSource in the second.
 * KeyedProofWorkflow is the flow-control proof's: its steps hold a concurrency key and write nothing.
 * RatedProofWorkflow is the rate-limits proof's: its second step has a rate limit, and writes nothing.
 */
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource, EntityManager } from 'typeorm';
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

/** What a worker's step bodies tell the spec (see the file); `held`: the body waits for the spec's release (holdBodies). */
export interface BodyReport {
  type: 'body';
  pid: number;
  event: 'start' | 'held' | 'end';
  executionId: string;
  /** `held`: the spec's hold it waits for (holdBodies). */
  hold?: number;
  /** The body runs in its step's transaction (a transactional step). */
  transactional?: boolean;
}

function reportBody(event: BodyReport['event'], executionId: string, transactional = false, hold?: number): void {
  if (process.env.GD_PROOF_ROLE === 'worker') {
    process.send?.({ type: 'body', pid: process.pid, event, executionId, ...(transactional ? { transactional } : {}), ...(hold === undefined ? {} : { hold }) } satisfies BodyReport);
  }
}

/**
 * While holding, a body that starts waits until released: ProofWorkflow's before its side effect,
 * the ledger pair's after writing it (a transactional body's row is then written and uncommitted),
 * the keyed and rated ones before their sleep.
 * The spec holds bodies to kill a worker, or its database sessions, inside one it chose.
 */
let holding: number | undefined;
const held = new Map<string, () => void>();

/** From now on, bodies that start wait until released; their `held` reports name `hold`. */
export function holdBodies(hold: number): void {
  holding = hold;
}

/** Lets the held bodies of `executionIds` go on; without them, every held body, and stops holding. */
export function releaseBodies(executionIds?: string[]): void {
  if (!executionIds) holding = undefined;
  for (const id of executionIds ?? [...held.keys()]) {
    held.get(id)?.();
    held.delete(id);
  }
}

async function waitIfHeld(executionId: string, transactional = false): Promise<void> {
  if (holding === undefined) return;
  const released = new Promise<void>((resolve) => held.set(executionId, resolve));
  reportBody('held', executionId, transactional, holding);
  await released;
}

/** Inserts a step's side effect row through `runner` (the DataSource, or a transaction's EntityManager). */
async function insertSideEffect(runner: DataSource | EntityManager, wf: GenevaWorkflow<TestHero>, step: string): Promise<void> {
  const type = 'connection' in runner ? runner.connection.options.type : runner.options.type;
  const p = (i: number) => (type === 'postgres' ? `$${i}` : '?');
  await runner.query(
    `INSERT INTO ${SIDE_EFFECTS_TABLE} (workflow_id, execution_id, step, signal_id, pid, at) VALUES (${p(1)}, ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)})`,
    [wf.record.id, wf.currentExecution.id, step, wf.receivedSignal?.id ?? null, process.pid, Date.now()],
  );
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
      await waitIfHeld(this.currentExecution.id);
      await this.write(step);
    } finally {
      reportBody('end', this.currentExecution.id);
    }
  }

  private async write(step: string): Promise<void> {
    await sleep(random(5, 40));
    await insertSideEffect(this.dataSource, this, step);
    await sleep(random(5, 40));
  }
}

/**
 * The steps of the effects proof's pair: prepare → awaitGo (waitFor 'go') → book. `awaitGo` and
 * `book` each write one side effect row, between two random sleeps, through the runner the subclass
 * gives (`effects()`); `prepare` writes nothing. Each subclass keeps reattempting a step whose body
 * failed (its own statement met a killed connection), so that every workflow runs to its end
 * whatever the faults.
 */
abstract class LedgerProofSteps extends GenevaWorkflow<TestHero> {
  @Step({ transactional: false })
  async prepare() {}

  @Step({ waitFor: GO })
  async awaitGo() {
    await this.effect('awaitGo');
  }

  @Step()
  async book() {
    await this.effect('book');
  }

  /** Where the side effect rows are written. */
  protected abstract effects(): DataSource | EntityManager;

  /** Whether the body runs in its step's transaction. */
  protected abstract readonly transactional: boolean;

  private async effect(step: string): Promise<void> {
    reportBody('start', this.currentExecution.id, this.transactional);
    try {
      await sleep(random(5, 40));
      await insertSideEffect(this.effects(), this, step);
      // In a transactional step the row is written and not yet committed: a fault now must lose it.
      await waitIfHeld(this.currentExecution.id, this.transactional);
      await sleep(random(20, 80));
    } finally {
      reportBody('end', this.currentExecution.id, this.transactional);
    }
  }
}

/** A step whose body failed runs again, as often as it takes. */
const REATTEMPT_ALWAYS = [{ action: 'reattempt' as const, maxReattempts: null }];

/** `awaitGo` and `book` are transactional: each row commits with its step's completion, or not at all. */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true }, transactional: true, onException: REATTEMPT_ALWAYS })
export class LedgerProofWorkflow extends LedgerProofSteps {
  protected readonly transactional = true;

  protected effects(): EntityManager {
    return this.manager;
  }
}

/** The same steps, plain: each row commits on its own, before the step's outcome. */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true }, onException: REATTEMPT_ALWAYS })
export class PlainLedgerProofWorkflow extends LedgerProofSteps {
  protected readonly transactional = false;

  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  protected effects(): DataSource {
    return this.dataSource;
  }
}

/** How many executions of KeyedProofWorkflow may hold one key at once. */
export const FLOW_KEY_LIMIT = 2;

/** The key of a hero's KeyedProofWorkflow: heroes spread over `keys` keys by id. */
export const flowKeyOf = (heroId: number, keys: number) => `k${heroId % keys}`;

/** The flow-control and rate-limits proofs set the number of keys in their workers' environment. */
const flowKeys = () => Number(process.env.GD_PROOF_FLOW_KEYS ?? '20');

/**
 * The flow-control proof's workflow: first → second (chained inline), each step holding a slot of
 * its hero's key (the workflow's `concurrency`) for a body of 20–80 ms, reported to the spec so that
 * a kill knows it lands in one. The body writes nothing: the proof reads the executions' own times.
 */
@Workflow({ hero: () => TestHero, jobOptions: { lifo: true }, concurrency: { key: (wf: KeyedProofWorkflow) => flowKeyOf(wf.hero.id, flowKeys()), limit: FLOW_KEY_LIMIT } })
export class KeyedProofWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async first() {
    await this.hold();
  }

  @Step()
  async second() {
    await this.hold();
  }

  private async hold(): Promise<void> {
    reportBody('start', this.currentExecution.id);
    try {
      await waitIfHeld(this.currentExecution.id);
      await sleep(random(20, 80));
    } finally {
      reportBody('end', this.currentExecution.id);
    }
  }
}

/** RatedProofWorkflow's rate: at most this many starts of `send` per key in any window of RATE_PER. */
export const RATE_LIMIT = 2;
/**
 * 1 s; 4 s in the long run (GD_PROOF_SCALE, in every process's environment), whose sender starts
 * some 20 workflows a second on a busy machine over 20 keys: the rate must stay well below that to bite.
 */
export const RATE_PER_MS = process.env.GD_PROOF_SCALE === 'full' ? 4_000 : 1_000;
export const RATE_PER = `${RATE_PER_MS / 1_000}s` as const;

/** The rate key of a hero's RatedProofWorkflow: heroes spread over `keys` keys by id. */
export const rateKeyOf = (heroId: number, keys: number) => `r${heroId % keys}`;

/**
 * The rate-limits proof's workflow: arrive → send (chained inline). `arrive` does nothing, so that
 * `send`'s phase 1 runs in a chain as often as from a job; `send` has the rate limit of its hero's
 * key and a body of 10–50 ms, reported to the spec so that a kill knows it lands in one. The body
 * writes nothing: the proof reads the executions' own start times. FIFO jobs, not LIFO: Bull puts a
 * delayed job that falls due at the back of the waiting line, where a stream of LIFO jobs (the
 * sender's) would keep it while workers are busy — the promised windows would pass unused.
 */
@Workflow({ hero: () => TestHero })
export class RatedProofWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async arrive() {}

  @Step({ rateLimit: { key: (wf: RatedProofWorkflow) => rateKeyOf(wf.hero.id, flowKeys()), limit: RATE_LIMIT, per: RATE_PER } })
  async send() {
    reportBody('start', this.currentExecution.id);
    try {
      await waitIfHeld(this.currentExecution.id);
      await sleep(random(10, 50));
    } finally {
      reportBody('end', this.currentExecution.id);
    }
  }
}

export const PROOF_WORKFLOWS = [ProofWorkflow, LedgerProofWorkflow, PlainLedgerProofWorkflow, KeyedProofWorkflow, RatedProofWorkflow];
