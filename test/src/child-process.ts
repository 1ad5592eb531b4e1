/**
 * Child processes for the multi-process specs. Jest's TypeScript transform does not reach a forked
 * child, so its entry and imports are compiled with tsc into a fresh directory under .tmp/, then
 * forked with IPC; the handle keeps the child's output, its messages and its exit.
 */
import { execFile, fork, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Compiles `tsconfig` (relative to the repository) into `outDir`; returns the path of `entry` (e.g. 'test/src/worker-process.js'). */
export async function compileChildEntry(tsconfig: string, outDir: string, entry: string): Promise<string> {
  await rm(outDir, { recursive: true, force: true });
  const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', path.join(ROOT, tsconfig), '--outDir', outDir], { cwd: ROOT });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`Compiling ${entry} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
  return path.join(outDir, entry);
}

/**
 * Forks a compiled entry with an IPC channel and piped output, in the repository (so its
 * node_modules and `"type": "module"` apply), with this process's environment plus `env`.
 */
export function forkCompiled(entry: string, env: Record<string, string>): ChildProcess {
  return fork(entry, [], {
    cwd: ROOT,
    execArgv: [], // not jest's --experimental-vm-modules
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: { ...process.env, ...env },
  });
}

/** A forked child: its combined output, the messages it sent, and a clean stop. */
export class ChildHandle<Received, Sent> {
  /** What the child sent, each stamped with when it arrived. */
  readonly messages: Array<Received & { receivedAt: number }> = [];
  output = '';
  exited: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private readonly exit: Promise<void>;

  constructor(
    readonly child: ChildProcess,
    /** Every live child of the spec, so its afterAll can make sure none survives. */
    registry: Set<ChildProcess>,
    onMessage: (message: Received) => void = () => undefined,
  ) {
    registry.add(child);
    child.stdout?.on('data', (chunk) => (this.output += chunk));
    child.stderr?.on('data', (chunk) => (this.output += chunk));
    child.on('message', (message: Received) => {
      this.messages.push({ ...message, receivedAt: Date.now() });
      onMessage(message);
    });
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        this.exited = { code, signal };
        registry.delete(child);
        resolve();
      }),
    );
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Sends `message`; one to a child that has gone (killed meanwhile) is dropped, not an unhandled error of its channel. */
  send(message: Sent): void {
    if (this.child.connected) this.child.send(message as object, () => undefined);
  }

  /** Throws with the child's output if it has exited (for use inside a wait). */
  assertAlive(label: string): void {
    if (this.exited) throw new Error(`${label} ${this.pid} exited (${JSON.stringify(this.exited)}):\n${this.output}`);
  }

  /** Asks the child to close its application; kills it if it has not exited within 5 s. */
  async stop(shutdown: Sent): Promise<void> {
    if (this.exited) return;
    this.send(shutdown);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.exit;
    clearTimeout(timer);
  }
}
