/**
 * The application the benchmarks run: a hero entity, the workflows, and the probe through which the
 * step bodies (and the engine's diagnostics events) report back to the measuring code. Wired like a
 * user's app: TypeOrmModule.forRoot with the geneva-drive entities and migrations, GenevaDriveModule
 * with a real queue adapter (local, Bull or BullMQ), workflows listed among the providers.
 */
import 'reflect-metadata';
import { type LoggerService, Module, type DynamicModule } from '@nestjs/common';
import { InjectDataSource, TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { channel, subscribe } from 'node:diagnostics_channel';
import { Column, DataSource, Entity, PrimaryGeneratedColumn, Table, type Logger as TypeOrmLogger, type MigrationInterface, type QueryRunner } from 'typeorm';
import {
  childrenOf,
  GENEVA_DRIVE_CHANNELS,
  GENEVA_DRIVE_ENTITIES,
  GENEVA_DRIVE_MIGRATIONS,
  GenevaDriveModule,
  GenevaWorkflow,
  Step,
  Workflow,
  type FinalizeEvent,
  type PreconditionEvent,
  type QueueAdapterOptions,
} from 'geneva-drive';

/** The signal the parked workflows wait for. */
export const WAKE_SIGNAL = 'bench_wake';
/** Stored workflow type names (explicit, so the bulk-inserted rows can name them). */
export const STEPS_WORKFLOW = 'BenchStepsWorkflow';
export const SIGNAL_WORKFLOW = 'BenchSignalWorkflow';
export const PAYMENT_WORKFLOW = 'BenchPaymentWorkflow';
/** The same shape whose waiting step has a deadline (`timeout`), for the idle window. */
export const DEADLINE_PAYMENT_WORKFLOW = 'BenchDeadlinePaymentWorkflow';
/** The same shape whose `b` writes one row: through its transaction (a transactional step), or through the DataSource (a plain one). */
export const LEDGER_PAYMENT_WORKFLOW = 'BenchLedgerPaymentWorkflow';
export const PLAIN_LEDGER_PAYMENT_WORKFLOW = 'BenchPlainLedgerPaymentWorkflow';
/** The children scenario: the two-step workflow started as a child or by start(), and the parent fanning out to it. */
export const KEYED_PAYMENT_WORKFLOW = 'BenchKeyedPaymentWorkflow';
export const SLOT_WORKFLOW = 'BenchSlotWorkflow';
/** The concurrency keys BenchSlotWorkflow's executions share (limit 1 each). */
export const SLOT_KEYS = 10;
export const CHILD_WORKFLOW = 'BenchChildWorkflow';
export const FAN_OUT_WORKFLOW = 'BenchFanOutWorkflow';
/** The signal BenchPaymentWorkflow's second step waits for. */
export const PAYMENT_SIGNAL = 'payment_confirmed';
/** The parked step of BenchSignalWorkflow. */
export const PARKED_STEP = 'park';
export const HERO_TABLE = 'bench_heroes';
/** The rows the ledger shapes' `b` writes. */
export const EFFECT_TABLE = 'bench_effects';

@Entity({ name: HERO_TABLE })
export class BenchHero {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ type: 'varchar', length: 64, default: '' })
  label: string;
}

/** Creates the hero table; runs before geneva-drive's migrations. */
export class CreateBenchHeroes1600000000000 implements MigrationInterface {
  name = 'CreateBenchHeroes1600000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: HERO_TABLE,
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'label', type: 'varchar', length: '64', isNullable: false, default: `''` },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(HERO_TABLE, true);
  }
}

/** One row a ledger shape's `b` wrote. */
@Entity({ name: EFFECT_TABLE })
export class BenchEffect {
  @PrimaryGeneratedColumn({ type: 'integer' })
  id: number;

  @Column({ name: 'workflow_id', type: 'varchar', length: 64 })
  workflowId: string;

  @Column({ type: 'varchar', length: 64 })
  step: string;
}

