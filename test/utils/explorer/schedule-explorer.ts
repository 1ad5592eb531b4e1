/**
 * The schedule explorer: runs two or three engine operations concurrently while deciding, statement
 * by statement, which of them moves next — every interleaving in turn (depth first), or a seeded
 * random sample where they are too many — and can kill a connection at a statement boundary.
 *
 * Each operation runs in an AsyncLocalStorage context of its own; every statement it sends on the
 * engine's DataSource (through TypeORM or the hot path's prepared statements alike) is caught before
 * it reaches the driver and parked there. When no operation is running (each is parked at its next
 * statement, finished, or waiting in the database for a lock another one holds), the schedule picks
 * one parked statement and lets it go. A statement that waits for a lock is seen in the server's
 * own view of its sessions (pg_stat_activity, INNODB_TRX), never guessed from time. So a schedule is a
 * list of choices, which replays the same run, and a run's verdict never depends on the machine's speed.
 *
 * Statements sent outside an operation (set-up, the invariant checks, draining the queue) run freely,
 * and so do an operation's that touch no row and wait for no lock (outsideTheSchedule).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DataSource } from 'typeorm';
import { explorerDialect, type Connection, type ExplorerDialect, type Proceed } from './connections.js';

/**
 * A connection fault at a statement boundary. `kill`: the statement runs and its answer arrives, then
 * the session is killed (what the operation sends next on it fails: the kill came between two
 * statements). `lose-answer`: the statement runs, then the session is killed before its answer arrives
 * (for a COMMIT: committed, and the client cannot know it).
 */
export type Fault = 'kill' | 'lose-answer';

/** One choice of a schedule: which operation's parked statement goes next, and the fault it meets. */
export interface Choice {
  op: string;
  fault?: Fault;
}

/** An operation to interleave: a name (used in schedules) and the engine call(s) it makes. */
export interface Operation {
  name: string;
  run(): Promise<unknown>;
}

/** How an operation ended. */
export interface Outcome {
  value?: unknown;
  error?: unknown;
}

/** One statement as it went in a run. */
export interface TraceLine {
  op: string;
  sql: string;
  fault?: Fault;
  /** The statement waited in the database for a lock (released later by another operation). */
  blocked?: boolean;
}

/** What one run did: the statements in the order they went, and how each operation ended. */
export interface Run {
  choices: Choice[];
  trace: TraceLine[];
  outcomes: Record<string, Outcome>;
}

type Status = 'running' | 'parked' | 'blocked' | 'idle' | 'done';

interface OpState {
  name: string;
  status: Status;
  parked?: { connection: Connection; sql: string; go(choice: Choice | 'abort'): void };
  /** The session of the statement in flight, if any, and since when. */
  inflight?: number;
  inflightSince: number;
  line?: TraceLine;
  /** The statement count (ScheduleExplorer.completed) when the server last said this one waits for a lock. */
  blockedAt?: number;
}

/** Chooses the next statement: given the parked operations (sorted) and whether a fault may still be injected. */
export type Chooser = (parked: Array<{ op: string; sql: string; mayLoseAnswer: boolean }>, faultsLeft: number) => Choice;

const TICK_MS = 2;
/** How long a statement may be in flight before the server is asked whether it waits for a lock. */
const ASK_AFTER_MS = 10;
/** How long the schedule waits for a running operation before it reports the harness stuck. */
const STALL_MS = 120_000;

export class ScheduleExplorer {
  private readonly storage = new AsyncLocalStorage<OpState>();
  private ops: OpState[] = [];
  private trace: TraceLine[] = [];
  private readonly waiters = new Set<() => void>();
  /** A statement that arrived under an operation already parked at one (see catch). */
  private stray: string | undefined;
  /** Sessions with a transaction open (BEGIN seen, no COMMIT or ROLLBACK yet). */
  private readonly inTransaction = new Set<number>();
  /**
   * Statements of operations that have answered. A lock wait seen before the last answer may have
   * ended with it (the answer of the COMMIT that released the lock): it is asked about again.
   */
  private completed = 0;
  /** The run failed: every statement goes straight through, so that open transactions end. */
  private aborted = false;

