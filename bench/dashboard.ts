/**
 * The operator dashboard's workflow list over a large population: the page an on-call engineer
 * opens first. A second Nest application (HTTP, Express) mounts GenevaDriveDashboardModule on the
 * bench database next to the bench's own context, and the list page is fetched over loopback: the
 * first page, a filtered page and a page deep in the keyset order.
 */
import 'reflect-metadata';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule, type TypeOrmModuleOptions } from '@nestjs/typeorm';
import { GENEVA_DRIVE_ENTITIES, GenevaDriveModule } from 'geneva-drive';
import { GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { BenchHero, BenchLogger, BenchPaymentWorkflow, BenchSignalWorkflow, BenchStepsWorkflow, PARKED_STEP, SIGNAL_WORKFLOW } from './app.js';
import { assert, type BenchContext } from './scenarios.js';
import { summarize, type Summary } from './stats.js';

/** The goal for the list page at 100k workflows (reported against the median; the machine's load goes with it). */
export const LIST_PAGE_P50_GOAL_MS = 100;

export interface ListPageResult {
  workflows: number;
  requests: number;
  firstPage: Summary;
  filteredPage: Summary;
  deepPage: Summary;
}

/** Grows the population to `total` workflows (bulk-inserted, parked), then times `requests` fetches of each page. */
export async function measureListPage(ctx: BenchContext, database: TypeOrmModuleOptions, total: number, requests: number): Promise<ListPageResult> {
  const existing = await ctx.dataSource.query('SELECT COUNT(*) AS n FROM geneva_drive_workflows');
  const missing = total - Number(existing[0].n);
  if (missing > 0) {
    await ctx.bulk.insertParked(missing, SIGNAL_WORKFLOW, BenchHero.name, PARKED_STEP, new Date(Date.now() - 60_000));
    await ctx.bulk.analyze();
  }
  const app = await dashboardApp(database);
  try {
    await app.listen(0, '127.0.0.1');
    const base = `${await app.getUrl()}/geneva`;
    const first = await page(`${base}/workflows`);
    const after = /[?&]after=(\d+)/.exec(first)?.[1];
    assert(after !== undefined, 'the dashboard list page has no link to a next page');
    // A page deep in the keyset order: after the id half way down the population.
    const middle = await ctx.dataSource.query('SELECT MAX(id) AS m FROM geneva_drive_workflows');
    const deep = `${base}/workflows?after=${Math.floor(Number(middle[0].m) / 2)}`;
    const filtered = `${base}/workflows?state=ready&type=${SIGNAL_WORKFLOW}&waitingFor=bench_wake`;
    return {
      workflows: total,
      requests,
      firstPage: await time(`${base}/workflows`, requests),
      filteredPage: await time(filtered, requests),
      deepPage: await time(deep, requests),
    };
  } finally {
    await app.close();
  }
}

async function page(url: string): Promise<string> {
  const response = await fetch(url);
  const body = await response.text();
  assert(response.status === 200, `GET ${url} answered ${response.status}: ${body.slice(0, 200)}`);
  assert(body.includes(SIGNAL_WORKFLOW), `GET ${url} shows no ${SIGNAL_WORKFLOW} row`);
  return body;
}

async function time(url: string, requests: number): Promise<Summary> {
  for (let i = 0; i < 5; i++) await page(url); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < requests; i++) {
    const t0 = performance.now();
    await page(url);
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
