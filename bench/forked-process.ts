/**
 * A bench process forked with IPC: it says `{ type: 'ready' }` once booted, answers each request
 * `{ id, ... }` with `{ type: 'reply', id, result | error }`, and may send other messages (handed to
 * `onMessage`, for a subclass to read). Its output is kept for the error that reports its failure or exit.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { PROJECT_ROOT } from './config.js';

const BOOT_TIMEOUT_MS = 60_000;

export type ForkedMessage = { type: 'ready' } | { type: 'reply'; id: number; result?: unknown; error?: string };
/** A request of a union of them `{ id, ... }` as the caller writes it: the id is the process's to give. */
export type RequestBody<Request> = Request extends { id: number } ? Omit<Request, 'id'> : never;

export class ForkedProcess<Request extends { id: number }, Other extends { type: string } = never> {
  output = '';
  private exited: string | undefined;
  private nextId = 1;
  private readonly replies = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly ready: Promise<void>;
  private readonly child: ChildProcess;

  constructor(
    readonly label: string,
    entry: string,
    env: Record<string, string>,
  ) {
    const child = (this.child = fork(entry, [], { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: { ...process.env, ...env } }));
    child.stdout?.on('data', (chunk) => (this.output += chunk));
    child.stderr?.on('data', (chunk) => (this.output += chunk));
    this.ready = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`bench: the ${label} process did not boot in ${BOOT_TIMEOUT_MS} ms:\n${this.output}`)), BOOT_TIMEOUT_MS);
      child.on('message', (message: ForkedMessage | Other) => {
        if (message.type === 'ready') {
          clearTimeout(timer);
          resolve();
        } else if (message.type === 'reply') {
          const reply = message as Extract<ForkedMessage, { type: 'reply' }>;
          const waiter = this.replies.get(reply.id);
          this.replies.delete(reply.id);
          if (reply.error !== undefined) waiter?.reject(new Error(`bench: the ${label} process failed: ${reply.error}`));
          else waiter?.resolve(reply.result);
        } else this.onMessage(message as Other);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.exited = `exited (${code ?? signal})`;
        const error = new Error(`bench: the ${label} process ${this.exited}:\n${this.output}`);
        for (const waiter of this.replies.values()) waiter.reject(error);
        this.replies.clear();
        reject(error);
      });
    });
  }

  protected onMessage(_message: Other): void {}

  booted(): Promise<void> {
    return this.ready;
  }

  request<T>(request: RequestBody<Request>): Promise<T> {
    if (this.exited) return Promise.reject(new Error(`bench: the ${this.label} process ${this.exited}:\n${this.output}`));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.replies.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ id, ...request });
    });
  }

  assertAlive(): void {
    if (this.exited) throw new Error(`bench: the ${this.label} process ${this.exited}:\n${this.output}`);
  }

  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}
