/**
 * The published package, installed as a user installs it: `npm pack` of libs/geneva-drive, the tarball
 * installed into a Nest app outside the workspace (test/package/consumer-app, copied to a temporary
 * directory) whose Nest and TypeORM versions differ from the workspace's but sit inside the peer ranges.
 * The app is compiled with `tsc` (skipLibCheck off, so every shipped declaration is checked), booted on
 * SQLite, driven through its controller (a workflow with a `waitFor` step and a redelivered webhook),
 * and its own jest spec runs with `geneva-drive/testing` under the ESM jest setup the quick start shows.
 * The app installs none of the optional peers (bull, @nestjs/terminus, prom-client, @opentelemetry/api), so its boot shows
 * the main entry point needs none of them. It fails when the tarball lacks a file, a type or a peer,
 * or ships something it should not.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LIBRARY = join(ROOT, 'libs/geneva-drive');
const APP_SOURCE = fileURLToPath(new URL('./consumer-app/', import.meta.url));

/** Versions inside the library's peer ranges, each different from the workspace's own. */
const CONSUMER_VERSIONS = {
  '@nestjs/common': '12.4.2',
  '@nestjs/core': '12.4.2',
  '@nestjs/platform-express': '12.4.2',
  '@nestjs/typeorm': '12.0.1',
  typeorm: '1.1.0',
  'reflect-metadata': '0.2.2',
  rxjs: '7.8.2',
};
/** What the consumer installs as its own: it asked for these, nothing else may appear in production. */
const BETTER_SQLITE3 = '12.11.1';
const NOT_ASKED_FOR = ['pg', 'mysql2', 'class-validator', 'class-transformer', 'bull', '@nestjs/bull', 'bullmq', '@nestjs/bullmq', 'ioredis', '@nestjs/terminus', 'prom-client', '@opentelemetry/api'];

const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** The environment of a nested npm: without the outer `npm test`'s npm_* variables (they name the workspace). */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key) && key !== 'INIT_CWD'));
  return { ...env, NODE_ENV: '', ...extra };
}

