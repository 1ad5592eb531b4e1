/**
 * DueJobStarter's scheduling and the slots of StepJobGate, with step bodies the test finishes by
 * hand. Jobs the queue delivers enter through `gate.run`, as the Bull and BullMQ processors call it;
 * what would reach Redis is what `add` receives (the adapters pass their own add there, and the queue
 * specs cover that path on Redis).
 */
import { describe, expect, it } from '@jest/globals';
import { Logger } from '@nestjs/common';
import { DueJobStarter, type StarterLedger } from './due-job-starter.js';
import type { StepJob } from '../interfaces/queue.port.js';
import { StepJobGate } from './step-job-gate.js';

interface Harness {
  starter: DueJobStarter;
  gate: StepJobGate;
  /** Execution ids the handler was called with, in order. */
  ran: string[];
  /** Execution ids `add` received, in order. */
  added: string[];
  /** Most bodies running at once. */
  peak(): number;
  /** Hands `executionId` over as the queue's consumer does. */
  deliver(executionId: string): Promise<void>;
  /** Finishes the running body of `executionId`. */
  finish(executionId: string): void;
  tryStart(executionId: string, options?: { reportAdded?: boolean; chain?: boolean; runAt?: Date }): boolean;
}

function harness(concurrency: number, holdMs: number, ledger?: StarterLedger, prioritized?: () => boolean): Harness {
  const gate = new StepJobGate(concurrency);
  const starter = new DueJobStarter(gate, true, new Logger('due-job-starter.spec'), holdMs, ledger, prioritized);
  const ran: string[] = [];
  const added: string[] = [];
  const bodies = new Map<string, () => void>();
  let running = 0;
  let peak = 0;
  gate.start((executionId) => {
    ran.push(executionId);
    peak = Math.max(peak, ++running);
    return new Promise<void>((resolve) => bodies.set(executionId, resolve)).finally(() => running--);
  });
  const job = (executionId: string, chain?: boolean, runAt = new Date()): StepJob => ({ executionId, runAt, jobOptions: chain === undefined ? {} : { chain } });
  return {
    starter,
    gate,
    ran,
    added,
    peak: () => peak,
    deliver: (executionId) => gate.run(executionId, executionId),
    finish: (executionId) => bodies.get(executionId)!(),
    tryStart: (executionId, options) =>
      starter.tryStart(job(executionId, options?.chain, options?.runAt), async (held) => void added.push(held.executionId), options),
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A RunLedger that records nothing, alone on the queue until `share()` says another process took a lease. */
function loneLedger(): StarterLedger & { share(): void } {
  let alone = true;
  let shared = () => undefined as void;
  return {
    begin: () => undefined,
    end: () => undefined,
    written: async () => undefined,
    start: async () => undefined,
    stop: async () => undefined,
    get isAlone() {
      return alone;
    },
    onShared: (listener) => (shared = listener),
    share: () => {
      alone = false;
      shared();
    },
  };
}

describe('DueJobStarter', () => {
  it('starts a due job at once while a slot is free', async () => {
    const h = harness(2, 60_000);
    expect(h.tryStart('e1')).toBe(true);
    expect(h.tryStart('e2')).toBe(true);
    await turn();
    expect(h.ran).toEqual(['e1', 'e2']);
    expect(h.added).toEqual([]);
    h.finish('e1');
    h.finish('e2');
    await h.starter.settle();
  });

  it('holds a due job while every slot is busy and starts it here when one frees, without adding it', async () => {
    const h = harness(1, 60_000);
    h.tryStart('e1');
    await turn();
    expect(h.tryStart('e2')).toBe(true);
    await turn();
    expect(h.ran).toEqual(['e1']);

    h.finish('e1');
    await turn();
    expect(h.ran).toEqual(['e1', 'e2']);
    h.finish('e2');
    await h.starter.settle();
    expect(h.added).toEqual([]);
  });

  it('adds a held job to the queue when no slot frees in time, and never runs it here', async () => {
    const h = harness(1, 5);
    h.tryStart('e1');
    await turn();
    h.tryStart('e2');
    await sleep(30);
    expect(h.added).toEqual(['e2']);

    h.finish('e1');
    await turn();
    expect(h.ran).toEqual(['e1']);
    await h.starter.settle();
  });

  it('holds at most `concurrency` jobs: the next one goes to the queue at once', async () => {
    const h = harness(2, 60_000);
    h.tryStart('e1');
    h.tryStart('e2');
    await turn();
    expect([h.tryStart('e3'), h.tryStart('e4'), h.tryStart('e5')]).toEqual([true, true, false]);

    h.finish('e1');
    h.finish('e2');
    await turn();
    expect(h.ran).toEqual(['e1', 'e2', 'e3', 'e4']);
    h.finish('e3');
    h.finish('e4');
    await h.starter.settle();
    expect(h.added).toEqual([]);
  });

  it('alone on the queue, keeps its backlog beyond `concurrency` past `maxDuration` and runs it here in order, adding nothing', async () => {
    const h = harness(1, 5, loneLedger());
    h.tryStart('e1');
    await turn();
    expect([h.tryStart('e2'), h.tryStart('e3'), h.tryStart('e4')]).toEqual([true, true, true]);
    // Past the 5 ms a held job waits while other processes work the queue.
    await sleep(30);
    expect(h.added).toEqual([]);

    for (const id of ['e1', 'e2', 'e3']) {
      h.finish(id);
      await turn();
    }
    expect(h.ran).toEqual(['e1', 'e2', 'e3', 'e4']);
    h.finish('e4');
    await h.starter.settle();
    expect(h.added).toEqual([]);
    expect(h.peak()).toBe(1);
  });

  it('alone on the queue but with job priorities in the application, holds at most `concurrency` jobs: the queue orders the rest', async () => {
    const h = harness(1, 60_000, loneLedger(), () => true);
    h.tryStart('e1');
    await turn();
    expect([h.tryStart('e2'), h.tryStart('e3')]).toEqual([true, false]);
    h.finish('e1');
    await turn();
    h.finish('e2');
    await h.starter.settle();
    expect(h.ran).toEqual(['e1', 'e2']);
  });

  it('once another process takes a lease, sends the jobs it holds beyond `concurrency` to the queue, the newest first, and holds no more than that again', async () => {
    const ledger = loneLedger();
    const h = harness(1, 60_000, ledger);
    h.tryStart('e1');
    await turn();
    h.tryStart('e2');
    h.tryStart('e3');
    h.tryStart('e4');
    ledger.share();
    expect(h.added).toEqual(['e4', 'e3']);
    expect(h.tryStart('e5')).toBe(false);

    h.finish('e1');
    await turn();
    expect(h.ran).toEqual(['e1', 'e2']);
    h.finish('e2');
    await turn();
    expect(h.ran).toEqual(['e1', 'e2']);
    await h.starter.settle();
    expect(h.added).toEqual(['e4', 'e3']);
  });

  it('shares the slots with the jobs the queue delivers: never more than `concurrency` at once, each waiting job in the order it came', async () => {
    const h = harness(2, 60_000);
    const delivered = [h.deliver('q1'), h.deliver('q2')];
    await turn();
    expect(h.tryStart('e1')).toBe(true);
    delivered.push(h.deliver('q3'));
    await turn();
    expect(h.ran).toEqual(['q1', 'q2']);

    h.finish('q1');
    await turn();
    expect(h.ran).toEqual(['q1', 'q2', 'e1']);
    h.finish('q2');
    await turn();
    expect(h.ran).toEqual(['q1', 'q2', 'e1', 'q3']);
    h.finish('e1');
    h.finish('q3');
    await Promise.all(delivered);
    await h.starter.settle();
    expect(h.peak()).toBe(2);
    expect(h.added).toEqual([]);
  });

  it('adds the jobs it still holds when the process stops, and waits for the running ones', async () => {
    const h = harness(1, 60_000);
    h.tryStart('e1');
    await turn();
    h.tryStart('e2');
    h.gate.refuse();
    const settled = h.starter.settle();
    expect(h.added).toEqual(['e2']);
    let done = false;
    void settled.then(() => (done = true));
    await turn();
    expect(done).toBe(false);

    h.finish('e1');
    await settled;
    expect(h.ran).toEqual(['e1']);
  });

  it('leaves to the queue the jobs it may not start: not due yet, unchained steps, re-enqueues that ask whether a job was added, a stopping gate', async () => {
    const h = harness(1, 60_000);
    expect(h.tryStart('later', { runAt: new Date(Date.now() + 60_000) })).toBe(false);
    expect(h.tryStart('unchained', { chain: false })).toBe(false);
    expect(h.tryStart('recovered', { reportAdded: true })).toBe(false);
    h.gate.refuse();
    expect(h.tryStart('stopping')).toBe(false);
    await turn();
    expect(h.ran).toEqual([]);
  });
});
