/**
 * `geneva-drive --data-source <file> <command>` as a child process, on SQLite and PostgreSQL: every
 * command, its --json output (a workflow's parent and children with `show`, the concurrency keys executions wait for with `flow-keys`), and the exit codes of the typed errors. With the application's Bull
 * queue in the data source file, a signal sent from the shell wakes the step in the application's worker.
 * A database server that accepts the connection and never answers is reported once the connect timeout the CLI gives the driver has passed, on the
 * PostgreSQL and MySQL drivers.
 */
import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { GenevaDriveTesting } from 'geneva-drive/testing';
import { DataSource } from 'typeorm';
import { connect } from '../../libs/geneva-drive/src/cli/cli-connect.js';
import { CliConnectionError } from '../../libs/geneva-drive/src/cli/cli-connection.error.js';
import { cliQueue } from '../../libs/geneva-drive/src/cli/cli.module.js';
import { compileCli, type CliRun, type CompiledCli } from '../src/cli-runner.js';
import { ChargeWorkflow, performHeld, slots } from '../src/concurrency-workflows.js';
import { createDashboardApp, insertChildren, parkedInvoice as parkInvoice, InvoiceFlow, saveHero, type DashboardApp } from '../src/dashboard-app.js';
import { describeEachDatabase, redisAvailable, redisUrl } from '../utils/databases.js';

// Every command is a process that boots Nest: a test runs several, slowly on a loaded machine.
jest.setTimeout(180_000);

let cliMain: string;
let dataSourceFile: string;
let cli: CompiledCli['run'];

beforeAll(async () => {
  ({ main: cliMain, dataSourceFile, run: cli } = await compileCli('cli'));
}, 120_000);

