/**
 * A redis-server of the proof's own, on a free port (6391 and up), without persistence: killing it
 * loses every job in it, as a crashed cache node with no AOF would. Never the shared server on 6379.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { sleep } from '../../src/bull-wait.js';

const FIRST_PORT = 6391;
const LAST_PORT = 6420;

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Whether a server on `port` answers PING within 500 ms. */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

export class OwnRedis {
  private process: ChildProcess | null = null;
  private output = '';

  private constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts a server on the first free port from 6391. */
  static async start(): Promise<OwnRedis> {
    for (let port = FIRST_PORT; port <= LAST_PORT; port++) {
      if (!(await portFree(port))) continue;
      const redis = new OwnRedis(port);
      if (await redis.up().then(() => true, () => false)) return redis;
    }
    throw new Error(`no free port for a redis-server between ${FIRST_PORT} and ${LAST_PORT}`);
  }

  /** (Re)starts the server on its port and waits until it answers. */
  async up(): Promise<void> {
    if (this.process) throw new Error(`redis-server on ${this.port} is already running`);
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.output = '';
    child.stdout!.on('data', (chunk) => (this.output += chunk));
    child.stderr!.on('data', (chunk) => (this.output += chunk));
    this.process = child;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    for (let tries = 0; tries < 100; tries++) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      if (await pings(this.port)) return;
      await sleep(50);
    }
    child.kill('SIGKILL');
    await exited;
    this.process = null;
    throw new Error(`redis-server on ${this.port} did not come up:\n${this.output}`);
  }

  /** SIGKILLs the server and waits for it to be gone: everything in it is lost. */
  async kill(): Promise<void> {
    const child = this.process;
    if (!child) return;
    this.process = null;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGKILL');
    await exited;
  }
}
