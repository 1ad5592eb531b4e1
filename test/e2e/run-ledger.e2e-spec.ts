/**
 * The run ledger (libs/geneva-drive/src/queue/run-ledger.ts) on a real Redis, through Bull's client:
 * the record a worker keeps of the jobs it starts itself, under a lease, and how another worker takes
 * the runs of a dead one over. Each "process" here is a ledger of its own on its own Bull queue
 * handle (its own Redis connection); a dead one is one whose connection is gone. Leases of 400 ms.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import Bull from 'bull';
import type { LoggerService } from '@nestjs/common';
import type { StepJob } from 'geneva-drive';
import { bullRunLedger } from '../../libs/geneva-drive/src/queue/bull-queue.adapter.js';
import { RunLedger } from '../../libs/geneva-drive/src/queue/run-ledger.js';
import { waitUntil } from '../src/bull-wait.js';
import { redisAvailable, redisUrl } from '../utils/databases.js';

const QUEUE_NAME = 'geneva-drive-ledger';
const silent: LoggerService = { log: () => undefined, warn: () => undefined, error: () => undefined };

const job = (executionId: string, jobId?: string): StepJob => ({ executionId, runAt: new Date(), jobOptions: {}, hints: { workflowId: `w${executionId}` }, ...(jobId ? { jobId } : {}) });

const describeRedis = redisAvailable() ? describe : describe.skip;

describeRedis('the run ledger on Redis', () => {
  let test = 0;
  const opened: Array<{ queue: Bull.Queue; ledger: RunLedger }> = [];
  let prefix = '';

  /** A worker's ledger; `takenOver` collects what it puts back on the queue. */
  const worker = async (takenOver: StepJob[] = [], takeOver = async (taken: StepJob) => void takenOver.push(taken)) => {
    const queue = new Bull(QUEUE_NAME, redisUrl(), { prefix, settings: { lockDuration: 400 } });
    const ledger = bullRunLedger(queue, silent);
    opened.push({ queue, ledger });
    await ledger.start(takeOver);
    return { queue, ledger, takenOver };
  };
  const keys = (queue: Bull.Queue) => queue.client.keys(`${prefix}:${QUEUE_NAME}:gd-*`);
  const runsOf = (queue: Bull.Queue, ledger: RunLedger) => queue.client.hgetall(queue.toKey(`gd-runs:${ledger.token}`));

  afterEach(async () => {
    for (const { queue, ledger } of opened.splice(0)) {
      await ledger.stop();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
    }
  });

  const fresh = () => (prefix = `gd-e2e-ledger-${process.pid}-${++test}`);

  it('records a run from its start to its end, and a clean stop leaves no lease and no runs behind', async () => {
    fresh();
    const { queue, ledger } = await worker();
    ledger.begin(job('1'));
    ledger.begin(job('2', '2-wake-7'));
    await waitUntil('both runs recorded', async () => Object.keys(await runsOf(queue, ledger)).length === 2);
    expect(Object.keys(await runsOf(queue, ledger)).sort()).toEqual(['1', '2-wake-7']);
    ledger.end(job('1'));
    await waitUntil('the first run dropped', async () => Object.keys(await runsOf(queue, ledger)).join() === '2-wake-7');
    ledger.end(job('2', '2-wake-7'));
    await ledger.stop();
    expect(await keys(queue)).toEqual([]);
  });

  it('says the runs recorded so far are written only once Redis answered their HSET', async () => {
    fresh();
    const queue = new Bull(QUEUE_NAME, redisUrl(), { prefix, settings: { lockDuration: 400 } });
    const client = queue.client;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // Bull's client as bullRunLedger gives it, its HSET held until released.
    const ledger = new RunLedger(
      async () => ({
        defineCommand: (name, definition) => client.defineCommand(name, definition),
        run: async () => null,
        hset: async (key, data) => {
          await held;
          return client.hset(key, data);
        },
        hdel: (key, ...fields) => client.hdel(key, ...fields),
      }),
      () => ({ keyPrefix: queue.toKey(''), leaseMs: 400 }),
      silent,
    );
    opened.push({ queue, ledger });
    ledger.begin(job('1'));
    let written = false;
    const settled = ledger.written().then(() => (written = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toBe(false);
    release();
    await settled;
    expect(Object.keys(await runsOf(queue, ledger))).toEqual(['1']);
  });

  /** A ledger on Bull's client, as bullRunLedger gives it, that notes the fields of each HDEL it sends. */
  const countingDrops = (queue: Bull.Queue) => {
    const client = queue.client as unknown as Record<string, (...args: Array<string | number>) => Promise<unknown>> & typeof queue.client;
    const drops: string[][] = [];
    const ledger = new RunLedger(
      async () => ({
        defineCommand: (name, definition) => client.defineCommand(name, definition),
        run: (name, args) => client[name](...args),
        hset: (key, data) => client.hset(key, data),
        hdel: (key, ...fields) => {
          drops.push(fields);
          return client.hdel(key, ...fields);
        },
      }),
      () => ({ keyPrefix: queue.toKey(''), leaseMs: 400 }),
      silent,
    );
    opened.push({ queue, ledger });
    return { ledger, drops };
  };

  it('drops the runs that end close together with one HDEL', async () => {
    fresh();
    const queue = new Bull(QUEUE_NAME, redisUrl(), { prefix, settings: { lockDuration: 400 } });
    const { ledger, drops } = countingDrops(queue);
    for (const id of ['1', '2', '3']) ledger.begin(job(id));
    await ledger.written();
    for (const id of ['1', '2', '3']) ledger.end(job(id));
    await waitUntil('the ended runs dropped', async () => Object.keys(await runsOf(queue, ledger)).length === 0);
    expect(drops).toEqual([['1', '2', '3']]);
  });

  it('a run taken again before its end was dropped keeps its record', async () => {
    fresh();
    const queue = new Bull(QUEUE_NAME, redisUrl(), { prefix, settings: { lockDuration: 400 } });
    const { ledger, drops } = countingDrops(queue);
    ledger.begin(job('1'));
    ledger.begin(job('2'));
    ledger.end(job('1'));
    ledger.end(job('2'));
    ledger.begin(job('1'));
    await waitUntil('the ended run dropped', () => drops.length > 0);
    await queue.client.ping();
    expect(drops).toEqual([['2']]);
    expect(Object.keys(await runsOf(queue, ledger))).toEqual(['1']);
  });

  it('keeps a job taken twice recorded until both runs end', async () => {
    fresh();
    const { queue, ledger } = await worker();
    ledger.begin(job('1'));
    ledger.begin(job('1'));
    ledger.end(job('1'));
    // A later command on the same connection returns once the writes before it are done.
    await queue.client.ping();
    expect(Object.keys(await runsOf(queue, ledger))).toEqual(['1']);
    ledger.end(job('1'));
    await waitUntil('the run dropped', async () => Object.keys(await runsOf(queue, ledger)).length === 0);
  });

  it('knows when it is alone on the queue: a second live lease ends that at its next renewal, and tells the listener once; an expired one does not count', async () => {
    fresh();
    const first = await worker();
    let told = 0;
    first.ledger.onShared(() => told++);
    expect(first.ledger.isAlone).toBe(true);

    const second = await worker();
    expect(second.ledger.isAlone).toBe(false);
    await waitUntil('the first ledger sees the second lease', () => !first.ledger.isAlone);
    expect(told).toBe(1);

    // The second process dies: its renewals fail, its lease runs out, and the first is alone again.
    await second.queue.client.ping();
    second.queue.client.disconnect();
    await waitUntil('the first ledger alone again', () => first.ledger.isAlone);
    expect(told).toBe(1);
  });

  it('puts the runs of a worker whose lease expired back on the queue once, through one live worker, and drops them from its ledger', async () => {
    fresh();
    const dead = await worker();
    dead.ledger.begin(job('1'));
    dead.ledger.begin(job('2', '2-wake-7'));
    await dead.queue.client.ping();
    dead.queue.client.disconnect(); // renewals fail from now on: the lease runs out
    const [a, b] = await Promise.all([worker(), worker()]);
    await waitUntil('the dead worker’s runs taken over', () => a.takenOver.length + b.takenOver.length >= 2);
    const taken = [...a.takenOver, ...b.takenOver];
    expect(taken.map((t) => [t.executionId, t.jobId, t.hints?.workflowId]).sort()).toEqual([
      ['1', undefined, 'w1'],
      ['2', '2-wake-7', 'w2'],
    ]);
    // One claimer took both, and keeps nothing once they are back on the queue.
    expect(a.takenOver.length === 0 || b.takenOver.length === 0).toBe(true);
    await waitUntil('the claimer’s ledger empty', async () => Object.keys({ ...(await runsOf(a.queue, a.ledger)), ...(await runsOf(b.queue, b.ledger)) }).length === 0);
    expect(await a.queue.client.zscore(a.queue.toKey('gd-leases'), dead.ledger.token)).toBeNull();
  });

  it('a run claimed from a dead worker keeps its record while it goes back on the queue, though a run of the same job ended here', async () => {
    fresh();
    const dead = await worker();
    dead.ledger.begin(job('1'));
    await dead.queue.client.ping();
    dead.queue.client.disconnect();
    // The claimer notes the fields of each HDEL, and holds the claimed run's way back to the queue.
    const queue = new Bull(QUEUE_NAME, redisUrl(), { prefix, settings: { lockDuration: 400 } });
    const { ledger, drops } = countingDrops(queue);
    let putBack!: () => void;
    const held = new Promise<void>((resolve) => (putBack = resolve));
    const takenOver: StepJob[] = [];
    // Its first renewal claims the run, and start() settles once that renewal has put it back.
    const started = ledger.start(async (taken) => {
      takenOver.push(taken);
      await held;
    });
    try {
      await waitUntil('the dead worker’s run claimed', () => takenOver.length === 1);
      // Meanwhile the same job runs here (its duplicate from Redis), and another beside it; both end.
      ledger.begin(job('1'));
      ledger.begin(job('2'));
      ledger.end(job('1'));
      ledger.end(job('2'));
      await waitUntil('the ended runs dropped', () => drops.length > 0);
      await queue.client.ping();
      // Should this worker die now, the claimed run is still in its ledger for the next one to take over.
      expect(drops).toEqual([['2']]);
      expect(Object.keys(await runsOf(queue, ledger))).toEqual(['1']);
    } finally {
      putBack(); // stop() waits for the renewal that puts it back
    }
    await started;
    await waitUntil('the claimed run dropped once back on the queue', async () => Object.keys(await runsOf(queue, ledger)).length === 0);
  });

  it('a claimer that cannot put the runs back keeps them in its own ledger, for the next worker once it dies too', async () => {
    fresh();
    const dead = await worker();
    dead.ledger.begin(job('1'));
    await dead.queue.client.ping();
    dead.queue.client.disconnect();
    const failing = await worker([], () => Promise.reject(new Error('Redis refused the add')));
    await waitUntil('the run moved into the claimer’s ledger', async () => Object.keys(await runsOf(failing.queue, failing.ledger)).join() === '1');
    failing.queue.client.disconnect();
    const next = await worker();
    await waitUntil('the run taken over by the next worker', () => next.takenOver.length === 1);
    expect(next.takenOver[0].executionId).toBe('1');
  });

  it('writes its runs again when Redis lost them with its lease (a restart without persistence)', async () => {
    fresh();
    const { queue, ledger } = await worker();
    ledger.begin(job('1'));
    await queue.client.ping();
    await queue.client.del(queue.toKey('gd-leases'), queue.toKey(`gd-runs:${ledger.token}`));
    await waitUntil('the run recorded again', async () => Object.keys(await runsOf(queue, ledger)).join() === '1');
    expect(await queue.client.zscore(queue.toKey('gd-leases'), ledger.token)).not.toBeNull();
    ledger.end(job('1'));
  });
});
