/**
 * Child workflows: one parent (BenchFanOutWorkflow) starts N children of `a` → `b` (no-op bodies)
 * in one step and fans in with `waitFor: childrenOf('fanOut')`, beside N independent workflows of the
 * same `a` → `b` started by start(). What a child costs against an independent workflow: statements
 * (counted as the shape scenario counts them: every statement the process issued, divided by N),
 * Node and database CPU, and the wall time, over interleaved runs. Every run checks the database
 * afterwards.
 */
import { In, IsNull, Not } from 'typeorm';
import { StepExecution, WorkflowRecord } from 'geneva-drive';
import { BenchChildWorkflow, BenchFanOutWorkflow, BenchHero, CHILD_WORKFLOW, FAN_OUT_WORKFLOW, probe } from './app.js';
import { openWindow, type WindowCost } from './load.js';
import { assert, type BenchContext } from './scenarios.js';
import { round, statementKind, type RunLoad } from './shape.js';
import { forEachLimited } from './stats.js';

/** start() calls in flight at once for the independent workflows, as in the shape scenario. */
const LANES = 16;
const TIMEOUT_MS = 300_000;
/** The goal of issue #26: a child costs at most this many times an independent workflow. */
export const CHILD_COST_GOAL = 1.3;

export type ChildrenVariant = 'independent' | 'children';

export interface ChildrenRun {
  variant: ChildrenVariant;
  /** Workflows of `a` → `b`: independent ones, or the parent's children (the parent is not counted). */
  workflows: number;
  load: RunLoad;
  /** First start() to the last independent workflow finished, or to the parent finished. */
  wallMs: number;
  nodeCpuMsPerWorkflow: number;
  serverCpuMsPerWorkflow?: number;
}

export interface ChildrenCount {
  variant: ChildrenVariant;
  workflows: number;
  statementsPerWorkflow: number;
  statementsByKind: Record<string, number>;
}

