/**
 * Workflows with transactional steps, and the effect table their bodies write: a table with no
 * unique key, so a body whose writes committed twice shows as two rows.
 */
import { Column, Entity, PrimaryGeneratedColumn, Table, type DataSource } from 'typeorm';
import { GenevaWorkflow, ResumableStep, SignalService, Step, Workflow, WorkflowService, type StepIteration } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

@Entity({ name: 'test_effects' })
export class TestEffect {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ name: 'workflow_id', type: 'varchar', length: 64 })
  workflowId: string;

  @Column({ type: 'varchar', length: 64 })
  step: string;
}

/** Creates the effect table if it is missing (the spec's own table: the test schema does not hold it). */
export async function ensureEffectTable(dataSource: DataSource): Promise<void> {
  const runner = dataSource.createQueryRunner();
  try {
    await runner.createTable(
      new Table({
        name: 'test_effects',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'workflow_id', type: 'varchar', length: '64' },
          { name: 'step', type: 'varchar', length: '64' },
        ],
      }),
      true,
    );
    await runner.query(`DELETE FROM ${dataSource.driver.escape('test_effects')}`);
  } finally {
    await runner.release();
  }
}

/** What the transactional step `b` does after its writes, per workflow id (default: completes). */
export type Ending = 'complete' | 'throw' | 'finished' | 'skip' | 'reattempt-once' | 'pause' | 'cancel' | 'sleep' | 'show-timeouts';

export const control = {
  endings: new Map<string, Ending>(),
  /** A body that reached `reached` waits for `release` (set by the spec). */
  gate: null as null | { reached: () => void; release: Promise<void> },
  journal: [] as string[],
  reattempted: new Set<string>(),
  /** The item of BatchLedgerWorkflow whose body throws once. */
  failAt: null as number | null,
  /** The workflow SignalingLedgerWorkflow's step signals `paid`. */
  signalTarget: '',
  /** The next RelayLedgerWorkflow instance built throws (an inline start that fails). */
  failConstruction: false,
  reset(): void {
    this.failAt = null;
    this.failConstruction = false;
    this.signalTarget = '';
    this.endings.clear();
    this.gate = null;
    this.journal.length = 0;
    this.reattempted.clear();
  },
};

async function writeEffects(wf: GenevaWorkflow<TestHero>, step: string): Promise<void> {
  await wf.manager.getRepository(TestEffect).insert({ workflowId: wf.record.id, step });
  await wf.manager.getRepository(TestHero).update(wf.hero.id, { name: `${step} wrote` });
}

/** `a → b (transactional) → c`. */
@Workflow({ hero: () => TestHero })
export class LedgerWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async a() {
    control.journal.push('a');
    try {
      void this.manager;
    } catch (error) {
      control.journal.push(`a: ${(error as Error).name}`);
    }
  }

  @Step({ transactional: true, transactionTimeout: '10s' })
  async b() {
    control.journal.push(`b saw hero "${this.hero.name}"`);
    await writeEffects(this, 'b');
    const ending = control.endings.get(this.record.id) ?? 'complete';
    if (control.gate) {
      control.gate.reached();
      await control.gate.release;
    }
    switch (ending) {
      case 'throw':
        throw new Error('the ledger refused');
      case 'finished':
        return this.finished();
      case 'skip':
        return this.skip();
      case 'reattempt-once':
        if (control.reattempted.has(this.record.id)) return;
        control.reattempted.add(this.record.id);
        return this.reattempt();
      case 'pause':
        return this.pause();
      case 'cancel':
        return this.cancel();
      case 'sleep':
        await new Promise((resolve) => setTimeout(resolve, 200));
        break;
      case 'show-timeouts': {
        // The bounds of the transaction, as the body's own statements run under them.
        if (this.manager.connection.options.type === 'postgres') {
          const show = async (setting: string) => ((await this.manager.query(`SHOW ${setting}`)) as Array<Record<string, string>>)[0][setting];
          control.journal.push(`timeouts ${await show('statement_timeout')} ${await show('idle_in_transaction_session_timeout')}`);
        } else {
          const [row] = (await this.manager.query('SELECT @@session.max_statement_time AS s, @@session.idle_transaction_timeout AS i, @@session.autocommit AS a')) as Array<Record<string, unknown>>;
          control.journal.push(`timeouts ${Number(row.s)}s ${Number(row.i)}s autocommit ${Number(row.a)}`);
        }
      }
    }
  }

  @Step()
  async c() {
    control.journal.push('c');
  }
}