/** Creates the effect table (no unique key besides its id: a row written twice would show). */
export class CreateBenchEffects1600000000001 implements MigrationInterface {
  name = 'CreateBenchEffects1600000000001';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: EFFECT_TABLE,
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'workflow_id', type: 'varchar', length: '64' },
          { name: 'step', type: 'varchar', length: '64' },
        ],
      }),
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable(EFFECT_TABLE, true);
  }
}

// ------------------------------------------------------------------ probe

/**
 * One value per key, whichever comes first: the arrival (`arrive`) or the wait (`wait`). Step bodies
 * and event subscribers run in this process (the local queue, or the Bull or BullMQ worker of this process).
 */
export class Arrivals<T> {
  private readonly values = new Map<string, T>();
  private readonly waiters = new Map<string, (value: T) => void>();

  arrive(key: string, value: T): void {
    const waiter = this.waiters.get(key);
    if (waiter) {
      this.waiters.delete(key);
      waiter(value);
    } else {
      this.values.set(key, value);
    }
  }

  wait(key: string, timeoutMs: number, what: string): Promise<T> {
    if (this.values.has(key)) {
      const value = this.values.get(key)!;
      this.values.delete(key);
      return Promise.resolve(value);
    }
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(key);
        reject(new Error(`bench: timed out after ${timeoutMs} ms waiting for ${what} of workflow ${key}`));
      }, timeoutMs);
      this.waiters.set(key, (value) => {
        clearTimeout(timer);
        resolve(value);
      });
    });
  }
}

export interface BodyStart {
  /** performance.now() as the body began. */
  at: number;
  /** The payload's sequence number: proves the body saw the signal that was sent. */
  seq: unknown;
  signalId: string | null;
}

/** What the bodies and the engine's events report. */
export const probe = {
  /** Bodies of BenchStepsWorkflow that ran. */
  noopSteps: 0,
  /** Bodies of BenchSignalWorkflow.park that ran. */
  wokenBodies: 0,
  /** BenchSignalWorkflow.park began, by workflow id. */
  bodyStarts: new Arrivals<BodyStart>(),
  /** BenchSignalWorkflow's step outcome committed, by workflow id. */
  finalized: new Arrivals<FinalizeEvent>(),
  /** BenchPaymentWorkflow's `b` found no signal and parked, by workflow id (performance.now()). */
  paymentParked: new Arrivals<number>(),
  /** BenchPaymentWorkflow's `b` began, by workflow id (performance.now()). */
  paymentBodies: new Arrivals<number>(),
  /** BenchPaymentWorkflow's last outcome committed, by workflow id. */
  paymentFinished: new Arrivals<FinalizeEvent>(),
  /** BenchChildWorkflow finished, by workflow id (started by start() or as a child). */
  childFinished: new Arrivals<true>(),
  /** The heroes of the children BenchFanOutWorkflow starts, by the parent's hero id (set before its start()). */
  childHeroes: new Map<number, BenchHero[]>(),
  /** BenchFanOutWorkflow's fan-in body ran, by workflow id: the children it saw and how many had finished. */
  fanIn: new Arrivals<{ children: number; finished: number; keys: number }>(),
  /** BenchFanOutWorkflow finished, by workflow id. */
  fanOutFinished: new Arrivals<true>(),
  /** Consecutive hero ids share BenchSlotWorkflow's key in blocks of this many, so that the executions a queue takes together contend. */
  slotBlock: 1,
  /** BenchSlotWorkflow's bodies as they began and ended (performance.now()), with their key. */
  slotBodies: [] as Array<{ workflowId: string; key: string; began: number; ended: number }>,
  /** BenchSlotWorkflow's executions that waited for their key's slot (phase 1 throttled), by workflow id. */
  slotWaited: new Set<string>(),
  /** When BenchSlotWorkflow's first phase 1 ended (passed or throttled), by workflow id: its first job done. */
  slotFirstJobs: new Map<string, number>(),
  /** BenchSlotWorkflow finished, by workflow id. */
  slotFinished: new Arrivals<true>(),
};