/** Runs a command to its end; its standard output and error, or an error that carries both. */
async function run(command: string, args: string[], cwd: string, timeout = INSTALL_TIMEOUT_MS): Promise<{ stdout: string; stderr: string }> {
  try {
    return await promisify(execFile)(command, args, { cwd, env: cleanEnv(), timeout, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed in ${cwd}: ${message}\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the geneva-drive package, installed into a Nest app', () => {
  const work = mkdtempSync(join(tmpdir(), 'gd-consumer-'));
  const app = join(work, 'app');
  const libraryManifest = JSON.parse(readFileSync(join(LIBRARY, 'package.json'), 'utf8')) as {
    peerDependencies: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    dependencies?: Record<string, string>;
  };
  let packed: { filename: string; files: Array<{ path: string }> };
  let server: ChildProcess | undefined;

  beforeAll(async () => {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], LIBRARY);
    [packed] = JSON.parse(stdout.slice(stdout.indexOf('[')));
    cpSync(APP_SOURCE, app, { recursive: true });
    const manifest = {
      name: 'consumer-app',
      private: true,
      type: 'module',
      dependencies: { ...CONSUMER_VERSIONS, 'better-sqlite3': BETTER_SQLITE3, 'geneva-drive': `file:../${packed.filename}` },
      devDependencies: { '@jest/globals': '30.5.2', '@nestjs/testing': '12.1.0', '@types/node': '20.19.25', jest: '30.5.2', 'ts-jest': '29.4.15', typescript: '6.0.3' },
    };
    writeFileSync(join(app, 'package.json'), JSON.stringify(manifest, null, 2));
    // Install scripts are skipped and better-sqlite3's native build is taken from the workspace, which
    // has the same version built for this same Node: compiling it again would only cost minutes.
    await run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund'], app);
    const workspaceSqlite = join(ROOT, 'node_modules/better-sqlite3');
    expect(JSON.parse(readFileSync(join(workspaceSqlite, 'package.json'), 'utf8')).version).toBe(BETTER_SQLITE3);
    cpSync(join(workspaceSqlite, 'build'), join(app, 'node_modules/better-sqlite3/build'), { recursive: true });
  }, INSTALL_TIMEOUT_MS);

  afterAll(() => {
    server?.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });

  it('packs only the build, its types, the README, the LICENSE, the changelog and the docs', () => {
    const paths = packed.files.map((file) => file.path).sort();
    const unexpected = paths.filter((path) => !/^(dist\/.+\.(js|d\.ts)|docs\/[\w.-]+\.md|README\.md|LICENSE|CHANGELOG\.md|package\.json)$/.test(path));
    expect(unexpected).toEqual([]);
    expect(paths.filter((path) => path.includes('.spec.'))).toEqual([]);
    for (const required of ['README.md', 'LICENSE', 'CHANGELOG.md', 'docs/MANUAL.md', 'dist/index.js', 'dist/index.d.ts', 'dist/testing/index.js', 'dist/testing/index.d.ts', 'dist/dashboard/index.js', 'dist/dashboard/index.d.ts', 'dist/metrics/index.js', 'dist/metrics/index.d.ts', 'dist/tracing/index.js', 'dist/tracing/index.d.ts', 'dist/cli/main.js']) {
      expect(paths).toContain(required);
    }
  });

  it('declares every package its build imports as a peer (or a dependency), and the queue libraries, @nestjs/terminus, prom-client and @opentelemetry/api as optional', () => {
    const installed = join(app, 'node_modules/geneva-drive/dist');
    const declared = new Set([...Object.keys(libraryManifest.peerDependencies), ...Object.keys(libraryManifest.dependencies ?? {})]);
    const imported = new Set<string>();
    for (const file of filesUnder(installed).filter((path) => path.endsWith('.js') || path.endsWith('.d.ts'))) {
      for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"]([^'".][^'"]*)['"]/g)) {
        if (specifier.startsWith('node:') || builtinModules.includes(specifier)) continue;
        imported.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
      }
    }
    expect([...imported].filter((name) => !declared.has(name))).toEqual([]);
    for (const optional of ['bull', '@nestjs/bull', 'bullmq', '@nestjs/bullmq', '@nestjs/terminus', 'prom-client', '@opentelemetry/api']) expect([optional, libraryManifest.peerDependenciesMeta?.[optional]?.optional]).toEqual([optional, true]);
    expect(libraryManifest.dependencies ?? {}).toEqual({});
  });

  it('installs without nested copies of Nest or TypeORM, and without drivers or validation libraries the app did not ask for', async () => {
    expect(existsSync(join(app, 'node_modules/geneva-drive/node_modules'))).toBe(false);
    const production = (await run('npm', ['ls', '--omit=dev', '--all', '--parseable'], app)).stdout.split('\n').filter(Boolean);
    const names = new Set(production.map((path) => path.split('node_modules/').at(-1)!));
    expect(NOT_ASKED_FOR.filter((name) => names.has(name))).toEqual([]);
    const tree = JSON.parse((await run('npm', ['ls', '--json', '@nestjs/core', 'typeorm'], app)).stdout) as {
      dependencies: Record<string, { version: string }>;
    };
    expect([tree.dependencies['@nestjs/core'].version, tree.dependencies.typeorm.version]).toEqual([CONSUMER_VERSIONS['@nestjs/core'], CONSUMER_VERSIONS.typeorm]);
  });

  it('compiles with tsc, every shipped declaration checked', async () => {
    const config = JSON.parse(readFileSync(join(app, 'tsconfig.json'), 'utf8')) as { compilerOptions: { skipLibCheck: boolean } };
    expect(config.compilerOptions.skipLibCheck).toBe(false);
    await run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app);
    expect(existsSync(join(app, 'dist/main.js'))).toBe(true);
  }, 5 * 60_000);

  it('boots on SQLite and runs a workflow through its controller: parks, takes the webhook once, ships', async () => {
    let output = '';
    server = spawn(process.execPath, ['dist/main.js'], { cwd: app, env: cleanEnv({ PORT: '0', SQLITE_FILE: join(work, 'app.sqlite') }) });
    server.stdout!.on('data', (chunk) => (output += chunk));
    server.stderr!.on('data', (chunk) => (output += chunk));
    const base = await waitFor(async () => /listening on (http:\/\/\S+)/.exec(output)?.[1].replace('[::1]', '127.0.0.1'), () => output);
    const call = async (method: string, path: string, body?: object) => {
      const response = await fetch(`${base}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body && JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    const created = await call('POST', '/orders', { sku: 'BOOK-1' });
    expect(created.status).toBe(201);
    const { orderId, workflowId } = created.body as { orderId: number; workflowId: string };
    await waitFor(async () => ((await call('GET', `/orders/${orderId}`)).body.status === 'reserved' ? true : undefined), () => output);
    expect((await call('GET', `/orders/${orderId}`)).body).toEqual({ status: 'reserved', workflowState: 'ready' });

    const event = { id: 'evt_1NqXaB', workflowId, amountCents: 1250 };
    const first = await call('POST', '/webhooks/payments', event);
    const again = await call('POST', '/webhooks/payments', event);
    expect([first.status, first.body.duplicate, again.status, again.body.duplicate, again.body.signalId]).toEqual([200, false, 200, true, first.body.signalId]);
    await waitFor(async () => ((await call('GET', `/orders/${orderId}`)).body.status === 'shipped' ? true : undefined), () => output);
    expect((await call('GET', `/orders/${orderId}`)).body).toEqual({ status: 'shipped', workflowState: 'ended' });
    expect((await call('POST', '/webhooks/payments', { ...event, workflowId: '999' })).status).toBe(404);
  }, 60_000);

  it.each(['bull', 'bullmq'])('without the optional %s package, refuses the %s queue adapter at boot and names the package', async (adapter) => {
    // Written here rather than in the consumer app: it is a probe, not part of the app the quick start shows.
    writeFileSync(
      join(app, `${adapter}-probe.mjs`),
      [
        "import 'reflect-metadata';",
        "import { Module } from '@nestjs/common';",
        "import { NestFactory } from '@nestjs/core';",
        "import { TypeOrmModule } from '@nestjs/typeorm';",
        "import { GENEVA_DRIVE_ENTITIES, GENEVA_DRIVE_MIGRATIONS, GenevaDriveModule } from 'geneva-drive';",
        'class AppModule {}',
        'Module({ imports: [',
        "  TypeOrmModule.forRoot({ type: 'better-sqlite3', database: ':memory:', entities: [...GENEVA_DRIVE_ENTITIES], migrations: [...GENEVA_DRIVE_MIGRATIONS], migrationsRun: true }),",
        `  GenevaDriveModule.forRoot({ queue: { adapter: '${adapter}', redis: 'redis://127.0.0.1:1' } }),`,
        '] })(AppModule);',
        'try {',
        '  const context = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });',
        "  console.log('booted');",
        '  await context.close();',
        '} catch (error) {',
        '  console.log(`${error.name}: ${error.message}`);',
        '}',
      ].join('\n'),
    );
    const { stdout } = await run(process.execPath, [`${adapter}-probe.mjs`], app, 60_000);
    expect(stdout.trim()).toBe(`MissingDependencyError: The queue adapter '${adapter}' needs the package "${adapter}", which is not installed: npm install ${adapter}`);
  }, 60_000);

  it("runs the app's own jest spec with geneva-drive/testing, as ES modules", async () => {
    const { stderr } = await run(process.execPath, ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'], app, 3 * 60_000);
    expect(stderr).toMatch(/Tests:\s+1 passed, 1 total/);
  }, 3 * 60_000);
});

/** Polls `probe` until it returns a value (20 s at most); the failure shows `context()`. */
async function waitFor<T>(probe: () => Promise<T | undefined>, context: () => string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out; the app printed:\n${context()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