describeEachDatabase('geneva-drive CLI', (kind) => {
  if (kind === 'mysql') return; // SQLite and PostgreSQL; the commands share the dashboard's queries, covered on MariaDB by its spec
  let d: DashboardApp;
  let gd: GenevaDriveTesting;

  beforeAll(async () => {
    d = await createDashboardApp(kind, { allowUnauthenticated: true }, undefined, { providers: [ChargeWorkflow] });
    gd = GenevaDriveTesting.create(d.app);
  });
  afterAll(() => d.close());
  beforeEach(() => d.reset());

  const parkedInvoice = (name?: string) => parkInvoice(d, gd, name);

  it('lists with filters, as text and as JSON, and refuses a bad filter', async () => {
    const parked = await parkedInvoice('parked');
    const paused = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'paused'));
    await d.workflows.pause(paused);

    const all = await cli(kind, ['list', '--json']);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout).rows.map((row: { id: string }) => row.id)).toEqual([paused.id, parked.id]);
    const waiting = await cli(kind, ['list', '--waiting-for', 'payment_confirmed', '--json']);
    expect(JSON.parse(waiting.stdout).rows.map((row: { id: string }) => row.id)).toEqual([parked.id]);
    const text = await cli(kind, ['list', '--state', 'paused']);
    expect(text.stdout).toBe(`${paused.id}\tInvoiceFlow\tpaused\tTestHero:${paused.heroId}\tprepare\t${(await d.workflows.find(paused.id)).updatedAt.toISOString()}\n`);
    const paged = await cli(kind, ['list', '--limit', '1']);
    expect(paged.stdout).toContain(`more: --after ${paused.id}`);

    const bad = await cli(kind, ['list', '--state', 'sleeping']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('DashboardInputError: Invalid state "sleeping"');
  });

  it('shows a workflow, and exits 3 for an unknown one', async () => {
    const workflow = await parkedInvoice();
    const shown = await cli(kind, ['show', workflow.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`workflow ${workflow.id} InvoiceFlow ready`);
    expect(shown.stdout).toContain('steps: prepare > [awaitPayment] > issueReceipt');
    expect(shown.stdout).toMatch(/waiting since \d{4}-/);
    const json = JSON.parse((await cli(kind, ['show', workflow.id, '--json'])).stdout);
    expect(json.executions.map((e: { stepName: string; state: string }) => `${e.stepName}:${e.state}`)).toEqual(['prepare:completed', 'awaitPayment:waiting']);

    const missing = await cli(kind, ['show', '999999']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/^geneva-drive: WorkflowNotFoundError: .*999999/);
  });

  it("shows a workflow's parent and its children, counted by state and paged", async () => {
    const parent = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource, 'parent'));
    const ids = await insertChildren(d.dataSource, parent, 5, { state: (i) => (i === 0 ? 'finished' : 'ready'), key: (i) => (i === 1 ? 'line\u001b[2J' : `line-${i}`), result: (i) => (i === 0 ? { total: 7 } : null) });
    const shown = await cli(kind, ['show', parent.id, '--limit', '2']);
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toContain('\nparent ');
    expect(shown.stdout).toContain(
      'children: 5 (4 ready, 1 finished)\n' +
        `  ${ids[0]}\tInvoiceFlow\tfinished\tstep fanOut key line-0\t-\t{ "total": 7 }\n` +
        `  ${ids[1]}\tInvoiceFlow\tready\tstep fanOut key line\\u001b[2J\t-\t-\n` +
        `  more: --children-after ${ids[1]}\n`,
    );
    const rest = await cli(kind, ['show', parent.id, '--limit', '2', '--children-after', ids[3]]);
    expect(rest.stdout).toMatch(new RegExp(`children: 5 \\(4 ready, 1 finished\\)\\n  ${ids[4]}\\tInvoiceFlow\\tready\\t[^\\n]*\\n$`));
    const json = JSON.parse((await cli(kind, ['show', parent.id, '--json', '--children-after', ids[0]])).stdout);
    expect(json.children.map((c: { id: string }) => c.id)).toEqual(ids.slice(1));
    expect(json.childCounts).toEqual({ total: 5, byState: { finished: 1, ready: 4 } });

    const child = await cli(kind, ['show', ids[0]]);
    expect(child.stdout.split('\n').slice(0, 3)).toEqual([
      `workflow ${ids[0]} InvoiceFlow finished  hero TestHero:child-${parent.id}-0`,
      `parent ${parent.id} InvoiceFlow ready  step fanOut key line-0`,
      'result { "total": 7 }',
    ]);
    expect(child.stdout).not.toContain('children:');
    expect(JSON.parse((await cli(kind, ['show', ids[0], '--json'])).stdout).parent).toEqual({ id: parent.id, type: 'InvoiceFlow', state: 'ready', stepName: 'fanOut', key: 'line-0' });
    expect((await cli(kind, ['show', parent.id, '--children-after', 'nope'])).code).toBe(2);
  });

  it('sends a signal, and exits with the code of each typed error', async () => {
    const workflow = await parkedInvoice();
    const sent = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--payload', '{"amountCents": 700}', '--key', 'evt-1', '--json']);
    expect(sent.code).toBe(0);
    expect(JSON.parse(sent.stdout).signal).toEqual(expect.objectContaining({ name: 'payment_confirmed', state: 'claimed', idempotencyKey: 'evt-1', duplicateDelivery: false, payload: { amountCents: 700 } }));
    expect((await d.workflows.currentExecution(workflow))?.state).toBe('scheduled'); // woken
    // No queue in the data-source file: the woken step is enqueued by the application's housekeeping, and the CLI says so.
    expect(JSON.parse(sent.stdout).note).toBe(
      "the woken step waits for the application's housekeeping, which enqueues it once it has been due for stuckScheduledThreshold (15 min): give the data-source file a genevaDrive.queue to enqueue it at once",
    );
    const again = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--payload', '{}', '--key', 'evt-1']);
    expect(again.stdout).toBe(`signal ${JSON.parse(sent.stdout).signal.id} payment_confirmed claimed (duplicate delivery: nothing changed)\n`);

    expect((await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--payload', '{oops'])).code).toBe(2);
    expect((await cli(kind, ['signal', workflow.id, 'shipped'])).stderr).toContain('expected one of payment_confirmed');
    const payloadFile = path.join(path.dirname(dataSourceFile), 'large-payload.json');
    await writeFile(payloadFile, JSON.stringify({ blob: 'x'.repeat(140_000) }));
    const large = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--payload', `@${payloadFile}`]);
    expect(large.code).toBe(5);
    expect(large.stderr).toContain('SignalPayloadTooLargeError');
    const unregistered = await cli(kind, ['signal', workflow.id, 'payment_confirmed'], { GD_CLI_NO_CLASSES: '1' });
    expect(unregistered.code).toBe(2);
    expect(unregistered.stderr).toContain('UnknownWorkflowError: Unknown workflow "InvoiceFlow"');
    expect(unregistered.stderr).toContain('genevaDrive.providers');
    expect(await d.signals.list(workflow)).toHaveLength(1);

    await d.workflows.cancel(workflow);
    const late = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--json']);
    expect(late.code).toBe(4);
    expect(JSON.parse(late.stderr)).toEqual({ error: 'WorkflowNotOngoingError', message: `Cannot deliver signal "payment_confirmed" to a canceled workflow (workflow ${workflow.id})`, exitCode: 4 });
  });

  it('pauses, resumes, skips and cancels; an action the state does not allow exits 4', async () => {
    const workflow = await parkedInvoice();
    expect((await cli(kind, ['pause', workflow.id])).stdout).toBe(`workflow ${workflow.id} is paused\n`);
    const twice = await cli(kind, ['pause', workflow.id]);
    expect(twice.code).toBe(4);
    expect(twice.stderr).toBe(`geneva-drive: InvalidStateError: Cannot pause a paused workflow (workflow ${workflow.id})\n`);
    expect((await cli(kind, ['resume', workflow.id])).stdout).toBe(`workflow ${workflow.id} is ready\n`);
    expect((await cli(kind, ['skip', workflow.id])).code).toBe(0);
    expect((await d.workflows.currentExecution(workflow))?.stepName).toBe('issueReceipt');
    expect(JSON.parse((await cli(kind, ['cancel', workflow.id, '--json'])).stdout).workflow.state).toBe('canceled');
    expect((await cli(kind, ['resume', workflow.id])).code).toBe(4);
    expect((await cli(kind, ['cancel', '999999'])).code).toBe(3);
  });

  it('resumes a workflow at a step; an unknown step exits 2 and a finished workflow 4, changing nothing', async () => {
    const workflow = await parkedInvoice();
    await d.workflows.pause(workflow);
    const parked = await d.workflows.currentExecution(workflow);

    const unknown = await cli(kind, ['resume-at', workflow.id, 'sendFax']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe('geneva-drive: DashboardInputError: Invalid step "sendFax": expected one of prepare, awaitPayment, issueReceipt (the steps InvoiceFlow defines)\n');
    expect((await cli(kind, ['resume-at', workflow.id])).stderr).toContain('resume-at needs a step: geneva-drive resume-at ID STEP');
    expect((await d.workflows.find(workflow.id)).state).toBe('paused');
    expect((await d.workflows.currentExecution(workflow))?.id).toBe(parked!.id);

    const moved = await cli(kind, ['resume-at', workflow.id, 'issueReceipt']);
    expect(moved.code).toBe(0);
    expect(moved.stdout).toBe(
      `workflow ${workflow.id} is ready, at step issueReceipt\n` +
        "note: issueReceipt (scheduled due now) waits for the application's housekeeping, which enqueues it once it has been due for stuckScheduledThreshold (15 min): give the data-source file a genevaDrive.queue to enqueue it at once\n",
    );
    expect((await d.workflows.executionHistory(workflow)).map((e) => `${e.stepName}:${e.state}`)).toEqual(['prepare:completed', 'awaitPayment:canceled', 'issueReceipt:scheduled']);
    await gd.performNextStep(workflow);
    expect((await d.workflows.find(workflow.id)).state).toBe('finished');

    const finished = await cli(kind, ['resume-at', workflow.id, 'prepare', '--json']);
    expect(finished.code).toBe(4);
    expect(JSON.parse(finished.stderr)).toEqual({ error: 'InvalidStateError', message: `Cannot resumeAt a finished workflow (workflow ${workflow.id})`, exitCode: 4 });
    expect((await cli(kind, ['resume-at', '999999', 'prepare'])).code).toBe(3);
    const unregistered = await cli(kind, ['resume-at', workflow.id, 'prepare'], { GD_CLI_NO_CLASSES: '1' });
    expect(unregistered.code).toBe(2);
    expect(unregistered.stderr).toContain('UnknownWorkflowError: Unknown workflow "InvoiceFlow"');
  });

  it('runs housekeeping and reads the gauges', async () => {
    await parkedInvoice();
    const run = await cli(kind, ['housekeeping', '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual(expect.objectContaining({ unrecoverable: [], gauges: expect.objectContaining({ 'geneva_drive.waiting_step_executions': { total: 1, byWorkflow: { InvoiceFlow: 1 } } }) }));
    const gauges = await cli(kind, ['gauges']);
    expect(gauges.stdout).toContain('waiting: 1 {"InvoiceFlow":1}');
    expect(JSON.parse((await cli(kind, ['gauges', '--json'])).stdout).waiting.total).toBe(1);
  });

  it('lists the concurrency keys executions wait for, as text and as JSON; show names the key; an argument or a bad limit exits 2', async () => {
    slots.reset();
    const charge = async (key: string) => {
      const hero = await saveHero(d.dataSource, key);
      return { hero, workflow: await d.workflows.start(ChargeWorkflow, hero) };
    };
    expect((await cli(kind, ['flow-keys'])).stdout).toBe('no key has waiters\n');
    const key = 'acct\u001b[2J'; // stored text that would clear the terminal
    const [a, b, c, other, late] = [await charge(key), await charge(key), await charge(key), await charge('other'), await charge('other')];
    const held = [await performHeld(gd, a), await performHeld(gd, other)];
    try {
      for (const waiter of [b, c, late]) await gd.performNextStep(waiter.workflow);
      const due = async (waiter: typeof b) => (await d.workflows.currentExecution(waiter.workflow))!.scheduledFor.toISOString();

      const text = await cli(kind, ['flow-keys']);
      expect(text.code).toBe(0);
      expect(text.stdout.replace(/waited \d+ s/g, 'waited N s')).toBe(
        `acct\\u001b[2J\tholding 1\twaiting 2\toldest due ${await due(b)}\twaited N s\n` + `other\tholding 1\twaiting 1\toldest due ${await due(late)}\twaited N s\n`,
      );
      const json = JSON.parse((await cli(kind, ['flow-keys', '--json'])).stdout);
      expect(json).toEqual({
        flowControl: true,
        more: false,
        keys: [
          { key, holding: 1, waiting: 2, oldestWaiterDueAt: await due(b), oldestWaitMs: expect.any(Number) },
          { key: 'other', holding: 1, waiting: 1, oldestWaiterDueAt: await due(late), oldestWaitMs: expect.any(Number) },
        ],
      });
      const first = await cli(kind, ['flow-keys', '--limit', '1']);
      expect(first.stdout.split('\n').slice(1)).toEqual(['more keys have waiters: these are the 1 with the most (--limit)', '']);
      expect(JSON.parse((await cli(kind, ['flow-keys', '--limit', '1', '--json'])).stdout)).toMatchObject({ more: true, keys: [{ key }] });
      expect((await cli(kind, ['show', b.workflow.id])).stdout).toMatch(/\tcharge\tscheduled\t-\tscheduled [^\n]*\twaiting for a slot of acct\\u001b\[2J\n/);

      const extra = await cli(kind, ['flow-keys', 'acct']);
      expect([extra.code, extra.stderr]).toEqual([2, 'geneva-drive: flow-keys takes no argument, got "acct": geneva-drive flow-keys [--limit N]\n']);
      const zero = await cli(kind, ['flow-keys', '--limit', '0', '--json']);
      expect([zero.code, JSON.parse(zero.stderr)]).toEqual([2, { error: 'CliUsageError', message: '--limit must be an integer from 1 to 1000, got 0', exitCode: 2 }]);
    } finally {
      for (const hold of held) await hold.release();
    }
    // The holder that ended keeps its key in show's history.
    expect((await cli(kind, ['show', a.workflow.id])).stdout).toMatch(/\tcharge\tcompleted\tsuccess\tscheduled [^\n]*\tconcurrency key acct\\u001b\[2J\n/);
  });

  it('explains usage errors with exit 2', async () => {
    const none = await cli(kind, []);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('No command given');
    expect((await cli(kind, ['show'])).stderr).toContain('show needs a workflow id');
    const noFile = await new Promise<CliRun>((resolve) =>
      execFile(process.execPath, [cliMain, 'list'], (error, stdout, stderr) => resolve({ code: Number((error as { code?: number })?.code ?? 0), stdout, stderr })),
    );
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toContain('--data-source <file> is required');
    const wrongFile = await new Promise<CliRun>((resolve) =>
      execFile(process.execPath, [cliMain, '--data-source', path.join(path.dirname(dataSourceFile), 'cli-workflows.js'), 'list'], { env: { ...process.env, GD_CLI_DB: kind } }, (error, stdout, stderr) => resolve({ code: Number((error as { code?: number })?.code ?? 0), stdout, stderr })),
    );
    expect(wrongFile.code).toBe(2);
    expect(wrongFile.stderr).toContain('must export exactly one TypeORM DataSource (found 0)');
  });

  it('escapes control characters of stored text in its human output', async () => {
    const workflow = await parkedInvoice();
    // A key that would retitle the window and clear the screen, and a line of its own.
    const key = '\u001b]0;owned\u0007\u001b[2J\u001b[Hfake\nline\u009b2J\u202e';
    await d.signals.signal(workflow, 'payment_confirmed', { payload: { note: '\u001b[31mred' }, idempotencyKey: key });
    const shown = await cli(kind, ['show', workflow.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
    expect(shown.stdout).toContain('key \\u001b]0;owned\\u0007\\u001b[2J\\u001b[Hfake\\u000aline\\u009b2J\\u202e\t');
    expect(shown.stdout).toContain('"note": "\\u001b[31mred"');
    const json = JSON.parse((await cli(kind, ['show', workflow.id, '--json'])).stdout);
    expect(json.signals[0].idempotencyKey).toBe(key);

    const tooLong = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--key', 'k'.repeat(300)]);
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toBe('geneva-drive: InvalidSignalError: idempotencyKey is 300 bytes long (UTF-8), over the limit of 255 bytes\n');
    const nul = await cli(kind, ['list', '--hero-id', '\u001b[2Jx', '--json']);
    expect(nul.code).toBe(2);
    expect(JSON.parse(nul.stderr)).toMatchObject({ error: 'DashboardInputError', exitCode: 2 });
  });

  it('reports an unreachable database at once: one JSON line with --json, a non-zero exit code', async () => {
    // Nothing listens on port 1; a SQLite file under a regular file cannot be opened (nor its directory made).
    const unreachable: Record<string, string> = kind === 'postgres' ? { GD_PG_URL: 'postgres://postgres@127.0.0.1:1/nowhere' } : { GD_CLI_SQLITE_FILE: path.join(dataSourceFile, 'geneva.sqlite') };
    // What starting the CLI costs on this machine (Node, Nest, TypeORM, the data source file), without a connection.
    const startedBare = Date.now();
    const bare = await cli(kind, ['list', '--json'], {}, path.join(path.dirname(dataSourceFile), 'cli-workflows.js'));
    const startUp = Date.now() - startedBare;
    expect(bare.code).toBe(2);
    const started = Date.now();
    const run = await cli(kind, ['list', '--json'], unreachable);
    const elapsed = Date.now() - started;
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const lines = run.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toEqual({ error: 'CliConnectionError', message: expect.stringMatching(/^Cannot connect to the (postgres|better-sqlite3) database of the data source file: /), exitCode: 1 });
    // Reported within 5 s of the CLI's own start-up (28 s of retries before); start-up itself depends on the machine's load.
    expect(elapsed - startUp).toBeLessThan(5_000);
    const text = await cli(kind, ['list'], unreachable);
    expect(text.stderr.split('\n').filter(Boolean)).toEqual([expect.stringMatching(/^geneva-drive: CliConnectionError: Cannot connect to the /)]);
  });
});

describeEachDatabase('geneva-drive CLI against a database server that never answers', (kind) => {
  if (kind === 'sqlite') return; // the PostgreSQL and MySQL drivers: SQLite opens a file
  let silent: Server;
  let port: number;
  const sockets = new Set<Socket>();
  let accepted = 0;
  let acceptedAt = 0;

  // Accepts every connection and never writes a byte: no refusal for the driver to report at once.
  beforeAll(async () => {
    silent = createServer((socket) => {
      accepted++;
      acceptedAt ||= Date.now();
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    port = (silent.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('gives the driver a connect timeout of 3 s unless the data source says otherwise, and fails with CliConnectionError', async () => {
    const options = kind === 'postgres' ? { type: 'postgres' as const, url: `postgres://postgres@127.0.0.1:${port}/nowhere` } : { type: 'mysql' as const, url: `mysql://root@127.0.0.1:${port}/nowhere` };
    const dataSource = new DataSource(options);
    await expect(connect(dataSource)).rejects.toBeInstanceOf(CliConnectionError);
    const driverOptions = (dataSource.driver as unknown as { options: Record<string, unknown> }).options;
    expect(kind === 'postgres' ? driverOptions.connectTimeoutMS : driverOptions.connectTimeout).toBe(3_000);
    const given = new DataSource({ ...options, ...(kind === 'postgres' ? { connectTimeoutMS: 1_000 } : { connectTimeout: 1_000 }) });
    await expect(connect(given)).rejects.toBeInstanceOf(CliConnectionError);
    const givenOptions = (given.driver as unknown as { options: Record<string, unknown> }).options;
    expect(kind === 'postgres' ? givenOptions.connectTimeoutMS : givenOptions.connectTimeout).toBe(1_000);
  });

  it('reports it once the connect timeout has passed: one JSON line with --json, exit 1', async () => {
    const url: Record<string, string> = kind === 'postgres' ? { GD_PG_URL: `postgres://postgres@127.0.0.1:${port}/nowhere` } : { GD_MYSQL_URL: `mysql://root@127.0.0.1:${port}/nowhere` };
    acceptedAt = 0;
    const run = await cli(kind, ['list', '--json'], url);
    const ended = Date.now();
    expect(accepted).toBeGreaterThan(0); // the driver connected, and waited for an answer
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const lines = run.stderr.split('\n').filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toEqual({ error: 'CliConnectionError', message: expect.stringMatching(/^Cannot connect to the (postgres|mysql) database of the data source file: /), exitCode: 1 });
    // The timeout itself is checked above without a clock. This tells the 3 s given from mysql2's
    // own 10 s (what the CLI waited before it set the driver's copy of the options), with room for
    // a loaded machine's exit: the wait the server sees, from the connection to the exit.
    expect(ended - acceptedAt).toBeLessThan(9_000);
  });
});

for (const adapter of ['bull', 'bullmq'] as const) describeEachDatabase(`geneva-drive CLI with the application on ${adapter}`, (kind) => {
  if (kind === 'mysql' || !redisAvailable()) return;
  const queue = `gd-cli-${randomUUID()}`;
  let d: DashboardApp;
  beforeAll(async () => {
    d = await createDashboardApp(kind, { allowUnauthenticated: true }, { queue: { adapter, redis: redisUrl(), name: queue, concurrency: 1 } });
  });
  afterAll(() => d?.close());

  it('runs no steps itself: its queue is enqueue-only', () => {
    expect(cliQueue({ adapter, redis: redisUrl(), name: queue })).toEqual({ adapter, redis: redisUrl(), name: queue, concurrency: 0 });
  });

  it("wakes the parked step in the application's worker", async () => {
    const workflow = await d.workflows.start(InvoiceFlow, await saveHero(d.dataSource));
    await until(async () => (await d.workflows.currentExecution(workflow))?.state === 'waiting');
    const sent = await cli(kind, ['signal', workflow.id, 'payment_confirmed', '--payload', '{"amountCents": 900}'], { GD_CLI_BULL_QUEUE: queue, GD_CLI_QUEUE_ADAPTER: adapter });
    expect(sent.code).toBe(0);
    expect(sent.stdout).not.toContain('note:'); // enqueued where the workers are: nothing to wait for
    await until(async () => (await d.workflows.find(workflow.id)).state === 'finished');
    expect((await d.workflows.executionHistory(workflow)).map((e) => `${e.stepName}:${e.state}`)).toEqual(['prepare:completed', 'awaitPayment:completed', 'issueReceipt:completed']);
  });
});

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
