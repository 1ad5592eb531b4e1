/**
 * The published package, installed as a user installs it: `npm pack` of libs/geneva-drive, the tarball
 * installed into a Nest app outside the workspace (test/package/consumer-app, copied to a temporary
 * directory) whose Nest and TypeORM versions differ from the workspace's but sit inside the peer ranges.
 * The app is compiled with TypeScript 7's `tsc` (skipLibCheck off, so every shipped declaration is
 * checked), booted on PostgreSQL (a database of its own), driven through its controller (a workflow
 * with a `waitFor` step, a redelivered webhook, a late one and a malformed one), and its own jest spec
 * runs with `geneva-drive/testing` under the ESM jest setup the quick start shows (SWC, not ts-jest).
 * The app installs none of the optional peers (bull, @nestjs/terminus, prom-client, @opentelemetry/api), so its boot shows
 * the main entry point needs none of them. It fails when the tarball lacks a file, a type or a peer,
 * or ships something it should not.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { emptyPostgresDatabase } from '../utils/databases.js';
import { cleanEnv, INSTALL_TIMEOUT_MS, run, waitFor } from './npm-app.js';

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
const PG = '8.23.1';
const NOT_ASKED_FOR = ['better-sqlite3', 'mysql2', 'class-validator', 'class-transformer', 'bull', '@nestjs/bull', 'bullmq', '@nestjs/bullmq', 'ioredis', '@nestjs/terminus', 'prom-client', '@opentelemetry/api'];

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
  let databaseUrl: string;

  beforeAll(async () => {
    databaseUrl = await emptyPostgresDatabase('consumer');
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], LIBRARY);
    [packed] = JSON.parse(stdout.slice(stdout.indexOf('[')));
    cpSync(APP_SOURCE, app, { recursive: true });
    const manifest = {
      name: 'consumer-app',
      private: true,
      type: 'module',
      dependencies: { ...CONSUMER_VERSIONS, pg: PG, 'geneva-drive': `file:../${packed.filename}` },
      devDependencies: { '@jest/globals': '30.5.2', '@nestjs/testing': '12.1.0', '@swc/core': '1.16.22', '@swc/jest': '0.2.39', '@types/node': '20.19.25', jest: '30.5.2', typescript: '7.0.2' },
    };
    writeFileSync(join(app, 'package.json'), JSON.stringify(manifest, null, 2));
    await run('npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund'], app);
  }, INSTALL_TIMEOUT_MS);

  afterAll(() => {
    server?.kill('SIGKILL');
    rmSync(work, { recursive: true, force: true });
  });

  it('packs only the build, its types, the README, the LICENSE, the changelog and the docs', () => {
    const paths = packed.files.map((file) => file.path).sort();
    const unexpected = paths.filter((path) => !/^(dist\/.+\.(js|d\.ts)|docs\/[\w.-]+\.(md|png)|README\.md|LICENSE|CHANGELOG\.md|package\.json)$/.test(path));
    expect(unexpected).toEqual([]);
    expect(paths.filter((path) => path.includes('.spec.'))).toEqual([]);
    for (const required of ['README.md', 'LICENSE', 'CHANGELOG.md', 'docs/MANUAL.md', 'dist/index.js', 'dist/index.d.ts', 'dist/testing/index.js', 'dist/testing/index.d.ts', 'dist/dashboard/index.js', 'dist/dashboard/index.d.ts', 'dist/metrics/index.js', 'dist/metrics/index.d.ts', 'dist/tracing/index.js', 'dist/tracing/index.d.ts', 'dist/cli/main.js']) {
      expect(paths).toContain(required);
    }
  });

  it('resolves every relative link of its README, changelog and docs to a file inside the tarball', () => {
    const paths = new Set(packed.files.map((file) => file.path));
    const installed = join(app, 'node_modules/geneva-drive');
    const broken = [...paths]
      .filter((path) => path.endsWith('.md'))
      .flatMap((path) => {
        const prose = readFileSync(join(installed, path), 'utf8').replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
        return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
          .map(([, link]) => link)
          .filter((link) => !/^([a-z][a-z+.-]*:|#)/i.test(link)) // a URL, or a place in the same file
          .filter((link) => !paths.has(posix.normalize(posix.join(posix.dirname(path), link.split('#')[0]))))
          .map((link) => `${path}: ${link}`);
      });
    expect(broken).toEqual([]);
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

  it('boots on PostgreSQL and runs a workflow through its controller: parks, takes the webhook once, ships; a late event is 200, a malformed one 400', async () => {
    let output = '';
    server = spawn(process.execPath, ['dist/main.js'], { cwd: app, env: cleanEnv({ PORT: '0', DATABASE_URL: databaseUrl }) });
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
    // The body writes the status and commits before the step's outcome does: wait for the park too.
    const parked = await waitFor(async () => {
      const { body } = await call('GET', `/orders/${orderId}`);
      return body.status === 'reserved' && body.workflowState === 'ready' ? body : undefined;
    }, () => output);
    expect(parked).toEqual({ status: 'reserved', workflowState: 'ready' });

    const event = { id: 'evt_1NqXaB', workflowId, amountCents: 1250 };
    const first = await call('POST', '/webhooks/payments', event);
    const again = await call('POST', '/webhooks/payments', event);
    expect([first.status, first.body.duplicate, again.status, again.body.duplicate, again.body.signalId]).toEqual([200, false, 200, true, first.body.signalId]);
    // As above: the body commits the status before the workflow's end commits.
    const shipped = await waitFor(async () => {
      const { body } = await call('GET', `/orders/${orderId}`);
      return body.status === 'shipped' && body.workflowState === 'ended' ? body : undefined;
    }, () => output);
    expect(shipped).toEqual({ status: 'shipped', workflowState: 'ended' });
    expect((await call('POST', '/webhooks/payments', { ...event, workflowId: '999' })).status).toBe(404);
    // After the workflow ended, a new event is nothing to retry: 2xx. An empty event id can never be a key: 400.
    const late = await call('POST', '/webhooks/payments', { ...event, id: 'evt_2' });
    expect([late.status, late.body.ignored]).toEqual([200, `Cannot deliver signal "payment_confirmed" to a finished workflow (workflow ${workflowId})`]);
    expect((await call('POST', '/webhooks/payments', { ...event, id: '' })).status).toBe(400);
  }, 60_000);

  it.each(['bull', 'bullmq'])('without the optional %s packages, refuses that queue adapter at boot and names both', async (adapter) => {
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
        "  TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL, entities: [...GENEVA_DRIVE_ENTITIES], migrations: [...GENEVA_DRIVE_MIGRATIONS], migrationsRun: true }),",
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
    const { stdout } = await run(process.execPath, [`${adapter}-probe.mjs`], app, 60_000, { DATABASE_URL: databaseUrl });
    // Both missing packages at once: one install fixes the boot.
    expect(stdout.trim()).toBe(
      `MissingDependencyError: The queue adapter '${adapter}' needs the packages "${adapter}" and "@nestjs/${adapter}", which are not installed: npm install ${adapter} @nestjs/${adapter}`,
    );
  }, 60_000);

  it("runs the app's own jest spec with geneva-drive/testing, as ES modules", async () => {
    const { stderr } = await run(process.execPath, ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'], app, 3 * 60_000, { DATABASE_URL: databaseUrl });
    expect(stderr).toMatch(/Tests:\s+1 passed, 1 total/);
  }, 3 * 60_000);
});
