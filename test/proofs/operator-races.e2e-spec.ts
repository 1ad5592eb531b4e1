/**
 * Operator actions racing signals and steps across processes. Bull worker processes (two; one in
 * the short run) run ProofWorkflow (prepare → awaitGo waiting for its signal → work); a separate
 * sender process starts workflows and signals each with its idempotency key (a fifth twice);
 * meanwhile this process, the operator, fires pause / resume / skip / cancel at the workflows in
 * flight from two concurrent loops. When the sender is done, the operator resumes whatever is
 * paused until every workflow is finished or canceled (housekeeping runs every second meanwhile,
 * thresholds of 2 s).
 *
 * That the actions work is not left to how the machine's speed lines them up with the steps: during
 * the stream the operator holds a worker's bodies until one waits, and a skip of its (performing)
 * workflow must be refused; three workflows that the operator starts itself and the sender never
 * signals are, once parked at awaitGo, paused (then signaled and resumed), skipped and canceled,
 * each of which must apply.
 *
 * Read back: an action is either applied or refused with InvalidStateError, nothing else; the state
 * machine stays valid (each execution's state, outcome and timestamps agree; a workflow's
 * executions never go back a step; a finished workflow went through its last step; nothing active
 * is left); never two active executions (sampled); no body ran twice; no signal lost or doubled — a
 * workflow's key is stored at most once, consumed at most once, `claimed` matches the executions
 * pinned to it, a body that ran received exactly that signal, and a signal left unconsumed belongs
 * to a workflow that was canceled or whose waiting step was skipped before it attached; a signal
 * refused with WorkflowNotOngoingError was for a workflow already over, and was not stored.
 *
 * Size: GD_PROOF_SCALE=full for the long run (npm run test:proofs), the short run otherwise.
 */
import { expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { InvalidStateError, SignalService, StepExecution, WorkflowService } from 'geneva-drive';
import { sleep, waitUntil } from '../src/bull-wait.js';
import type { DatabaseKind } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';
import { describeProof, outputOf, proofFigures, type ProofChild, proofSuite, scaled, snapshot, waitForWorkflows, type ProofSnapshot } from './src/proof-harness.js';
import { GO, goKey, ProofWorkflow } from './src/proof-workflows.js';

const WORKERS = scaled(1, 2);
const WORKFLOWS = scaled(50, 300);
const START_GAP_MS = 60;
const OPERATORS = 2;
/** Each operator loop pauses a random time in this range between two actions. */
const ACTION_GAP_MS = [20, 80] as const;
/** Actions are aimed at the most recently started workflows: those in flight. */
const TARGET_WINDOW = 15;
const ACTIONS = [
  ['pause', 0.36],
  ['resume', 0.4],
  ['skip', 0.18],
  ['cancel', 0.06],
] as const;
type Action = (typeof ACTIONS)[number][0];
/** The actions that must apply to a parked workflow, one workflow of the operator's own each. */
const PARKED_ACTIONS = ['pause', 'skip', 'cancel'] as const;
const STEPS = ['prepare', 'awaitGo', 'work'];
const SETTLE_TIMEOUT_MS = scaled(90_000, 180_000);

/** A random action by weight; while some action has not been applied yet, that one half the time. */
function pickAction(applied: Record<Action, number>): Action {
  const missing = ACTIONS.map(([action]) => action).filter((action) => applied[action] === 0);
  if (missing.length > 0 && Math.random() < 0.5) return missing[Math.floor(Math.random() * missing.length)];
  let roll = Math.random();
  for (const [action, weight] of ACTIONS) if ((roll -= weight) < 0) return action;
  return 'resume';
}

/** (state, outcome) pairs an execution may end with, and the timestamp its state stamps. */
const TERMINAL: Record<string, { outcomes: string[]; stamp: keyof StepExecution }> = {
  completed: { outcomes: ['success', 'recovered', 'reattempted', 'continued'], stamp: 'completedAt' },
  skipped: { outcomes: ['skipped'], stamp: 'skippedAt' },
  canceled: { outcomes: ['canceled', 'recovered'], stamp: 'canceledAt' },
  failed: { outcomes: ['failed', 'canceled'], stamp: 'failedAt' },
};

/** The state machine, read back: every problem found. */
function stateProblems(snap: ProofSnapshot, ids: string[]): string[] {
  const problems: string[] = [];
  const byWorkflow = new Map<string, StepExecution[]>();
  for (const e of snap.executions) byWorkflow.set(e.workflowId, [...(byWorkflow.get(e.workflowId) ?? []), e]);
  const workflows = new Map(snap.workflows.map((w) => [w.id, w]));
  for (const id of ids) {
    const wf = workflows.get(id);
    const executions = byWorkflow.get(id) ?? [];
    const described = `${wf?.state}: ${executions.map((e) => `${e.stepName}#${e.id}:${e.state}/${e.outcome}`).join(' → ')}`;
    if (!wf || !['finished', 'canceled'].includes(wf.state) || !wf.finishedAt) problems.push(`workflow ${id} ended ${described}`);
    for (const e of executions) {
      const terminal = TERMINAL[e.state];
      if (!terminal || !terminal.outcomes.includes(String(e.outcome)) || !e[terminal.stamp] || !e.finishedAt) {
        problems.push(`workflow ${id} execution ${e.id} ended ${e.state}/${e.outcome} (${described})`);
      }
    }
    const order = executions.map((e) => STEPS.indexOf(e.stepName));
    if (order.some((step, i) => step < 0 || (i > 0 && step < order[i - 1]))) problems.push(`workflow ${id} went back a step: ${described}`);
    for (const step of STEPS) {
      if (executions.filter((e) => e.stepName === step && e.outcome === 'success').length > 1) problems.push(`workflow ${id} completed ${step} twice: ${described}`);
    }
    // A finished workflow went through its last step: completed, skipped, or canceled by a skip of the paused workflow.
    if (wf?.state === 'finished' && !executions.some((e) => e.stepName === 'work' && ['success', 'skipped', 'canceled'].includes(String(e.outcome)))) {
      problems.push(`workflow ${id} finished without its last step: ${described}`);
    }
  }
  return problems;
}

/** Signals and side effects, read back: every problem found. */
function deliveryProblems(snap: ProofSnapshot, ids: string[]): string[] {
  const problems: string[] = [];
  const workflows = new Map(snap.workflows.map((w) => [w.id, w]));
  for (const id of ids) {
    const signals = snap.signals.filter((s) => s.workflowId === id);
    const executions = snap.executions.filter((e) => e.workflowId === id);
    const effects = snap.sideEffects.filter((s) => s.workflowId === id);
    const executionsById = new Map(executions.map((e) => [e.id, e]));
    const show = () => `${workflows.get(id)?.state}: ${executions.map((e) => `${e.stepName}#${e.id}:${e.state}/${e.outcome}${e.signalId ? `@${e.signalId}` : ''}`).join(' → ')}; signals ${JSON.stringify(signals.map((s) => [s.id, s.state, s.claimed, s.consumed]))}`;
    // No body ran twice, and every body that ran completed its step — except in an execution that
    // housekeeping recovered while its body ran (slower than the proof's 2 s threshold on a loaded
    // machine): its successor runs the body again, the documented at-least-once of MANUAL §9.8.
    for (const step of STEPS) {
      const ran = effects.filter((s) => executionsById.get(s.executionId)?.outcome !== 'recovered' && s.step === step);
      if (ran.length > 1) problems.push(`workflow ${id} ran ${step} ${ran.length} times: ${show()}`);
      for (const effect of ran) if (executionsById.get(effect.executionId)?.outcome !== 'success') problems.push(`workflow ${id} ${step} ran in an execution that did not complete: ${show()}`);
    }
    if (signals.length > 1 || signals.some((s) => s.idempotencyKey !== goKey(id))) {
      problems.push(`workflow ${id} stored ${signals.length} signals: ${show()}`);
      continue;
    }
    const receipt = effects.find((s) => s.step === 'awaitGo');
    const [signal] = signals;
    if (!signal) {
      if (receipt) problems.push(`workflow ${id} ran awaitGo without a stored signal: ${show()}`);
      continue;
    }
    const pinned = executions.filter((e) => e.signalId === signal.id);
    const recovered = pinned.filter((e) => e.outcome === 'recovered').length;
    if (Number(signal.claimed) !== pinned.length - recovered) problems.push(`workflow ${id} signal claimed ${signal.claimed} times, pinned to ${pinned.length} executions (${recovered} recovered): ${show()}`);
    if (Number(signal.consumed) > 1) problems.push(`workflow ${id} signal consumed ${signal.consumed} times: ${show()}`);
    if (receipt && (receipt.signalId !== signal.id || signal.state !== 'consumed' || Number(signal.consumed) !== 1)) problems.push(`workflow ${id} awaitGo received ${receipt.signalId}: ${show()}`);
    if (signal.state === 'consumed' && !receipt && !pinned.some((e) => e.stepName === 'awaitGo' && ['skipped', 'canceled'].includes(String(e.outcome)))) {
      problems.push(`workflow ${id} signal consumed without its body running or its step being skipped: ${show()}`);
    }
    if (signal.state !== 'consumed') {
      // Not lost: the workflow was canceled, or its waiting step was skipped before it attached the signal.
      const skippedUnattached = executions.some((e) => e.stepName === 'awaitGo' && ['skipped', 'canceled'].includes(String(e.outcome)) && e.signalId === null);
      if (workflows.get(id)?.state !== 'canceled' && !skippedUnattached) problems.push(`workflow ${id} signal left ${signal.state}: ${show()}`);
    }
  }
  return problems;
}

function operatorSuite(kind: DatabaseKind, entry: () => string, children: Set<ChildProcess>): void {
  const suite = proofSuite(kind, entry, children, 'operator');

  it(`${WORKFLOWS} workflows under pause/resume/skip/cancel racing their signals and steps: valid states, no signal lost or doubled`, async () => {
    const began = Date.now();
    const { app, everyone, spawn } = suite;
    const workflows = app.moduleRef.get(WorkflowService);
    const signals = app.moduleRef.get(SignalService);
    const [sender, worker] = await Promise.all([spawn('sender'), ...Array.from({ length: WORKERS }, () => spawn('worker'))]);
    const booted = Date.now();
    const { sampler, housekeeping } = suite.watch();
    const heroes = app.dataSource.getRepository(TestHero);
    const own = await Promise.all(PARKED_ACTIONS.map(async (action) => ({ action, id: (await workflows.start(ProofWorkflow, await heroes.save(heroes.create({ name: `operator ${action}` })))).id })));
    sender.send({ type: 'run', workflows: WORKFLOWS, startGapMs: START_GAP_MS, signalDelayMaxMs: 400, redeliverEvery: 5, callTimeoutMs: 15_000, maxAttempts: 1, retryPauseMs: 0 });

    const applied: Record<Action, number> = { pause: 0, resume: 0, skip: 0, cancel: 0 };
    let refused = 0;
    const unexpected: string[] = [];
    const act = async (action: Action, id: string): Promise<'applied' | 'refused' | 'unexpected'> => {
      try {
        await workflows[action](id);
        applied[action]++;
        return 'applied';
      } catch (error) {
        if (error instanceof InvalidStateError) {
          refused++;
          return 'refused';
        }
        unexpected.push(`${action} ${id}: ${String(error)}`);
        return 'unexpected';
      }
    };
    // A skip of a workflow whose body the worker holds: it is performing, so the skip must be refused.
    const skipWhileHeld = async (holder: ProofChild) => {
      try {
        const executionId = await holder.holdBodyUntil(() => true, 30_000);
        if (executionId === undefined) return 'no body held';
        const { workflowId } = await app.dataSource.getRepository(StepExecution).findOneByOrFail({ id: executionId });
        return await act('skip', workflowId);
      } finally {
        holder.send({ type: 'release-bodies' });
      }
    };
    const refusedWhileHeld = sleep(500)
      .then(() => skipWhileHeld(worker))
      .catch((error: unknown) => String(error));
    const startedSoFar = () => sender.calls().filter((c) => c.op === 'start' && c.ok).map((c) => c.workflowId!);
    const operator = async () => {
      while (sender.of('done').length === 0) {
        sender.assertAlive('sender');
        await sleep(ACTION_GAP_MS[0] + Math.random() * (ACTION_GAP_MS[1] - ACTION_GAP_MS[0]));
        const startedNow = startedSoFar();
        const recent = startedNow.slice(-TARGET_WINDOW);
        if (recent.length === 0) continue;
        const action = pickAction(applied);
        // A resume is aimed at a paused workflow when there is one: aimed at random, whether any
        // resume applies would depend on how the machine's speed lines pauses up with picks.
        const paused = action === 'resume' ? (await workflows.findByState('paused')).map((w) => w.id).filter((id) => startedNow.includes(id)) : [];
        const targets = paused.length > 0 ? paused : recent;
        await act(action, targets[Math.floor(Math.random() * targets.length)]);
      }
    };
    await Promise.all(Array.from({ length: OPERATORS }, operator));
    const streamEnded = Date.now();
    // The operator's own workflows, each once parked at awaitGo (no signal comes for it): the paused
    // one gets its signal, and the resumer below resumes it.
    const parkedOutcomes: Record<string, string> = {};
    for (const { action, id } of own) {
      await waitUntil(
        `workflow ${id} parked at awaitGo`,
        async () => {
          const current = await workflows.currentExecution(id);
          return current?.stepName === 'awaitGo' && current.state === 'waiting';
        },
        { timeoutMs: 60_000 },
      );
      parkedOutcomes[action] = await act(action, id);
      if (action === 'pause') await signals.signal(id, GO, { payload: { workflowId: id, op: 'signal' }, idempotencyKey: goKey(id) });
    }

    // The operator resumes whatever is still paused until everything is finished or canceled.
    const sent = startedSoFar();
    const started = [...sent, ...own.map((o) => o.id)];
    const resumer = (async () => {
      for (;;) {
        const paused = (await workflows.findByState('paused')).map((w) => w.id);
        for (const id of paused) await act('resume', id);
        if (Date.now() - streamEnded > SETTLE_TIMEOUT_MS) return;
        const over = await app.dataSource.query(`SELECT COUNT(*) AS n FROM geneva_drive_workflows WHERE state IN ('finished', 'canceled')`);
        if (Number(over[0].n) === started.length) return;
        await sleep(300);
      }
    })();
    await waitForWorkflows(app.dataSource, started, ['finished', 'canceled'], SETTLE_TIMEOUT_MS, () => outputOf(everyone), suite.queue());
    await resumer;
    const hk = await housekeeping.stop();
    const sampled = await sampler.stop();
    const snap = await snapshot(app.dataSource);

    const calls = sender.calls();
    const refusedSignals = calls.filter((c) => !c.ok);
    const ended = Object.fromEntries(['finished', 'canceled'].map((state) => [state, snap.workflows.filter((w) => w.state === state).length]));
    proofFigures(
      `operator-races [${kind}] ${WORKFLOWS} workflows: applied ${JSON.stringify(applied)}, ${refused} refused (InvalidStateError), ` +
        `${refusedSignals.length} signals refused, ended ${JSON.stringify(ended)}, ${snap.signals.filter((s) => s.state !== 'consumed').length} signals unconsumed; ` +
        `boot ${booted - began} ms, stream ${streamEnded - booted} ms, total ${Date.now() - began} ms`,
    );

    // The actions work: each applies to a parked workflow, and a skip of a performing one is refused.
    expect(parkedOutcomes).toEqual({ pause: 'applied', skip: 'applied', cancel: 'applied' });
    expect(await refusedWhileHeld).toBe('refused');
    expect(unexpected).toEqual([]);
    expect(hk.errors).toEqual([]);
    expect(sent).toHaveLength(WORKFLOWS);
    expect(calls.filter((c) => c.hung)).toEqual([]);
    // A refused signal was for a workflow already over, and nothing was stored for it.
    const workflowsById = new Map(snap.workflows.map((w) => [w.id, w]));
    for (const call of refusedSignals) {
      expect({ id: call.workflowId, error: call.error?.split(':')[0], over: ['finished', 'canceled'].includes(workflowsById.get(call.workflowId!)?.state ?? '') }).toEqual({
        id: call.workflowId,
        error: 'WorkflowNotOngoingError',
        over: true,
      });
      if (call.op === 'signal') expect(snap.signals.filter((s) => s.workflowId === call.workflowId)).toEqual([]);
    }
    expect(snap.workflows).toHaveLength(WORKFLOWS + own.length);
    expect(snap.executions.filter((e) => ['scheduled', 'waiting', 'in_progress'].includes(e.state))).toEqual([]);
    expect(sampled.violations).toEqual([]);
    expect(stateProblems(snap, started)).toEqual([]);
    expect(deliveryProblems(snap, started)).toEqual([]);
  }, scaled(180_000, 420_000));
}

describeProof('Operator actions racing signals and steps across processes', operatorSuite);
