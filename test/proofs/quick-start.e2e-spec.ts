/**
 * The quick start, run as a newcomer runs it: in an empty directory, every command of the bash blocks
 * of docs/quick-start.md in order and every file its other blocks show (each labelled by the line
 * before it, `path`:), nothing else, with the registry's current packages (whatever `npm install`
 * picks today; the test checks that TypeScript is the registry's current major): install, build,
 * boot, the webhook calls, the first test. Then, in the same directory, the commands of
 * docs/production.md's last section (its data-source file, the migrations, the geneva-drive CLI).
 *
 * What the test supplies, as the doc tells the reader to: the tarball (`npm pack` of
 * libs/geneva-drive, copied in as geneva-drive.tgz); DATABASE_URL naming a fresh PostgreSQL
 * database; PORT, a free port, to which the doc's `localhost:3000` is rewritten; `npm start` runs in
 * the background until it prints `listening on`. Then it checks what the doc says the calls answer.
 *
 * Slow (every package from the registry): runs with `npm run test:proofs` (GD_PROOF_SCALE=full), or
 * with GD_QUICK_START=1; skipped otherwise.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanEnv, run, waitFor } from '../package/npm-app.js';
import { emptyPostgresDatabase } from '../utils/databases.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = 'docs/quick-start.md';
const PRODUCTION_DOC = 'docs/production.md';
const ENABLED = process.env.GD_PROOF_SCALE === 'full' || process.env.GD_QUICK_START === '1';
const TIMEOUT_MS = 30 * 60_000;

/** A fenced block of the doc: its language, the file it is when the line before names one, its lines. */
interface Block {
  language: string;
  file: string | undefined;
  lines: string[];
  at: number;
}

/** The doc's fenced blocks in order. A block is a file when the prose line just before it is `path`: alone. */
function quickStartBlocks(markdown: string): Block[] {
  const lines = markdown.split('\n');
  const blocks: Block[] = [];
  let previous = '';
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]);
    if (!open) {
      if (lines[i].trim() !== '') previous = lines[i].trim();
      continue;
    }
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`${DOC}:${i + 1}: unterminated block`);
    blocks.push({ language: open[1], file: /^`([\w./-]+)`:$/.exec(previous)?.[1], lines: lines.slice(i + 1, end), at: i + 1 });
    i = end;
    previous = '';
  }
  return blocks;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

(ENABLED ? describe : describe.skip)('the quick start, from an empty directory, exactly as written, then the production checklist', () => {
  const work = mkdtempSync(join(tmpdir(), 'gd-quick-start-'));
  const app = join(work, 'shop');
  let server: ChildProcess | undefined;

  afterAll(() => {
    if (server?.pid) process.kill(-server.pid, 'SIGTERM'); // npm and the app it started
    rmSync(work, { recursive: true, force: true });
  });

  it('installs, builds, boots, takes the webhook and passes its first test; then migrates and operates it from the shell', async () => {
    const blocks = quickStartBlocks(readFileSync(join(ROOT, DOC), 'utf8'));
    // Every block is a file to write or commands to run, but for the answers the doc quotes in prose.
    expect(blocks.filter((block) => block.language !== 'bash' && !block.file).map((block) => `${DOC}:${block.at}`)).toEqual([]);

    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], join(ROOT, 'libs/geneva-drive'));
    const [{ filename }] = JSON.parse(stdout.slice(stdout.indexOf('['))) as Array<{ filename: string }>;
    mkdirSync(app);
    copyFileSync(join(work, filename), join(app, 'geneva-drive.tgz'));
    const port = await freePort();
    const env = { DATABASE_URL: await emptyPostgresDatabase('quick_start'), PORT: String(port) };

    let output = '';
    /** Writes a block's file, or runs its commands (`npm start` in the background) and returns what they printed. */
    const runBlocks = async (blocks: Block[]) => {
      const ran: Array<{ command: string; stdout: string; stderr: string }> = [];
      for (const block of blocks) {
        if (block.file) {
          mkdirSync(dirname(join(app, block.file)), { recursive: true });
          writeFileSync(join(app, block.file), `${block.lines.join('\n')}\n`);
          continue;
        }
        for (const command of block.lines.filter((line) => line.trim() !== '' && !line.startsWith('#'))) {
          if (command === 'npm start') {
            server = spawn('npm', ['start'], { cwd: app, env: cleanEnv(env), detached: true });
            server.stdout!.on('data', (chunk) => (output += chunk));
            server.stderr!.on('data', (chunk) => (output += chunk));
            await waitFor(async () => (/listening on/.test(output) ? true : undefined), () => output);
            continue;
          }
          const local = command.replaceAll('localhost:3000', `localhost:${port}`);
          ran.push({ command, ...(await run('sh', ['-c', local], app, TIMEOUT_MS, env)) });
        }
      }
      return ran;
    };
    const ran = await runBlocks(blocks);

    // The doc pins no TypeScript: what it installed is the registry's current major, built with and tested.
    const major = (version: string) => version.split('.')[0];
    const latest = (await run('npm', ['view', 'typescript', 'version'], app)).stdout.trim();
    const installed = (JSON.parse(readFileSync(join(app, 'node_modules/typescript/package.json'), 'utf8')) as { version: string }).version;
    expect(major(installed)).toBe(major(latest));

    // What the doc says the calls answer on a fresh database, and the order shipped a moment later.
    const curls = ran.filter(({ command }) => command.startsWith('curl '));
    expect(curls.slice(0, 2).map(({ stdout }) => stdout.trim())).toEqual(['{"orderId":1,"workflowId":"1"}', '{"signalId":"1","duplicate":false}']);
    const order = async () => (await (await fetch(`http://localhost:${port}/orders/1`)).json()) as { status: string };
    await waitFor(async () => ((await order()).status === 'shipped' ? true : undefined), () => output);
    expect(await order()).toEqual({ status: 'shipped', workflowState: 'ended' });
    expect(ran.at(-1)).toMatchObject({ command: 'npm test', stderr: expect.stringMatching(/Tests:\s+1 passed, 1 total/) });

    // Then the production checklist's commands, on the same app.
    const production = quickStartBlocks(readFileSync(join(ROOT, PRODUCTION_DOC), 'utf8'));
    expect(production.filter((block) => block.language !== 'bash' && !block.file).map((block) => `${PRODUCTION_DOC}:${block.at}`)).toEqual([]);
    const deployed = await runBlocks(production);
    const cli = (name: string) => deployed.find(({ command }) => command.endsWith(` ${name}`))!.stdout;
    expect(cli('list')).toContain('1\tOrderFulfillmentWorkflow\tfinished\tOrder:1\t');
    expect(cli('show 1')).toContain('steps: reserveStock > capturePayment > ship');
    expect(JSON.parse(cli('housekeeping'))).toMatchObject({ unrecoverable: [] });
  }, TIMEOUT_MS);
});
