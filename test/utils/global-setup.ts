/**
 * Jest global setup: finds out once per run which test servers answer, and tells the test workers
 * through the environment (workers start after this and inherit `process.env`):
 * - `GD_AVAILABLE_DATABASES`: comma list of usable databases, `sqlite` always;
 * - `GD_REDIS_AVAILABLE`: `1` or `0`;
 * - `GD_PG_URL`, `GD_MYSQL_URL`, `GD_REDIS_URL`: the servers probed (the defaults below unless set).
 * A server listed in `GENEVA_DRIVE_TEST_REQUIRE` (or a database explicitly selected with `GD_DB`) that
 * does not answer fails the whole run; any other missing server is announced with the suites it costs.
 *
 * Self-contained on purpose: jest loads this file outside its module system, so a relative import
 * of another `.ts` file cannot be resolved here (bare packages can).
 */
import net from 'node:net';
import { DataSource } from 'typeorm';

type Server = 'postgres' | 'mysql' | 'redis';

const SERVERS: Record<Server, { label: string; urlEnv: string; defaultUrl: string; skipped: string }> = {
  postgres: {
    label: 'PostgreSQL',
    urlEnv: 'GD_PG_URL',
    defaultUrl: 'postgres://postgres@127.0.0.1:5432/test',
    skipped: 'PostgreSQL suites skipped',
  },
  mysql: {
    label: 'MySQL/MariaDB',
    urlEnv: 'GD_MYSQL_URL',
    defaultUrl: 'mysql://root@127.0.0.1:3306/test',
    skipped: 'MySQL suites skipped',
  },
  redis: {
    label: 'Redis',
    urlEnv: 'GD_REDIS_URL',
    defaultUrl: 'redis://127.0.0.1:6379',
    skipped: 'Bull/Redis queue suites skipped',
  },
};

const PROBE_TIMEOUT_MS = 4000;

export default async function globalSetup(): Promise<void> {
  for (const { urlEnv, defaultUrl } of Object.values(SERVERS)) {
    process.env[urlEnv] ||= defaultUrl;
  }
  // `chromium` is checked by the browser specs themselves (test/utils/chromium.ts).
  const required = parseList('GENEVA_DRIVE_TEST_REQUIRE', ['postgres', 'mysql', 'redis', 'chromium']) ?? [];
  const explicitlySelected = parseList('GD_DB', ['sqlite', 'postgres', 'mysql']);
  const selected = explicitlySelected ?? ['sqlite', 'postgres', 'mysql'];

  // Probe what the run can use or must have, all at once.
  const wanted = (['postgres', 'mysql', 'redis'] as const).filter(
    (server) => server === 'redis' || selected.includes(server) || required.includes(server),
  );
  const reasons = await Promise.all(wanted.map((server) => (server === 'redis' ? probeRedis() : probeDatabase(server))));
  const missing = new Map<Server, string>();
  wanted.forEach((server, i) => {
    const reason = reasons[i];
    if (reason !== null) missing.set(server, reason);
  });

  const fatal = [...missing].filter(([server]) => required.includes(server) || explicitlySelected?.includes(server));
  if (fatal.length > 0) {
    const lines = fatal.map(([server, reason]) => {
      const why = required.includes(server) ? 'it is listed in GENEVA_DRIVE_TEST_REQUIRE' : 'it is selected with GD_DB';
      return `${SERVERS[server].label} not reachable at ${hostOf(server)} (${reason}), but ${why}`;
    });
    throw new Error(`geneva-drive tests cannot run:\n  ${lines.join('\n  ')}`);
  }
  for (const [server, reason] of missing) {
    console.warn(
      `geneva-drive: ${SERVERS[server].label} not reachable at ${hostOf(server)} (${reason}) — ` +
        `${SERVERS[server].skipped} (set GENEVA_DRIVE_TEST_REQUIRE to make this a failure)`,
    );
  }

  const available = (['postgres', 'mysql'] as const).filter((kind) => wanted.includes(kind) && !missing.has(kind));
  process.env.GD_AVAILABLE_DATABASES = ['sqlite', ...available].join(',');
  process.env.GD_REDIS_AVAILABLE = missing.has('redis') ? '0' : '1';
}

/** A comma list from the environment, validated; undefined when the variable is unset or empty. */
function parseList(variable: string, allowed: readonly string[]): string[] | undefined {
  const raw = process.env[variable]?.trim();
  if (!raw) return undefined;
  const names = raw.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
  const unknown = names.filter((name) => !allowed.includes(name));
  if (unknown.length > 0) {
    throw new Error(`${variable}=${raw}: unknown ${unknown.join(', ')} (expected a comma list of ${allowed.join(', ')})`);
  }
  return names;
}

function urlOf(server: Server): URL {
  return new URL(process.env[SERVERS[server].urlEnv]!);
}

function hostOf(server: Server): string {
  return urlOf(server).host || SERVERS[server].defaultUrl;
}

/** Connects to the admin database of the URL and runs `SELECT 1`; null when up, else why not. */
async function probeDatabase(server: 'postgres' | 'mysql'): Promise<string | null> {
  const url = process.env[SERVERS[server].urlEnv]!;
  const dataSource = new DataSource(
    server === 'postgres'
      ? { type: 'postgres', url, connectTimeoutMS: PROBE_TIMEOUT_MS }
      : { type: 'mysql', url, connectTimeout: PROBE_TIMEOUT_MS },
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
  });
  try {
    await Promise.race([dataSource.initialize().then(() => dataSource.query('SELECT 1')), timeout]);
    return null;
  } catch (error) {
    return reasonOf(error);
  } finally {
    clearTimeout(timer);
    if (dataSource.isInitialized) await dataSource.destroy().catch(() => undefined);
  }
}

/** Sends `PING` (after `AUTH`/`SELECT` when the URL asks for them) over a plain socket; null on `+PONG`. */
function probeRedis(): Promise<string | null> {
  const url = urlOf('redis');
  const command = (...args: string[]) =>
    `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`).join('')}`;
  let request = '';
  const password = decodeURIComponent(url.password);
  if (password) request += url.username ? command('AUTH', decodeURIComponent(url.username), password) : command('AUTH', password);
  if (url.pathname.length > 1) request += command('SELECT', url.pathname.slice(1));
  request += command('PING');

  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || 6379) });
    let received = '';
    const finish = (reason: string | null) => {
      socket.destroy();
      resolve(reason);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(`no answer within ${PROBE_TIMEOUT_MS} ms`));
    socket.on('error', (error) => finish(reasonOf(error)));
    socket.on('connect', () => socket.write(request));
    socket.on('data', (chunk) => {
      received += chunk.toString('utf8');
      const error = /^-(.*)\r\n/m.exec(received);
      if (error) finish(error[1]);
      else if (received.includes('+PONG\r\n')) finish(null);
    });
  });
}

function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // Connection refusals arrive as an AggregateError (IPv4 and IPv6) with a code and an empty message.
  const code = (error as { code?: unknown }).code;
  return [typeof code === 'string' ? code : undefined, error.message].filter(Boolean).join(': ');
}
