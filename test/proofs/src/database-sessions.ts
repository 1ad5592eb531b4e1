/**
 * Kills another process's connections to the proof's database from the outside, as an administrator
 * or a failing network would: PostgreSQL's `pg_terminate_backend`, MariaDB's `KILL CONNECTION`. The
 * server's own list of sessions names each one's client port (pg_stat_activity.client_port, the
 * `host:port` of MariaDB's PROCESSLIST); the process's sockets (Linux /proc) say which ports are its.
 * Whether a session is in a transaction is the server's word too (an open transaction in
 * pg_stat_activity, a row in MariaDB's INNODB_TRX).
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import type { DataSource } from 'typeorm';

/** One session of the database server. */
export interface DatabaseSession {
  /** The backend's pid on PostgreSQL, the connection id on MariaDB. */
  id: number;
  clientPort: number;
  inTransaction: boolean;
}

/** The local ports of the TCP sockets process `pid` holds open (none once it is gone). */
export async function clientPortsOf(pid: number): Promise<Set<number>> {
  const inodes = new Set<string>();
  const fds = await readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  await Promise.all(
    fds.map(async (fd) => {
      const inode = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''))?.[1];
      if (inode) inodes.add(inode);
    }),
  );
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    const lines = (await readFile(`/proc/${pid}/net/${table}`, 'utf8').catch(() => '')).split('\n').slice(1);
    for (const line of lines) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields.length > 9 && inodes.has(fields[9])) ports.add(parseInt(fields[1].split(':').pop()!, 16));
    }
  }
  return ports;
}

/** Every session on the database `dataSource` is connected to, but the one asking. */
export async function databaseSessions(dataSource: DataSource): Promise<DatabaseSession[]> {
  if (dataSource.options.type === 'postgres') {
    const rows: Array<{ id: number; port: number; in_transaction: boolean }> = await dataSource.query(
      `SELECT pid AS id, client_port AS port, xact_start IS NOT NULL AS in_transaction
         FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND client_port IS NOT NULL`,
    );
    return rows.map((row) => ({ id: Number(row.id), clientPort: Number(row.port), inTransaction: row.in_transaction === true }));
  }
  const rows: Array<{ id: unknown; host: string | null; in_transaction: unknown }> = await dataSource.query(
    `SELECT p.ID AS id, p.HOST AS host, t.trx_id IS NOT NULL AS in_transaction
       FROM information_schema.PROCESSLIST p LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
      WHERE p.DB = DATABASE() AND p.ID <> CONNECTION_ID()`,
  );
  return rows.flatMap((row) => {
    const port = Number(/:(\d+)$/.exec(row.host ?? '')?.[1]);
    return Number.isInteger(port) ? [{ id: Number(row.id), clientPort: port, inTransaction: Number(row.in_transaction) === 1 }] : [];
  });
}

/** The sessions of process `pid` (its client ports), those in a transaction first. */
export async function sessionsOf(dataSource: DataSource, pid: number): Promise<DatabaseSession[]> {
  const [ports, sessions] = await Promise.all([clientPortsOf(pid), databaseSessions(dataSource)]);
  return sessions.filter((session) => ports.has(session.clientPort)).sort((a, b) => Number(b.inTransaction) - Number(a.inTransaction));
}

/** Terminates these sessions; one already gone is no error. Returns how many the server ended. */
export async function terminateSessions(dataSource: DataSource, sessions: DatabaseSession[]): Promise<number> {
  if (sessions.length === 0) return 0;
  if (dataSource.options.type === 'postgres') {
    const rows: Array<{ ended: boolean }> = await dataSource.query(`SELECT pg_terminate_backend(id) AS ended FROM unnest($1::int[]) AS id`, [sessions.map((s) => s.id)]);
    return rows.filter((row) => row.ended === true).length;
  }
  let ended = 0;
  for (const session of sessions) {
    // MariaDB: "Unknown thread id" when the connection closed meanwhile.
    await dataSource.query(`KILL CONNECTION ${Math.trunc(session.id)}`).then(
      () => ended++,
      () => undefined,
    );
  }
  return ended;
}