async function heroes(ctx: BenchContext, n: number): Promise<BenchHero[]> {
  return (await ctx.bulk.insertHeroes(n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
}

/** N independent workflows, started by start() (LANES at a time); their ids once all finished. */
async function independent(ctx: BenchContext, list: BenchHero[]): Promise<string[]> {
  const ids: string[] = [];
  const done: Array<Promise<unknown>> = [];
  await forEachLimited(list, LANES, async (hero) => {
    const workflow = await ctx.workflows.start(BenchChildWorkflow, hero);
    ids.push(workflow.id);
    done.push(probe.childFinished.wait(workflow.id, TIMEOUT_MS, 'the finished workflow'));
  });
  await Promise.all(done);
  return ids;
}

/** One parent whose fanOut starts a child per hero of `children`; its id once it finished. */
async function fanOut(ctx: BenchContext, parentHero: BenchHero, children: BenchHero[]): Promise<string> {
  probe.childHeroes.set(parentHero.id, children);
  const parent = await ctx.workflows.start(BenchFanOutWorkflow, parentHero);
  await probe.fanOutFinished.wait(parent.id, TIMEOUT_MS, 'the finished parent');
  return parent.id;
}

/** Heroes for one run of a variant (inserted before any clock starts). */
async function setUp(ctx: BenchContext, variant: ChildrenVariant, n: number): Promise<{ list: BenchHero[]; parentHero?: BenchHero }> {
  if (variant === 'independent') return { list: await heroes(ctx, n) };
  const [parentHero, ...list] = await heroes(ctx, n + 1);
  return { list, parentHero };
}

async function perform(ctx: BenchContext, variant: ChildrenVariant, list: BenchHero[], parentHero: BenchHero | undefined): Promise<{ ids?: string[]; parentId?: string }> {
  return variant === 'independent' ? { ids: await independent(ctx, list) } : { parentId: await fanOut(ctx, parentHero!, list) };
}

async function check(ctx: BenchContext, n: number, outcome: { ids?: string[]; parentId?: string }): Promise<void> {
  if (outcome.ids) return verifyIndependent(ctx, outcome.ids);
  return verifyChildren(ctx, n, outcome.parentId!);
}

/** One timed run of a variant: wall time and CPU per workflow. */
export async function runChildrenVariant(ctx: BenchContext, variant: ChildrenVariant, n: number): Promise<ChildrenRun> {
  const { list, parentHero } = await setUp(ctx, variant, n);
  const window = await openWindow(ctx.dataSource, ctx.options.db);
  const started = performance.now();
  const outcome = await perform(ctx, variant, list, parentHero);
  const wallMs = performance.now() - started;
  const cost: WindowCost = await window.close();
  await check(ctx, n, outcome);
  return {
    variant,
    workflows: n,
    load: { start: cost.loadStart, end: cost.loadEnd },
    wallMs,
    nodeCpuMsPerWorkflow: round(cost.nodeCpuMs / n),
    ...(cost.serverCpuMs === undefined ? {} : { serverCpuMsPerWorkflow: round(cost.serverCpuMs / n) }),
  };
}

/** Every statement the process issued for one run of a variant (the parent's included), divided by N. */
export async function countChildrenVariant(ctx: BenchContext, variant: ChildrenVariant, n: number): Promise<ChildrenCount> {
  const { list, parentHero } = await setUp(ctx, variant, n);
  const statements: Array<{ query: string }> = (ctx.recorder.recording = []);
  let outcome: { ids?: string[]; parentId?: string };
  try {
    outcome = await perform(ctx, variant, list, parentHero);
  } finally {
    ctx.recorder.recording = null;
  }
  await check(ctx, n, outcome);
  const byKind: Record<string, number> = {};
  for (const { query } of statements) byKind[statementKind(query)] = (byKind[statementKind(query)] ?? 0) + 1;
  return {
    variant,
    workflows: n,
    statementsPerWorkflow: round(statements.length / n),
    statementsByKind: Object.fromEntries(Object.entries(byKind).sort(([, a], [, b]) => b - a).map(([kind, count]) => [kind, round(count / n)])),
  };
}

/** Two completed executions of each workflow, and nothing else. */
async function verifyExecutions(ctx: BenchContext, ids: string[], what: string): Promise<void> {
  const executions = await ctx.dataSource.getRepository(StepExecution).find({ where: { workflowId: In(ids) }, select: { state: true, outcome: true } });
  const completed = executions.filter((e) => e.state === 'completed' && e.outcome === 'success').length;
  assert(executions.length === 2 * ids.length && completed === 2 * ids.length, `${what}: ${executions.length} executions of ${ids.length} workflows (${completed} completed/success), expected ${2 * ids.length}`);
}

async function verifyIndependent(ctx: BenchContext, ids: string[]): Promise<void> {
  const finished = await ctx.dataSource.getRepository(WorkflowRecord).count({ where: { id: In(ids), state: 'finished', parentId: IsNull() } });
  assert(finished === ids.length, `${CHILD_WORKFLOW} (independent) check failed: ${finished} of ${ids.length} finished`);
  await verifyExecutions(ctx, ids, `${CHILD_WORKFLOW} (independent)`);
}

/** The parent finished, every one of its N children finished (each once, each reported), and its fan-in body saw all N. */
async function verifyChildren(ctx: BenchContext, n: number, parentId: string): Promise<void> {
  const repository = ctx.dataSource.getRepository(WorkflowRecord);
  const parent = await repository.findOneByOrFail({ id: parentId });
  assert(parent.state === 'finished', `${FAN_OUT_WORKFLOW} check failed: the parent is ${parent.state}`);
  const children = await repository.find({ where: { parentId }, select: { id: true, state: true, type: true, parentStepName: true, childKey: true } });
  const finished = children.filter((child) => child.state === 'finished' && child.type === CHILD_WORKFLOW && child.parentStepName === 'fanOut');
  const keys = new Set(children.map((child) => child.childKey));
  assert(children.length === n && finished.length === n && keys.size === n, `${FAN_OUT_WORKFLOW} check failed: ${children.length} children (${finished.length} finished, ${keys.size} keys), expected ${n}`);
  const fanIn = await probe.fanIn.wait(parentId, 1_000, 'the fan-in body');
  assert(fanIn.children === n && fanIn.finished === n && fanIn.keys === n, `${FAN_OUT_WORKFLOW} check failed: the fan-in body saw ${fanIn.children} children (${fanIn.finished} finished, ${fanIn.keys} keys), expected ${n}`);
  await verifyExecutions(ctx, children.map((child) => child.id), `${FAN_OUT_WORKFLOW}'s children`);
  const parentExecutions = await ctx.dataSource.getRepository(StepExecution).count({ where: { workflowId: parentId, state: 'completed', outcome: 'success' } });
  assert(parentExecutions === 2, `${FAN_OUT_WORKFLOW} check failed: ${parentExecutions} completed executions, expected 2 (fanOut, fanIn)`);
  // Each child's end was reported (and the reports are cleared for the next run).
  await Promise.all(children.map((child) => probe.childFinished.wait(child.id, 1_000, 'the finished child')));
  const strays = await repository.count({ where: { type: CHILD_WORKFLOW, parentId: Not(IsNull()), state: In(['ready', 'performing', 'paused']) } });
  assert(strays === 0, `${FAN_OUT_WORKFLOW} check failed: ${strays} children still ongoing`);
}