/** The workflows of the shape whose parks and ends the probe reports. */
const PARKING_SHAPES = new Set([PAYMENT_WORKFLOW, DEADLINE_PAYMENT_WORKFLOW, LEDGER_PAYMENT_WORKFLOW, PLAIN_LEDGER_PAYMENT_WORKFLOW, KEYED_PAYMENT_WORKFLOW]);
const FINISHING_SHAPES = new Set([PAYMENT_WORKFLOW, LEDGER_PAYMENT_WORKFLOW, PLAIN_LEDGER_PAYMENT_WORKFLOW, KEYED_PAYMENT_WORKFLOW]);

subscribe(GENEVA_DRIVE_CHANNELS.precondition, (message) => {
  const event = message as PreconditionEvent;
  if (PARKING_SHAPES.has(event.workflowClass) && event.outcome === 'waiting') probe.paymentParked.arrive(event.workflowId, performance.now());
  if (event.workflowClass === SLOT_WORKFLOW && !probe.slotFirstJobs.has(event.workflowId)) probe.slotFirstJobs.set(event.workflowId, performance.now());
  if (event.workflowClass === SLOT_WORKFLOW && event.outcome === 'throttled') probe.slotWaited.add(event.workflowId);
});

subscribe(GENEVA_DRIVE_CHANNELS.finalize, (message) => {
  const event = message as FinalizeEvent;
  if (event.workflowClass === SIGNAL_WORKFLOW) probe.finalized.arrive(event.workflowId, event);
  if (FINISHING_SHAPES.has(event.workflowClass) && event.workflowState === 'finished') probe.paymentFinished.arrive(event.workflowId, event);
  if (event.workflowClass === CHILD_WORKFLOW && event.workflowState === 'finished') probe.childFinished.arrive(event.workflowId, true);
  if (event.workflowClass === FAN_OUT_WORKFLOW && event.workflowState === 'finished') probe.fanOutFinished.arrive(event.workflowId, true);
  if (event.workflowClass === SLOT_WORKFLOW && event.workflowState === 'finished') probe.slotFinished.arrive(event.workflowId, true);
});

// ------------------------------------------------------------------ workflows

/** Three no-op steps: what the engine costs per step, with nothing else in the way. */
@Workflow({ name: STEPS_WORKFLOW, hero: () => BenchHero })
export class BenchStepsWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async first() {
    probe.noopSteps++;
  }

  @Step()
  async second() {
    probe.noopSteps++;
  }

  @Step()
  async third() {
    probe.noopSteps++;
  }
}

/** One step parked on a signal; its body stamps the moment it starts. */
@Workflow({ name: SIGNAL_WORKFLOW, hero: () => BenchHero })
export class BenchSignalWorkflow extends GenevaWorkflow<BenchHero> {
  @Step({ name: PARKED_STEP, waitFor: WAKE_SIGNAL })
  async park() {
    const at = performance.now();
    probe.wokenBodies++;
    const signal = this.receivedSignal;
    probe.bodyStarts.arrive(this.record.id, { at, seq: signal?.payload?.seq, signalId: signal?.id ?? null });
  }
}

/**
 * The shape compared with other durable-workflow engines: a no-op step, then a no-op step that
 * waits for `payment_confirmed`.
 */
@Workflow({ name: PAYMENT_WORKFLOW, hero: () => BenchHero })
export class BenchPaymentWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async a() {}

  @Step({ waitFor: PAYMENT_SIGNAL })
  async b() {
    probe.paymentBodies.arrive(this.record.id, performance.now());
  }
}

/** The shape with a concurrency key per workflow (its hero's, limit 1): a key nobody else holds or waits for. */
@Workflow({ name: KEYED_PAYMENT_WORKFLOW, hero: () => BenchHero, concurrency: { key: (wf: BenchKeyedPaymentWorkflow) => `pay:${wf.hero.id}`, limit: 1 } })
export class BenchKeyedPaymentWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async a() {}

  @Step({ waitFor: PAYMENT_SIGNAL })
  async b() {
    probe.paymentBodies.arrive(this.record.id, performance.now());
  }
}