  private constructor(private readonly dialect: ExplorerDialect) {}

  /** Installs the explorer on the engine's DataSource (PostgreSQL or MySQL/MariaDB). */
  static async attach(dataSource: DataSource): Promise<ScheduleExplorer> {
    const explorer = new ScheduleExplorer(await explorerDialect(dataSource));
    explorer.dialect.install(dataSource, (connection, sql, proceed) => explorer.catch(connection, sql, proceed));
    return explorer;
  }

  get kind(): 'postgres' | 'mysql' {
    return this.dialect.kind;
  }

  async close(): Promise<void> {
    await this.dialect.close();
  }

  /**
   * Inside an operation: waits for `promise` without counting as running (a job that waits for the
   * queue to hand it over, say). The schedule goes on with the others meanwhile.
   */
  async idle<T>(promise: Promise<T>): Promise<T> {
    const op = this.storage.getStore();
    if (!op) return promise;
    op.status = 'idle';
    try {
      return await promise;
    } finally {
      op.status = 'running';
      this.changed();
    }
  }

  /**
   * Runs the operations under the schedule `choose` makes, with at most `faults` connection faults,
   * and returns what happened. Throws when no operation can move and some have not ended.
   */
  async run(operations: Operation[], choose: Chooser, faults = 0): Promise<Run> {
    this.trace = [];
    this.stray = undefined;
    this.aborted = false;
    this.inTransaction.clear();
    const choices: Choice[] = [];
    const outcomes: Record<string, Outcome> = {};
    this.ops = operations.map((operation) => ({ name: operation.name, status: 'running' as Status, inflightSince: 0 }));
    const settled = operations.map((operation, index) =>
      this.storage.run(this.ops[index], async () => {
        try {
          outcomes[operation.name] = { value: await operation.run() };
        } catch (error) {
          outcomes[operation.name] = { error };
        } finally {
          this.ops[index].status = 'done';
          this.changed();
        }
      }),
    );
    try {
      await this.follow(choices, choose, faults);
    } catch (error) {
      await this.abort(settled);
      throw error;
    }
    await Promise.all(settled);
    return { choices, trace: this.trace, outcomes };
  }

  /** Makes choices until every operation has ended. */
  private async follow(choices: Choice[], choose: Chooser, faults: number): Promise<void> {
    let faultsLeft = faults;
    let blockedSince: number | undefined;
    for (;;) {
      await this.quiescent();
      if (this.stray) throw new Error(`The schedule explorer lost track of an operation (${this.stray})\n${formatTrace(this.trace)}`);
      const parked = this.ops.filter((op) => op.status === 'parked');
      if (parked.length === 0) {
        if (this.ops.every((op) => op.status === 'done')) break;
        if (this.ops.some((op) => op.status === 'blocked')) {
          // Only lock waits on one another: the database's deadlock detection ends one of them.
          blockedSince ??= performance.now();
          if (performance.now() - blockedSince > STALL_MS) throw new Error(`Every operation has waited for a lock for ${STALL_MS / 1000} s: ${this.ops.map((op) => `${op.name} ${op.status}`).join(', ')}\n${formatTrace(this.trace)}`);
          await this.nextChange(50);
          continue;
        }
        throw new Error(`No operation can move: ${this.ops.map((op) => `${op.name} ${op.status}`).join(', ')}\n${formatTrace(this.trace)}`);
      }
      blockedSince = undefined;
      const options = parked
        .map((op) => ({ op: op.name, sql: op.parked!.sql, mayLoseAnswer: this.mayLoseAnswer(op.parked!.connection.pid, op.parked!.sql) }))
        .sort((a, b) => a.op.localeCompare(b.op));
      const choice = choose(options, faultsLeft);
      const op = parked.find((candidate) => candidate.name === choice.op);
      if (!op) throw new Error(`The schedule chose ${choice.op}, which is not waiting at a statement (${options.map((o) => o.op).join(', ')} are)`);
      if (choice.fault) faultsLeft--;
      choices.push(choice);
      const go = op.parked!.go;
      op.parked = undefined;
      op.status = 'running';
      go(choice);
    }
  }

