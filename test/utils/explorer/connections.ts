/**
 * The database side of the schedule explorer: how statements are caught on the engine's pooled
 * connections (node-postgres clients, mysql2 connections), how a connection is killed as an operator
 * would kill it (`pg_terminate_backend`, `KILL CONNECTION`), and how to tell a statement waiting for a
 * row lock from one that is merely running.
 */
import { DataSource, type DataSourceOptions } from 'typeorm';

/** A driver connection as the explorer sees it. */
export interface Connection {
  /** The server's id of the session (PostgreSQL backend pid, MySQL thread id). */
  readonly pid: number;
  /** Resolves once the socket is closed (after a kill). */
  closed(): Promise<void>;
}

/** Runs a caught statement on the driver: resolves with the arguments its callback would get after the error. */
export type Proceed = () => Promise<unknown[]>;

/** What the explorer does with a statement caught on an engine connection. */
export type Catcher = (connection: Connection, sql: string, proceed: Proceed) => Promise<unknown[]>;

/** The dialect-specific parts: catching statements, killing a session, seeing a lock wait. */
export interface ExplorerDialect {
  readonly kind: 'postgres' | 'mysql';
  /** Installs `catcher` on every connection of the DataSource's pool, present and future. */
  install(dataSource: DataSource, catcher: Catcher): void;
  /** Kills the session `pid`, from a connection of the explorer's own. */
  kill(pid: number): Promise<void>;
  /** Whether the session `pid` is waiting for a lock held by another transaction. */
  waitsForLock(pid: number): Promise<boolean>;
  /** The error a driver gives when the connection dies with a statement in flight. */
  lostConnectionError(): Error;
  close(): Promise<void>;
}

const PATCHED = Symbol('explorer-patched');

type Patched = Record<string | symbol, any>;

/**
 * Wraps `target[method]` so that calls go through `catcher`; callback- and promise-style calls alike.
 * `view` is how the catcher is shown the statement's text.
 */
function wrap(target: Patched, method: string, connection: Connection, catcher: Catcher, callbackStyle: boolean, view: (sql: string) => string = (sql) => sql): void {
  const original = target[method] as (...args: unknown[]) => unknown;
  target[method] = function (this: unknown, ...args: unknown[]) {
    const callback = typeof args[args.length - 1] === 'function' ? (args.pop() as (...results: unknown[]) => void) : undefined;
    const first = args[0] as string | { text?: string; sql?: string };
    const sql = view(typeof first === 'string' ? first : (first?.text ?? first?.sql ?? String(first)));
    const proceed: Proceed = () =>
      callbackStyle
        ? new Promise((resolve, reject) => original.call(this, ...args, (error: unknown, ...results: unknown[]) => (error ? reject(error) : resolve(results))))
        : (original.apply(this, args) as Promise<unknown>).then((result) => [result]);
    const outcome = catcher(connection, sql, proceed);
    if (callback) {
      outcome.then(
        (results) => callback(null, ...results),
        (error) => callback(error),
      );
      return undefined;
    }
    return outcome.then((results) => results[0]);
  };
}

/**
 * A message's `EXECUTE name(values)` of the engine's prepared statements shown as the statements they
 * run, so that the explorer's schedules and traces name what a message does (the values apart),
 * whether its statements go by name or by text.
 */
