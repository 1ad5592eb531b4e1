/**
 * What a measured window cost beyond its wall time: the machine's load average at both ends, this
 * process's CPU, and the database server's CPU (PostgreSQL: the backends serving the bench database;
 * MySQL/MariaDB: the whole mariadbd process, which serves other databases too; SQLite runs inside
 * this process) and, on PostgreSQL, the bench database's commits.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { cpuUsage } from 'node:process';
import type { DataSource } from 'typeorm';
import type { DatabaseKind } from './config.js';

/** USER_HZ: /proc reports CPU time in these ticks (100 on Linux x86-64 and arm64). */
const CLOCK_TICKS_PER_SECOND = 100;

export interface WindowCost {
  elapsedMs: number;
  /** 1-minute load average as the window opened and as it closed. */
  loadStart: number;
  loadEnd: number;
  /** CPU milliseconds of this process (user + system). */
  nodeCpuMs: number;
  /** CPU milliseconds of the database server (absent on SQLite, or when /proc is unreadable). */
  serverCpuMs?: number;
  /** PostgreSQL only: transactions committed in the bench database. */
  commits?: number;
}

/** Opens a window; `close()` returns what it cost. */
export async function openWindow(dataSource: DataSource, kind: DatabaseKind): Promise<{ close: () => Promise<WindowCost> }> {
  const loadStart = loadavg()[0];
  const server = await ServerCpu.open(dataSource, kind);
  const commitsBefore = kind === 'postgres' ? await pgCommits(dataSource) : undefined;
  const cpuBefore = cpuUsage();
  const started = performance.now();
  return {
    close: async () => {
      const elapsedMs = performance.now() - started;
      const cpu = cpuUsage(cpuBefore);
      const serverCpuMs = await server?.close();
      // The bench's own reads in between are commits too: the first counter read and the closing pid query.
      const commits = commitsBefore === undefined ? undefined : Math.max(0, (await pgCommits(dataSource)) - commitsBefore - 2);
      return {
        elapsedMs,
        loadStart,
        loadEnd: loadavg()[0],
        nodeCpuMs: (cpu.user + cpu.system) / 1000,
        ...(serverCpuMs === undefined ? {} : { serverCpuMs }),
        ...(commits === undefined ? {} : { commits }),
      };
    },
  };
}

/** CPU ticks of the server processes, sampled at both ends of a window. */
class ServerCpu {
  private constructor(
    private readonly pids: () => Promise<number[]>,
    private readonly before: Map<number, number>,
  ) {}

  static async open(dataSource: DataSource, kind: DatabaseKind): Promise<ServerCpu | undefined> {
    const pids = serverPids(dataSource, kind);
    if (!pids) return undefined;
    const before = new Map((await pids()).map((pid) => [pid, processTicks(pid) ?? 0]));
    return new ServerCpu(pids, before);
  }

  /** CPU milliseconds since open(): processes present at the end, less what they had at the start
   * (a backend that connected meanwhile counts whole; one that exited meanwhile is lost, which can only understate). */
  async close(): Promise<number> {
    let ticks = 0;
    for (const pid of await this.pids()) ticks += Math.max(0, (processTicks(pid) ?? 0) - (this.before.get(pid) ?? 0));
    return ticks * (1000 / CLOCK_TICKS_PER_SECOND);
  }
}

function serverPids(dataSource: DataSource, kind: DatabaseKind): (() => Promise<number[]>) | undefined {
  if (kind === 'postgres') {
    return async () => (await dataSource.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)).map((row: { pid: number }) => Number(row.pid));
  }
  if (kind === 'mysql') {
    const pid = processByName(['mariadbd', 'mysqld']);
    return pid === undefined ? undefined : async () => [pid];
  }
  return undefined;
}

/** utime + stime of a process (all its threads), or undefined when it is gone or unreadable. */
function processTicks(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** The first process whose command name is one of `names` (the database server on this host). */
function processByName(names: string[]): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${entry}/comm`, 'utf8').trim())) return Number(entry);
    } catch {
      // The process exited while we looked.
    }
  }
  return undefined;
}

async function pgCommits(dataSource: DataSource): Promise<number> {
  const [row] = await dataSource.query(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`);
  return Number(row.xact_commit);
}