  /**
   * After a failed run: the parked statements fail, and every later one runs unscheduled, so that
   * the operations end and roll back their transactions instead of holding their locks for good.
   */
  private async abort(settled: Array<Promise<void>>): Promise<void> {
    this.aborted = true;
    for (const op of this.ops) {
      const parked = op.parked;
      op.parked = undefined;
      parked?.go('abort');
    }
    await Promise.race([Promise.allSettled(settled), new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  }

  /** A COMMIT (alone, or in a message of several statements), or a statement outside a transaction (it commits by itself). */
  private mayLoseAnswer(pid: number, sql: string): boolean {
    return sql.split(';').some((statement) => controlOf(statement) === 'COMMIT') || !this.inTransaction.has(pid);
  }

  /** The catcher installed on every connection: statements of an operation wait for the schedule. */
  private async catch(connection: Connection, sql: string, proceed: Proceed): Promise<unknown[]> {
    const op = this.storage.getStore();
    if (!op || op.status === 'done' || !this.ops.includes(op) || this.aborted || outsideTheSchedule(sql)) return proceed();
    if (op.parked) {
      // One operation sends one statement at a time. A second one under its name came from work that
      // carried its async context away (a pooled connection handed to a waiter): fail loudly rather
      // than lose the parked one, whose transaction would then stay open for good.
      this.stray = `a second statement under ${op.name} while one is parked: ${sql.slice(0, 120)}`;
      this.changed();
      throw new Error(`The schedule explorer lost track of ${op.name}: ${this.stray}`);
    }
    const choice = await new Promise<Choice | 'abort'>((go) => {
      op.parked = { connection, sql, go };
      op.status = 'parked';
      this.changed();
    });
    if (choice === 'abort') throw new Error('The schedule explorer stopped this run');
    const pid = connection.pid;
    const line: TraceLine = { op: op.name, sql, ...(choice.fault ? { fault: choice.fault } : {}) };
    this.trace.push(line);
    op.inflight = pid;
    op.inflightSince = performance.now();
    op.line = line;
    try {
      if (choice.fault === 'lose-answer') {
        await proceed().catch(() => undefined);
        await this.killSession(connection);
        throw this.dialect.lostConnectionError();
      }
      const results = await proceed();
      this.track(pid, sql);
      if (choice.fault === 'kill') await this.killSession(connection);
      return results;
    } finally {
      op.inflight = undefined;
      op.line = undefined;
      if (op.status === 'blocked') op.status = 'running';
      this.completed++;
      this.changed();
    }
  }

  private async killSession(connection: Connection): Promise<void> {
    this.inTransaction.delete(connection.pid);
    await this.dialect.kill(connection.pid);
    await connection.closed();
  }

  /** The session's transaction as the statement leaves it: for a message of several, as its last that begins or ends one does. */
  private track(pid: number, sql: string): void {
    const last = sql.split(';').map(controlOf).filter((control) => control !== undefined).at(-1);
    if (last === undefined) return;
    if (last === 'BEGIN') this.inTransaction.add(pid);
    else this.inTransaction.delete(pid);
  }

  /** Waits until no operation is running: each is parked, idle, done, or waiting for a lock. */
  private async quiescent(): Promise<void> {
    const since = performance.now();
    for (;;) {
      // A lock wait seen before the latest answer is confirmed again: that answer may have released it.
      for (const op of this.ops) if (op.status === 'blocked' && op.blockedAt !== this.completed) op.status = 'running';
      const running = this.ops.filter((op) => op.status === 'running');
      if (running.length === 0) return;
      // Not a verdict on speed: a harness that cannot tell what an operation waits for says so
      // instead of hanging (an operation waiting for a pool connection, a wait the server does not
      // report as a lock).
      if (performance.now() - since > STALL_MS) {
        throw new Error(`No operation moved for ${STALL_MS / 1000} s: ${this.ops.map((op) => `${op.name} ${op.status}${op.inflight ? ` (session ${op.inflight} in flight)` : ''}`).join(', ')}\n${formatTrace(this.trace)}`);
      }
      for (const op of running) {
        const pid = op.inflight;
        // Most statements answer at once: the server is asked only about one still in flight a moment later.
        if (pid === undefined || performance.now() - op.inflightSince < ASK_AFTER_MS) continue;
        const asked = this.completed;
        if ((await this.dialect.waitsForLock(pid)) && op.inflight === pid && op.status === 'running') {
          op.status = 'blocked';
          op.blockedAt = asked;
          if (op.line) op.line.blocked = true;
        }
      }
      if (this.ops.some((op) => op.status === 'running')) await this.nextChange(TICK_MS);
    }
  }

  private nextChange(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter = () => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      const timer = setTimeout(waiter, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  private changed(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}

// ------------------------------------------------------------------ schedules

/** A schedule as text: `A B B A!kill B!lose-answer` — the operation of each choice, `!` its fault. */
export function formatChoices(choices: Choice[]): string {
  return choices.map((choice) => (choice.fault ? `${choice.op}!${choice.fault}` : choice.op)).join(' ');
}

export function parseChoices(text: string): Choice[] {
  return text
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map((word) => {
      const [op, fault] = word.split('!');
      return fault ? { op, fault: fault as Fault } : { op };
    });
}

/** The run's statements in order, one line each, the operation first; and then per operation. */
export function formatTrace(trace: TraceLine[]): string {
  const short = (sql: string) => sql.replace(/\s+/g, ' ').slice(0, 160);
  const mark = (line: TraceLine) => `${line.fault ? ` [${line.fault}]` : ''}${line.blocked ? ' [waited for a lock]' : ''}`;
  const lines = trace.map((line, index) => `  ${String(index + 1).padStart(3)}. ${line.op}: ${short(line.sql)}${mark(line)}`);
  const byOp = new Map<string, string[]>();
  trace.forEach((line, index) => byOp.set(line.op, [...(byOp.get(line.op) ?? []), `    ${index + 1}. ${short(line.sql)}${mark(line)}`]));
  const perOp = [...byOp].map(([op, statements]) => `  ${op}:\n${statements.join('\n')}`);
  return `statements in the order they went:\n${lines.join('\n')}\nper operation:\n${perOp.join('\n')}`;
}

/** A small seeded PRNG (mulberry32): the same seed gives the same schedule. */
export function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Statements that read or write no row of the engine's tables and wait for no lock: ids taken from a
 * sequence ahead of the inserts that use them (PgSignalIds, a block at a time), the catalog read
 * once per process, and a statement prepared before the first message of a session that runs it.
 * Whether a run sends one depends on what earlier runs in the process left (the pool of ids, the
 * cache, the session's statements), not on its schedule: scheduled, they would make a replayed
 * schedule differ.
 */
function outsideTheSchedule(sql: string): boolean {
  return /^SELECT nextval\(pg_get_serial_sequence\(/.test(sql) || /\bFROM pg_attribute\b/.test(sql) || preparedAlone(sql);
}

/** A PREPARE sent alone, not a message that also runs what it prepares (a transactional step's end). */
function preparedAlone(sql: string): boolean {
  const name = /^PREPARE (geneva_drive_\w+) AS /.exec(sql)?.[1];
  return name !== undefined && !sql.includes(`; EXECUTE ${name}(`);
}

/** The options of one choice point, faults included while some are left. */
function optionsAt(parked: Parameters<Chooser>[0], faultsLeft: number): Choice[] {
  const options: Choice[] = [];
  for (const { op, mayLoseAnswer } of parked) {
    options.push({ op });
    if (faultsLeft > 0) {
      options.push({ op, fault: 'kill' });
      if (mayLoseAnswer) options.push({ op, fault: 'lose-answer' });
    }
  }
  return options;
}

/** Follows `choices`, then picks at random with `seed` (a replay of a printed schedule passes both). */
export function seededChooser(seed: number, choices: Choice[] = [], faultRate = 0.1): Chooser {
  const next = random(seed);
  let index = 0;
  return (parked, faultsLeft) => {
    if (index < choices.length) return choices[index++];
    index++;
    const { op, mayLoseAnswer } = parked[Math.floor(next() * parked.length)];
    if (faultsLeft > 0 && next() < faultRate) return { op, fault: mayLoseAnswer && next() < 0.5 ? 'lose-answer' : 'kill' };
    return { op };
  };
}

/**
 * Depth-first enumeration of every schedule: `chooser()` gives the chooser of the next run, `done`
 * tells when all were run. Each run follows the recorded prefix, then takes the first option at
 * each new choice point; afterwards the deepest choice point with an option left moves on.
 */
export class DepthFirst {
  private path: Array<{ index: number; count: number }> = [];
  private started = false;

  get done(): boolean {
    return this.started && this.path.length === 0;
  }

  chooser(): Chooser {
    this.started = true;
    let depth = 0;
    return (parked, faultsLeft) => {
      const options = optionsAt(parked, faultsLeft);
      if (depth >= this.path.length) this.path.push({ index: 0, count: options.length });
      const point = this.path[depth++];
      if (point.count !== options.length) throw new Error(`A replayed schedule met ${options.length} options where it had met ${point.count} (at choice ${depth}: ${parked.map((p) => `${p.op}: ${p.sql.slice(0, 100)}`).join(" | ")}): the run is not deterministic`);
      return options[point.index];
    };
  }

  /** After a run: the next schedule to try (false when every one was tried). */
  advance(): boolean {
    while (this.path.length > 0) {
      const last = this.path[this.path.length - 1];
      if (last.index + 1 < last.count) {
        last.index++;
        return true;
      }
      this.path.pop();
    }
    return false;
  }
}

/**
 * One phase of a scripted schedule: `op` goes on (statement after statement) until its next statement
 * matches `until` (not run), or until it has run a statement matching `through` (which meets
 * `fault`), or until it cannot move (done, or waiting for a lock).
 */
export interface Phase {
  op: string;
  until?: RegExp;
  through?: RegExp;
  fault?: Fault;
}

/**
 * A schedule written as phases (see Phase), for a test that pins one interleaving down; when the
 * phases are over, the first parked operation (by name) goes on each time.
 */
export function scriptedChooser(...phases: Phase[]): Chooser {
  let index = 0;
  return (parked) => {
    while (index < phases.length) {
      const phase = phases[index];
      const mine = parked.find((candidate) => candidate.op === phase.op);
      if (!mine || phase.until?.test(mine.sql)) {
        index++;
        continue;
      }
      if (phase.through?.test(mine.sql)) {
        index++;
        return phase.fault ? { op: phase.op, fault: phase.fault } : { op: phase.op };
      }
      return { op: phase.op };
    }
    return { op: parked[0].op };
  };
}

/**
 * Whether a statement begins or ends a transaction. MariaDB's transactional steps begin theirs by
 * turning autocommit off and commit it by turning it back on (HotPathSql.sessionBounds).
 */
function controlOf(statement: string): 'BEGIN' | 'COMMIT' | 'ROLLBACK' | undefined {
  const control = /^\s*(BEGIN|START TRANSACTION|COMMIT|ROLLBACK)\s*$/i.exec(statement)?.[1]?.toUpperCase();
  if (control !== undefined) return control === 'ROLLBACK' ? 'ROLLBACK' : control === 'COMMIT' ? 'COMMIT' : 'BEGIN';
  const autocommit = /^\s*SET SESSION autocommit = ([01])\b/i.exec(statement)?.[1];
  return autocommit === undefined ? undefined : autocommit === '0' ? 'BEGIN' : 'COMMIT';
}
