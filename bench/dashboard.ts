/**
 * The operator dashboard's workflow list over a large population: the page an on-call engineer
 * opens first. A second Nest application (HTTP, Express) mounts GenevaDriveDashboardModule on the
 * bench database next to the bench's own context, and the list page is fetched over loopback with
 * each kind of filter the list offers, and a page deep in the keyset order.
 *
 * The population is what a production table mostly holds: nine in ten workflows finished (of one
 * type), one in ten parked on a signal (of another), in interleaved batches, so a filter may match
 * most rows, a few, or none.
 */
import 'reflect-metadata';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { LessThanOrEqual } from 'typeorm';
import { GENEVA_DRIVE_ENTITIES, GenevaDriveModule, WorkflowRecord } from 'geneva-drive';
import { GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { BenchHero, BenchLogger, BenchPaymentWorkflow, BenchSignalWorkflow, BenchStepsWorkflow, PARKED_STEP, SIGNAL_WORKFLOW, STEPS_WORKFLOW, WAKE_SIGNAL } from './app.js';
import { assert, type BenchContext } from './scenarios.js';
import { summarize, type Summary } from './stats.js';

/** The goal for the list page at 100k workflows (reported against the median; the machine's load goes with it). */
export const LIST_PAGE_P50_GOAL_MS = 100;

/** Batches the population is inserted in: each nine parts finished, then one part parked. */
const BATCHES = 10;

export interface ListPageTiming {
  /** What the page shows, for the report. */
  page: string;
  /** The query string after `/workflows`. */
  query: string;
  summary: Summary;
}

export interface ListPageResult {
  workflows: number;
  requests: number;
  pages: ListPageTiming[];
}

/** Grows the population to `total` workflows (bulk-inserted), then times `requests` fetches of each list page. */
export async function measureListPage(ctx: BenchContext, database: TypeOrmModuleOptions, total: number, requests: number): Promise<ListPageResult> {
  const existing = await ctx.dataSource.query('SELECT COUNT(*) AS n FROM geneva_drive_workflows');
  const missing = total - Number(existing[0].n);
  if (missing > 0) {
    const at = new Date(Date.now() - 60_000);
    const batch = Math.ceil(missing / BATCHES);
    for (let inserted = 0; inserted < missing; inserted += batch) {
      const size = Math.min(batch, missing - inserted);
      const parked = Math.ceil(size / 10);
      await ctx.bulk.insertFinished(size - parked, STEPS_WORKFLOW, BenchHero.name, 'third', at);
      await ctx.bulk.insertParked(parked, SIGNAL_WORKFLOW, BenchHero.name, PARKED_STEP, at);
    }
    await ctx.bulk.analyze();
  }
  const middle = await ctx.dataSource.query('SELECT MAX(id) AS m FROM geneva_drive_workflows');
  const middleId = String(Math.floor(Number(middle[0].m) / 2));
  const hero = await ctx.dataSource.getRepository(WorkflowRecord).findOneOrFail({ where: { id: LessThanOrEqual(middleId) }, order: { id: 'DESC' } });
  // Each page, with a workflow type its rows must show (null: not checked).
  const pages: Array<[page: string, query: string, shows: string | null]> = [
    ['first page', '', SIGNAL_WORKFLOW],
    ['by type (1 in 10)', `?type=${SIGNAL_WORKFLOW}`, SIGNAL_WORKFLOW],
    ['by state (1 in 10)', '?state=ready', SIGNAL_WORKFLOW],
    ['by type and state (9 in 10)', `?type=${STEPS_WORKFLOW}&state=finished`, STEPS_WORKFLOW],
    ['by type and state (none)', `?type=${STEPS_WORKFLOW}&state=paused`, null],
    ['by type, state, waiting for', `?state=ready&type=${SIGNAL_WORKFLOW}&waitingFor=${WAKE_SIGNAL}`, SIGNAL_WORKFLOW],
    ['search by hero id', `?q=${encodeURIComponent(hero.heroId)}`, hero.type],
    ['deep keyset page', `?after=${middleId}`, null],
  ];
  const app = await dashboardApp(database);
  try {
    await app.listen(0, '127.0.0.1');
    const base = `${await app.getUrl()}/geneva/workflows`;
    const first = await page(base, SIGNAL_WORKFLOW);
    assert(/[?&]after=(\d+)/.test(first), 'the dashboard list page has no link to a next page');
    const timings: ListPageTiming[] = [];
    for (const [name, query, shows] of pages) timings.push({ page: name, query, summary: await time(`${base}${query}`, shows, requests) });
    return { workflows: total, requests, pages: timings };
  } finally {
    await app.close();
  }
}

async function page(url: string, shows: string | null): Promise<string> {
  const response = await fetch(url);
  const body = await response.text();
  assert(response.status === 200, `GET ${url} answered ${response.status}: ${body.slice(0, 200)}`);
  if (shows !== null) assert(body.includes(shows), `GET ${url} shows no ${shows} row`);
  return body;
}

async function time(url: string, shows: string | null, requests: number): Promise<Summary> {
  for (let i = 0; i < 5; i++) await page(url, shows); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now();
    await page(url, shows);
    samples.push(performance.now() - t0);
  }
  return summarize(samples);
}

async function dashboardApp(database: TypeOrmModuleOptions): Promise<INestApplication> {
  @Module({
    imports: [
      TypeOrmModule.forRoot({ ...database, entities: [BenchHero, ...GENEVA_DRIVE_ENTITIES], synchronize: false } as TypeOrmModuleOptions),
      // The manual queue: this application serves pages and runs no steps.
      GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: new BenchLogger() }),
      GenevaDriveDashboardModule.forRoot({ path: '/geneva', allowUnauthenticated: true }),
    ],
    providers: [BenchStepsWorkflow, BenchSignalWorkflow, BenchPaymentWorkflow],
  })
  class BenchDashboardModule {}
  return NestFactory.create(BenchDashboardModule, { logger: false });
}
