import type { EntityManager } from 'typeorm';
import type { StepExecution } from '../entities/step-execution.entity.js';
import { lockRateWindow, writeRateWindow } from '../persistence/flow-keys.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import { jobOptionsFor, type WorkflowStore } from '../persistence/workflow-store.js';
import { validKey } from './concurrency-slots.js';
import type { Prepared } from './step-run.js';

/** Where an execution keeps the start its rate window promised it (its metadata). */
const PROMISE = 'rateWindow';

/** A start the window allows: `record` writes it, once every later gate passed too. */
export interface RateStart {
  at: Date;
  record(): Promise<void>;
}

/**
 * Rate limits (`rateLimit: { key, limit, per }`): at most `limit` executions holding a key start in
 * any window of `per`, across every process. Exact by the starts themselves: every start is decided
 * under the lock of the key's row, against the key's latest `limit` starts (`s`), at the time it
 * records as the execution's `started_at` — so the check holds for any window, by the hosts' clocks.
 *
 * An execution over the rate does not poll: it is given the earliest time the claims made so far
 * (`c`: starts, and times promised to others) leave free, scheduled for it with one delayed job,
 * and keeps that promise in its metadata. Claims are handed out in arrival order, `limit` per
 * window, each time to one execution only. A promised execution, when its time comes, is checked
 * against the starts alone (its claim was counted already); when starts made late by a busy queue
 * took its window, it gets a new claim the same way, never the window over its limit. An execution
 * canceled before its time leaves its claim unused.
 */
export class RateWindows {
  constructor(
    private readonly store: WorkflowStore,
    private readonly schema: SchemaCapabilities,
  ) {}

  /**
   * Phase 1's gate (before the concurrency key's): the start it allows, or null when the execution
   * now waits for its window — scheduled for it, with its job, in this transaction.
   */
  async admit(manager: EntityManager, prepared: Prepared): Promise<RateStart | null> {
    const { step, instance, execution } = prepared;
    const { key: keyOf, limit, perMs } = step.rateLimit!;
    this.schema.assertRateLimits(`rateLimit on step "${step.name}"`);
    const key = validKey(step.name, keyOf(instance), 'rateLimit');
    // The key's row alone: the phase's pending writes (its rows, locked already) need not go first.
    this.store.assertLocked(manager);
    const window = await lockRateWindow(manager, key, this.store.now());
    // Read under the lock: the starts of one key are decided one after the other, in time order.
    const now = this.store.now();
    const t = now.getTime();
    const promised = promiseOf(execution, key);
    // Its job ran early (a duplicate, a redelivery): the job of its time comes.
    if (promised !== undefined && t < promised) return null;
    // A promise is kept when the starts allow it now (its claim was counted already). Otherwise — a
    // newcomer, or a promise that starts made late took — a claim at the earliest time the claims
    // leave free, so that nobody shares it (a promise taken is never handed out again).
    const kept = promised !== undefined && freeAfter(window.s, limit, perMs) <= t;
    const at = kept ? t : Math.max(t, freeAfter(window.s, limit, perMs), freeAfter(window.c, limit, perMs));
    if (at > t) {
      window.c = added(window.c, at, limit);
      await writeRateWindow(manager, key, window, now);
      await this.waitUntil(manager, prepared, key, at);
      prepared.logger.log(`Rate limit of key "${key}" reached: the step is scheduled for ${new Date(at).toISOString()}`);
      return null;
    }
    return {
      at: now,
      record: async () => {
        window.s = added(window.s, t, limit);
        if (!kept) window.c = added(window.c, t, limit);
        await writeRateWindow(manager, key, window, now);
      },
    };
  }

  /** The execution scheduled for `at`, its promise kept, and its job for then. */
  private async waitUntil(manager: EntityManager, prepared: Prepared, key: string, at: number): Promise<void> {
    const { execution, workflow, definition, step } = prepared;
    const changes: Partial<StepExecution> = { scheduledFor: new Date(at), metadata: { ...(execution.metadata ?? {}), [PROMISE]: { key, at } } };
    await this.store.updateRow<StepExecution>(manager, 'executions', execution.id, changes);
    Object.assign(execution, changes);
    // A job id of its own: the execution's first job is done, and a queue keeps ids it ran.
    await this.store.enqueue(manager, workflow, execution, jobOptionsFor(definition, step), `${execution.id}-rate-${at.toString(36)}`);
  }
}

/** The time the window promised the execution for this key, if it did. */
function promiseOf(execution: StepExecution, key: string): number | undefined {
  const promise = execution.metadata?.[PROMISE] as { key: string; at: number } | undefined;
  return promise?.key === key ? promise.at : undefined;
}

/** The earliest time, in ms, that `times` (ascending) leave a start free under `limit` per `perMs`. */
function freeAfter(times: readonly number[], limit: number, perMs: number): number {
  return times.length < limit ? -Infinity : times[times.length - limit] + perMs;
}

/**
 * `times` with `time` in its place, keeping as many of the latest as the largest limit that wrote
 * them needs (steps sharing a key with different limits each check their own).
 */
function added(times: readonly number[], time: number, limit: number): number[] {
  const kept = Math.max(limit, times.length);
  return [...times, time].sort((a, b) => a - b).slice(-kept);
}