/** One step holding one of SLOT_KEYS keys (limit 1): each end hands its key to the next waiter. */
@Workflow({ name: SLOT_WORKFLOW, hero: () => BenchHero })
export class BenchSlotWorkflow extends GenevaWorkflow<BenchHero> {
  @Step({ concurrency: { key: (wf: BenchSlotWorkflow) => slotKey(wf.hero), limit: 1 } })
  async hold() {
    const began = performance.now();
    await new Promise((resolve) => setImmediate(resolve));
    probe.slotBodies.push({ workflowId: this.record.id, key: slotKey(this.hero), began, ended: performance.now() });
  }
}

function slotKey(hero: BenchHero): string {
  return `slot:${Math.floor(hero.id / probe.slotBlock) % SLOT_KEYS}`;
}

/** BenchPaymentWorkflow with a 30-day deadline on its wait: a delayed job (or a timer) per parked step, nothing polled. */
@Workflow({ name: DEADLINE_PAYMENT_WORKFLOW, hero: () => BenchHero })
export class BenchDeadlinePaymentWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async a() {}

  @Step({ waitFor: PAYMENT_SIGNAL, timeout: '30d' })
  async b() {
    probe.paymentBodies.arrive(this.record.id, performance.now());
  }
}

/**
 * Published by the ledger shapes' `b` as its body begins (an ExecutionEvent's fields), so that the
 * statement count by phase tells the body's statements from those the engine issues around it.
 */
export const BENCH_BODY_CHANNEL = 'geneva-drive-bench:body';
const bodyChannel = channel(BENCH_BODY_CHANNEL);

function bodyBegins(wf: GenevaWorkflow<BenchHero>, workflowClass: string): void {
  if (bodyChannel.hasSubscribers) bodyChannel.publish({ workflowClass, workflowId: wf.record.id, executionId: wf.currentExecution.id, stepName: wf.currentExecution.stepName });
}

/**
 * The shape with a real write: `b`, transactional, inserts one row through its transaction
 * (`this.manager`), which commits with the step's completion.
 */
@Workflow({ name: LEDGER_PAYMENT_WORKFLOW, hero: () => BenchHero })
export class BenchLedgerPaymentWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async a() {}

  @Step({ waitFor: PAYMENT_SIGNAL, transactional: true })
  async b() {
    bodyBegins(this, LEDGER_PAYMENT_WORKFLOW);
    await this.manager.insert(BenchEffect, { workflowId: this.record.id, step: 'b' });
  }
}

/** The same write from a plain `b`, through the DataSource: the row commits on its own, before the step's outcome. */
@Workflow({ name: PLAIN_LEDGER_PAYMENT_WORKFLOW, hero: () => BenchHero })
export class BenchPlainLedgerPaymentWorkflow extends GenevaWorkflow<BenchHero> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async a() {}

  @Step({ waitFor: PAYMENT_SIGNAL })
  async b() {
    bodyBegins(this, PLAIN_LEDGER_PAYMENT_WORKFLOW);
    await this.dataSource.manager.insert(BenchEffect, { workflowId: this.record.id, step: 'b' });
  }
}

/** Two no-op steps, `a` → `b`: started by start() (independent), or by BenchFanOutWorkflow as its children. */
@Workflow({ name: CHILD_WORKFLOW, hero: () => BenchHero })
export class BenchChildWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async a() {}

  @Step()
  async b() {}
}

/**
 * One step starts a BenchChildWorkflow per hero of `probe.childHeroes` (each its own hero: one
 * ongoing workflow per hero and class), the next parks until all of them have ended.
 */
@Workflow({ name: FAN_OUT_WORKFLOW, hero: () => BenchHero })
export class BenchFanOutWorkflow extends GenevaWorkflow<BenchHero> {
  @Step()
  async fanOut() {
    for (const hero of probe.childHeroes.get(this.hero.id) ?? []) this.startChild(BenchChildWorkflow, hero, { key: hero.id });
  }

  @Step({ waitFor: childrenOf('fanOut') })
  async fanIn() {
    const children = this.children;
    probe.fanIn.arrive(this.record.id, {
      children: children.length,
      finished: children.filter((child) => child.state === 'finished').length,
      keys: new Set(children.map((child) => child.key)).size,
    });
  }
}