function withPreparedText(sql: string, prepared: Record<string, string>): string {
  return sql.replace(/EXECUTE (geneva_drive_\w+)\((?:[^()']|'(?:[^']|'')*')*\)/g, (execute, name: string) => prepared[name] ?? execute);
}

function socketClosed(stream: { destroyed?: boolean; once(event: string, listener: () => void): void } | undefined): Promise<void> {
  if (!stream || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => stream.once('close', () => resolve()));
}

export async function explorerDialect(dataSource: DataSource): Promise<ExplorerDialect> {
  const type = dataSource.options.type;
  if (type === 'postgres') return postgresDialect(dataSource);
  if (type === 'mysql' || type === 'mariadb') return mysqlDialect(dataSource);
  throw new Error(`The schedule explorer interleaves transactions of several connections: ${type} has one writer per process`);
}

/** A connection of the explorer's own, on the same database, that nothing catches. */
function adminOf(dataSource: DataSource): Promise<DataSource> {
  return new DataSource({ ...dataSource.options, entities: [], migrations: [], subscribers: [], poolSize: 2 } as DataSourceOptions).initialize();
}

async function postgresDialect(dataSource: DataSource): Promise<ExplorerDialect> {
  const admin = await adminOf(dataSource);
  return {
    kind: 'postgres',
    install(source, catcher) {
      const pool = (source.driver as unknown as { master: Patched }).master;
      const patch = (client: Patched) => {
        if (client[PATCHED]) return;
        client[PATCHED] = true;
        const connection: Connection = { get pid() { return client.processID as number; }, closed: () => socketClosed(client.connection?.stream) };
        wrap(client, 'query', connection, catcher, false, (sql) => withPreparedText(sql, client.connection?.parsedStatements ?? {}));
      };
      for (const client of pool._clients as Patched[]) patch(client);
      pool.on('connect', patch);
    },
    async kill(pid) {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
    },
    async waitsForLock(pid) {
      // The lock table, not the session's wait event: a COMMIT grants the waiter its lock before the
      // waiter wakes up and clears its wait event, so only the first is true the moment the COMMIT answers.
      const rows: Array<{ waiting: boolean }> = await admin.query('SELECT cardinality(pg_blocking_pids($1)) > 0 AS waiting', [pid]);
      return rows[0]?.waiting === true;
    },
    lostConnectionError: () => new Error('Connection terminated unexpectedly'),
    close: () => admin.destroy(),
  };
}

/** How long InnoDB keeps its copy of INNODB_TRX (TRX_I_S_CACHE_MIN_REFRESH_TIME, 100 ms), and a margin. */
const TRX_CACHE_MS = 110;

async function mysqlDialect(dataSource: DataSource): Promise<ExplorerDialect> {
  const admin = await adminOf(dataSource);
  return {
    kind: 'mysql',
    install(source, catcher) {
      const pool = (source.driver as unknown as { pool: Patched }).pool;
      const patch = (connection: Patched) => {
        if (connection[PATCHED]) return;
        connection[PATCHED] = true;
        const caught: Connection = { get pid() { return connection.threadId as number; }, closed: () => socketClosed(connection.stream) };
        wrap(connection, 'query', caught, catcher, true);
        wrap(connection, 'execute', caught, catcher, true);
      };
      const all = pool._allConnections as { length: number; get(index: number): Patched };
      for (let index = 0; index < all.length; index++) patch(all.get(index));
      pool.on('connection', patch);
    },
    async kill(pid) {
      await admin.query(`KILL CONNECTION ${Number(pid)}`);
    },
    async waitsForLock(pid) {
      // InnoDB refreshes its INFORMATION_SCHEMA transaction tables only when nobody has read them for
      // 100 ms: explorers in several processes polling at once would read one stale copy for ever.
      // Every read, from any process, waits its turn under a named lock and 110 ms more.
      const runner = admin.createQueryRunner();
      await runner.connect();
      try {
        await runner.query(`SELECT GET_LOCK('geneva_drive_explorer_trx', 600)`);
        try {
          await runner.query(`SELECT SLEEP(${TRX_CACHE_MS / 1000})`);
          // Read whole and matched here: the id comes back as a string (TypeORM's bigNumberStrings).
          // The lock requested, not the state: the granting COMMIT clears the first, the waiter the second once awake.
          const rows: Array<{ trx_mysql_thread_id: string | number; trx_requested_lock_id: string | null }> = await runner.query(
            'SELECT trx_mysql_thread_id, trx_requested_lock_id FROM information_schema.INNODB_TRX',
          );
          return rows.some((row) => Number(row.trx_mysql_thread_id) === pid && row.trx_requested_lock_id !== null);
        } finally {
          await runner.query(`SELECT RELEASE_LOCK('geneva_drive_explorer_trx')`);
        }
      } finally {
        await runner.release();
      }
    },
    lostConnectionError: () => Object.assign(new Error('Connection lost: The server closed the connection.'), { code: 'PROTOCOL_CONNECTION_LOST', fatal: true }),
    close: () => admin.destroy(),
  };
}
