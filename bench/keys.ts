/**
 * Concurrency keys: what a key costs, and how fast a freed slot wakes the next waiter.
 *
 * - Statements: the shape (a → b waiting for `payment_confirmed`) with a concurrency key per
 *   workflow (its hero's, limit 1: never contended) beside the plain shape, counted as the shape
 *   scenario counts them, in both arrival orders; the extra statements per step are gated.
 * - Wake: SLOT_KEYS keys of limit 1, each handed on by `perKey` workflows of one keyed step started
 *   at once. For every execution that waited for its slot, from the end of the body that held the
 *   key before it (its outcome, which frees the slot and sends the wake, comes next) to the first
 *   line of its own body — counted once every first job has run (the waiters queued, as a signal's
 *   waiters are parked before it is sent), so that a wake does not wait behind the start's backlog;
 *   beside signal → body of the engine scenario run as SLOT_KEYS sequences side by side (the same
 *   parallelism), measured in the same run.
 */
import { In } from 'typeorm';
import { StepExecution, WorkflowRecord } from 'geneva-drive';
import { BenchHero, BenchSlotWorkflow, probe, SLOT_KEYS, SLOT_WORKFLOW } from './app.js';
import { assert, type BenchContext } from './scenarios.js';
import { forEachLimited, summarize, type Summary } from './stats.js';

/** Issue #27's goals: at most this many statements more per step with an uncontended key, and a slot's wake within this many times a signal's. */
export const KEY_STATEMENT_GOAL = 2;
export const KEY_WAKE_GOAL = 2;
const LANES = 16;
const TIMEOUT_MS = 300_000;

export interface SlotWakes {
  keys: number;
  workflows: number;
  /** Executions that waited for their key's slot and were woken by the end before them. */
  woken: number;
  /** End of the holder's body → first line of the woken body. */
  wake: Summary;
}

/** SLOT_KEYS keys handed on by `perKey` workflows each, started at once; the wakes of those that waited. */
export async function measureSlotWakes(ctx: BenchContext, perKey: number): Promise<SlotWakes> {
  const n = SLOT_KEYS * perKey;
  probe.slotBodies.length = 0;
  probe.slotWaited.clear();
  probe.slotFirstJobs.clear();
  probe.slotBlock = perKey;
  const list = (await ctx.bulk.insertHeroes(n)).map((id) => Object.assign(new BenchHero(), { id, label: `hero-${id}` }));
  const ids: string[] = [];
  const done: Array<Promise<unknown>> = [];
  await forEachLimited(list, LANES, async (hero) => {
    const workflow = await ctx.workflows.start(BenchSlotWorkflow, hero);
    ids.push(workflow.id);
    done.push(probe.slotFinished.wait(workflow.id, TIMEOUT_MS, 'the finished workflow'));
  });
  await Promise.all(done);
  await verify(ctx, ids);

  // Every first job has run: from here on, the queue holds wakes only.
  const queued = Math.max(...ids.map((id) => probe.slotFirstJobs.get(id) ?? Infinity));
  const wakes: number[] = [];
  const byKey = new Map<string, typeof probe.slotBodies>();
  for (const body of probe.slotBodies) byKey.set(body.key, [...(byKey.get(body.key) ?? []), body]);
  for (const bodies of byKey.values()) {
    bodies.sort((x, y) => x.began - y.began);
    for (let i = 1; i < bodies.length; i++) {
      // Limit 1: each body began after the one before it ended; only a waiter's start is a wake.
      assert(bodies[i].began >= bodies[i - 1].ended, `${SLOT_WORKFLOW}: two bodies of ${bodies[i].key} overlapped`);
      if (probe.slotWaited.has(bodies[i].workflowId) && bodies[i - 1].ended >= queued) wakes.push(bodies[i].began - bodies[i - 1].ended);
    }
  }
  return { keys: SLOT_KEYS, workflows: n, woken: wakes.length, wake: summarize(wakes) };
}

/** Every workflow finished with one completed execution, and every key's row is free. */
async function verify(ctx: BenchContext, ids: string[]): Promise<void> {
  const finished = await ctx.dataSource.getRepository(WorkflowRecord).count({ where: { id: In(ids), state: 'finished' } });
  const completed = await ctx.dataSource.getRepository(StepExecution).count({ where: { workflowId: In(ids), state: 'completed', outcome: 'success' } });
  assert(finished === ids.length && completed === ids.length, `${SLOT_WORKFLOW} check failed: ${finished} of ${ids.length} finished, ${completed} completed executions`);
  const rows: Array<{ holding: unknown; waiters: unknown }> = await ctx.dataSource.query(`SELECT holding, waiters FROM geneva_drive_flow_keys WHERE holding <> 0 OR waiters <> '[]'`);
  assert(rows.length === 0, `${SLOT_WORKFLOW} check failed: ${rows.length} keys still held or waited for`);
}