/** A workflow class of the shape (a → b waiting for `payment_confirmed`), its stored type name, and whether `b` writes a row. */
export interface PaymentShape {
  workflowClass: typeof BenchPaymentWorkflow | typeof BenchDeadlinePaymentWorkflow | typeof BenchLedgerPaymentWorkflow | typeof BenchPlainLedgerPaymentWorkflow | typeof BenchKeyedPaymentWorkflow;
  name: string;
  writesEffect: boolean;
}

export const PAYMENT_SHAPE: PaymentShape = { workflowClass: BenchPaymentWorkflow, name: PAYMENT_WORKFLOW, writesEffect: false };
/** Parked for the idle window only: never signaled, never checked. */
export const DEADLINE_SHAPE: PaymentShape = { workflowClass: BenchDeadlinePaymentWorkflow, name: DEADLINE_PAYMENT_WORKFLOW, writesEffect: false };
export const LEDGER_SHAPE: PaymentShape = { workflowClass: BenchLedgerPaymentWorkflow, name: LEDGER_PAYMENT_WORKFLOW, writesEffect: true };
export const KEYED_SHAPE: PaymentShape = { workflowClass: BenchKeyedPaymentWorkflow, name: KEYED_PAYMENT_WORKFLOW, writesEffect: false };
export const PLAIN_LEDGER_SHAPE: PaymentShape = { workflowClass: BenchPlainLedgerPaymentWorkflow, name: PLAIN_LEDGER_PAYMENT_WORKFLOW, writesEffect: true };

// ------------------------------------------------------------------ logging

/** Engine log lines are dropped (they would dominate the timings); errors and warnings are kept for the report. */
export class BenchLogger implements LoggerService {
  readonly errors: string[] = [];
  readonly warnings: string[] = [];
  log(): void {}
  debug(): void {}
  verbose(): void {}
  warn(message: unknown): void {
    this.warnings.push(String(message));
  }
  error(message: unknown, trace?: unknown): void {
    this.errors.push(`${String(message)}${trace ? `\n${String(trace)}` : ''}`);
  }
}

/**
 * A TypeORM logger that records the statements issued while `recording` is set, and tells `observer`
 * of each one, in the issuing call's async context (and does nothing else).
 */
export class QueryRecorder implements TypeOrmLogger {
  recording: Array<{ query: string; parameters: unknown[] }> | null = null;
  observer: ((query: string) => void) | undefined;
  logQuery(query: string, parameters?: unknown): void {
    this.recording?.push({ query, parameters: Array.isArray(parameters) ? parameters : [] });
    this.observer?.(query);
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

// ------------------------------------------------------------------ module

export interface BenchAppConfig {
  database: TypeOrmModuleOptions;
  queue: QueueAdapterOptions;
  logger: BenchLogger;
}

@Module({})
export class BenchModule {
  static register(config: BenchAppConfig): DynamicModule {
    return {
      module: BenchModule,
      imports: [
        TypeOrmModule.forRoot({
          ...config.database,
          entities: [BenchHero, BenchEffect, ...GENEVA_DRIVE_ENTITIES],
          migrations: [CreateBenchHeroes1600000000000, CreateBenchEffects1600000000001, ...GENEVA_DRIVE_MIGRATIONS],
          migrationsRun: true,
          synchronize: false,
        } as TypeOrmModuleOptions),
        TypeOrmModule.forFeature([BenchHero]),
        // No housekeeping: nothing but the measured work runs.
        GenevaDriveModule.forRoot({ queue: config.queue, housekeeping: false, logger: config.logger }),
      ],
      providers: [BenchStepsWorkflow, BenchSignalWorkflow, BenchPaymentWorkflow, BenchDeadlinePaymentWorkflow, BenchLedgerPaymentWorkflow, BenchPlainLedgerPaymentWorkflow, BenchKeyedPaymentWorkflow, BenchSlotWorkflow, BenchChildWorkflow, BenchFanOutWorkflow],
    };
  }
}
