/**
 * Helpers of the specs that install geneva-drive into an application outside the workspace and run
 * it as its user would: npm and node as child processes, and polling the running app.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/** How long an `npm install` from the registry may take. */
export const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** The environment of a nested npm: without the outer `npm test`'s npm_* variables (they name the workspace). */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && key !== 'INIT_CWD'));
  return { ...env, NODE_ENV: '', ...extra };
}

/** Runs a command to its end; its standard output and error, or an error that carries both. */
export async function run(
  command: string,
  args: string[],
  cwd: string,
  timeout = INSTALL_TIMEOUT_MS,
  env: Record<string, string> = {},
): Promise<{ stdout: string; stderr: string }> {
  try {
    return await promisify(execFile)(command, args, { cwd, env: cleanEnv(env), timeout, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed in ${cwd}: ${message}\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** Polls `probe` until it returns a value (20 s at most); the failure shows `context()`. */
export async function waitFor<T>(probe: () => Promise<T | undefined>, context: () => string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out; the app printed:\n${context()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
