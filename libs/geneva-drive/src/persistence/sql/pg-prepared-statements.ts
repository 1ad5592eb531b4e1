import { isStaleStatement } from '../stale-statement.js';

/** The prefix of the names the engine gives its statements. */
export const STATEMENT_PREFIX = 'geneva_drive_';

/** What the pg driver's client is asked here (pg is an optional peer). */
export interface PgClient {
  query(config: string | { name?: string; text: string; values?: unknown[] }): Promise<{ command: string; rows: unknown[]; rowCount: number | null }>;
  /** node-postgres sends a named statement's Parse only when its name is not in `parsedStatements`. */
  connection: { parsedStatements: Record<string, string> };
  /** The session's transaction status as the server last reported it: 'I' idle, 'T' in one, 'E' in a failed one. */
  getTransactionStatus?(): string | null;
}

/**
 * Runs named prepared statements on pg clients and prepares them afresh when the server refuses
 * one as stale (see isStaleStatement). A migration makes many statements stale at once, on every
 * connection: after one is refused, each client drops all the statements it prepared before
 * (DEALLOCATE, then forgets them) before its next one, so a transaction retried on another
 * connection of the pool does not meet the same error there.
 */
export class PgPreparedStatements {
  /** Bumped when a statement is refused as stale; a client prepared its statements in the one recorded for it. */
  private generation = 0;
  private readonly generations = new WeakMap<PgClient, number>();

  /**
   * Runs the statement `name`. A stale one is thrown (in a transaction, which the error aborted:
   * the engine runs its own again, see TransactionRunner) or, with `rerun`, prepared and run again
   * at once (the statement runs by itself, in no transaction).
   */
  async run(client: PgClient, name: string, text: string, values: unknown[], rerun: boolean): Promise<{ command: string; rows: unknown[]; rowCount: number | null }> {
    for (;;) {
      const prepared = await this.refresh(client);
      try {
        return await client.query({ name, text, values });
      } catch (error) {
        if (!isStaleStatement(error)) throw error;
        this.generation = Math.max(this.generation, prepared + 1);
        if (!rerun) throw error;
        rerun = false;
      }
    }
  }

  /** After the client's message of EXECUTEs was refused as stale: every client drops its statements before its next one. */
  refused(client: PgClient): void {
    this.generation = Math.max(this.generation, (this.generations.get(client) ?? 0) + 1);
  }

  /** Whether the statement `name` is prepared on the client (its stale statements dropped first, as before a run). */
  async has(client: PgClient, name: string): Promise<boolean> {
    await this.refresh(client);
    return name in client.connection.parsedStatements;
  }

  /** Records a statement the engine prepared by a PREPARE of its own (SQL, not the protocol's Parse), to be dropped with the others. */
  record(client: PgClient, name: string, text: string): void {
    client.connection.parsedStatements[name] = text;
  }

  /**
   * Drops `name` from the session after a message that may have prepared it failed with `error` (a
   * PREPARE outlives its transaction's rollback); a stale one makes every client drop its statements.
   */
  async drop(client: PgClient, name: string, error: unknown): Promise<void> {
    if (isStaleStatement(error)) this.generation = Math.max(this.generation, (this.generations.get(client) ?? 0) + 1);
    delete client.connection.parsedStatements[name];
    await client.query(`DEALLOCATE ${name}`).catch(() => undefined);
  }

  /**
   * Drops the client's statements when they are older than the last stale one, and returns the
   * generation its statements now belong to. DEALLOCATE first: a name Parsed again while the server
   * still has it fails (42P05), and a stale statement cannot be dropped in the transaction it
   * aborted, so it is done here, before the client's next statement.
   */
  private async refresh(client: PgClient): Promise<number> {
    const generation = this.generation;
    if (this.generations.get(client) === generation) return generation;
    const parsed = client.connection.parsedStatements;
    const names = Object.keys(parsed).filter((name) => name.startsWith(STATEMENT_PREFIX));
    if (names.length > 0) {
      // Those the session still has (none after a DISCARD ALL): DEALLOCATE of a missing one fails.
      const { rows } = await client.query({ text: 'SELECT name FROM pg_prepared_statements WHERE name = ANY($1)', values: [names] });
      const present = (rows as Array<{ name: string }>).map(({ name }) => `DEALLOCATE "${name.replaceAll('"', '""')}"`);
      if (present.length > 0) await client.query(present.join('; '));
      for (const name of names) delete parsed[name];
    }
    this.generations.set(client, generation);
    return generation;
  }
}