/** A transactional step that writes (locking the hero's row), then waits at `control.gate` with its transaction open. */
@Workflow({ hero: () => TestHero })
export class IdleLedgerWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ transactional: true, transactionTimeout: '1s' })
  async b() {
    await writeEffects(this, 'b');
    control.gate?.reached();
    await control.gate?.release;
    await this.manager.query('SELECT 1');
  }
}

/** A transactional step that is over its `transactionTimeout` whenever it sleeps. */
@Workflow({ hero: () => TestHero })
export class HastyLedgerWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ transactional: true, transactionTimeout: 50 })
  async b() {
    await writeEffects(this, 'b');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** A transactional `waitFor` step, and one that starts another workflow in its transaction. */
@Workflow({ hero: () => TestHero, transactional: true })
export class PaidLedgerWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly workflows: WorkflowService) {
    super();
  }

  @Step({ waitFor: 'paid' })
  async book() {
    await writeEffects(this, `paid ${String((this.receivedSignal!.payload as { cents: number }).cents)}`);
  }

  @Step()
  async notify() {
    await this.workflows.start(LedgerWorkflow, this.hero, { manager: this.manager, allowMultiple: true });
    if (control.endings.get(this.record.id) === 'throw') throw new Error('the notification failed');
  }

  @ResumableStep()
  async tally(iteration: StepIteration) {
    for await (const n of iteration.over([1])) control.journal.push(`tally ${n}`);
  }
}

/** A transactional resumable step: one effect row per item, committed with the checkpoint after it. */
@Workflow({ hero: () => TestHero })
export class BatchLedgerWorkflow extends GenevaWorkflow<TestHero> {
  @ResumableStep({ transactional: true, maxIterations: 2, onException: 'reattempt' })
  async book(iteration: StepIteration<number>) {
    for await (const item of iteration.over([1, 2, 3, 4, 5])) {
      await this.manager.getRepository(TestEffect).insert({ workflowId: this.record.id, step: `item ${item}` });
      if (control.gate && item === 2) {
        control.gate.reached();
        await control.gate.release;
      }
      if (control.failAt === item) {
        control.failAt = null;
        throw new Error(`item ${item} failed`);
      }
    }
  }
}

/** A transactional step that writes its row and signals another workflow through its transaction. */
@Workflow({ hero: () => TestHero })
export class SignalingLedgerWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly signals: SignalService) {
    super();
  }

  @Step({ transactional: true })
  async pay() {
    await this.manager.getRepository(TestEffect).insert({ workflowId: this.record.id, step: 'pay' });
    await this.signals.signal(control.signalTarget, 'paid', { manager: this.manager, payload: { cents: 42 } });
    if (control.endings.get(this.record.id) === 'throw') throw new Error('the payment failed');
  }
}

/**
 * `first (transactional) → second (transactional) → last`, chained end to end; with
 * `control.failConstruction` set by `second`, the instance for `last` cannot be built inline.
 */
@Workflow({ hero: () => TestHero, transactional: true })
export class RelayLedgerWorkflow extends GenevaWorkflow<TestHero> {
  constructor() {
    super();
    if (control.failConstruction) {
      control.failConstruction = false;
      throw new Error('this instance cannot be built');
    }
  }

  @Step()
  async first() {
    control.journal.push('first');
    await writeEffects(this, 'first');
  }

  @Step()
  async second() {
    control.journal.push('second');
    await writeEffects(this, 'second');
    if (control.endings.get(this.record.id) === 'throw' && !control.journal.includes('second ran once')) {
      control.journal.push('second ran once');
      control.failConstruction = true;
    }
  }

  @Step({ transactional: false })
  async last() {
    control.journal.push('last');
  }
}

/** One transactional step, the workflow's last: nothing to chain into after it. */
@Workflow({ hero: () => TestHero, transactional: true })
export class SoleLedgerWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async only() {
    await writeEffects(this, 'only');
  }
}

export const TRANSACTIONAL_WORKFLOWS = [SoleLedgerWorkflow, LedgerWorkflow, HastyLedgerWorkflow, IdleLedgerWorkflow, PaidLedgerWorkflow, BatchLedgerWorkflow, SignalingLedgerWorkflow, RelayLedgerWorkflow];
