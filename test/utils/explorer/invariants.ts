/**
 * What must hold after any schedule, read from the database once the operations (and the jobs they
 * left in the queue) are done. Each check returns the violations it found, as sentences.
 */
import type { DataSource } from 'typeorm';
import { Signal, StepExecution, WorkflowRecord } from 'geneva-drive';
import { identifierText } from '../../../libs/geneva-drive/src/entities/column-transformers.js';
import { WorkflowInstances } from '../../../libs/geneva-drive/src/execution/workflow-instances.js';
import { WorkflowRegistry } from '../../../libs/geneva-drive/src/registry/workflow.registry.js';
import { isChildrenMatcher } from '../../../libs/geneva-drive/src/workflow/children-matcher.js';
import type { INestApplicationContext } from '@nestjs/common';

const ACTIVE = ['scheduled', 'waiting', 'in_progress'];

export async function checkInvariants(app: INestApplicationContext, dataSource: DataSource, options: { lostEvents: boolean; stranded: boolean; unsent: boolean } = { lostEvents: true, stranded: true, unsent: true }): Promise<string[]> {
  const manager = dataSource.manager;
  const workflows = await manager.find(WorkflowRecord, { order: { id: 'ASC' } });
  const executions = await manager.find(StepExecution, { order: { createdAt: 'ASC', id: 'ASC' } });
  const signals = await manager.find(Signal, { order: { createdAt: 'ASC', id: 'ASC' } });
  const violations: string[] = [];
  const now = Date.now();
  const keys = await flowKeys(dataSource);
  /** A scheduled execution waiting for a concurrency key behind its holders: not lost, by design. */
  const waitsBehindHolders = (execution: StepExecution) => {
    if (!execution.flowKey) return false;
    const key = keys.get(execution.flowKey);
    return key !== undefined && key.waiters.some((waiter) => waiter.e === execution.id) && !admitted(key).includes(execution.id);
  };

  for (const workflow of workflows) {
    const own = executions.filter((execution) => execution.workflowId === workflow.id);
    const active = own.filter((execution) => ACTIVE.includes(execution.state));
    if (active.length > 1) violations.push(`workflow ${workflow.id} has ${active.length} active executions: ${active.map((e) => `${e.id} ${e.stepName} ${e.state}`).join(', ')}`);
    if ((workflow.state === 'finished' || workflow.state === 'canceled') && active.length > 0) {
      violations.push(`workflow ${workflow.id} is ${workflow.state} with execution ${active[0].id} still ${active[0].state}`);
    }
    for (const execution of active) {
      // Every job the operations left was run: nothing is left to start a step that is due.
      if (options.unsent && execution.state === 'scheduled' && execution.scheduledFor.getTime() <= now && workflow.state === 'ready' && !waitsBehindHolders(execution)) {
        violations.push(`execution ${execution.id} (${execution.stepName}) is scheduled and due with no job left to run it: lost`);
      }
      if (execution.state === 'in_progress' && options.stranded) violations.push(`execution ${execution.id} (${execution.stepName}) is in progress with nothing running it`);
    }
  }

  // (`stranded`: a step left in progress with nothing running it counts; not where a lost answer
  // leaves one to stuck-in-progress recovery by design.)
  // Rows that moved along their state machine carry the stamps of the states they went through.
  const stamps = { completed: 'completedAt', failed: 'failedAt', canceled: 'canceledAt', skipped: 'skippedAt' } as const;
  for (const execution of executions) {
    const stamp = stamps[execution.state as keyof typeof stamps];
    if (stamp && (execution.finishedAt === null || execution[stamp] === null)) violations.push(`execution ${execution.id} is ${execution.state} without its ${stamp} and finishedAt`);
    if (execution.outcome === 'success' && execution.startedAt === null) violations.push(`execution ${execution.id} completed with success but never started`);
    if (execution.state === 'waiting' && execution.waitingSince === null) violations.push(`execution ${execution.id} is waiting without waitingSince`);
  }
  for (const workflow of workflows) {
    if (workflow.state === 'performing' && options.stranded) violations.push(`workflow ${workflow.id} is performing with nothing running`);
  }

  const registry = app.get(WorkflowRegistry, { strict: false });
  // A fan-in gate (childrenOf) pins nothing: each of its passes claims the child_finished signals of
  // the children it counted, and its clean end consumes them (execution/fan-in.ts).
  const fanInRuns = (workflowId: string) =>
    executions.filter((execution) => {
      if (execution.workflowId !== workflowId || execution.startedAt === null) return false;
      const workflow = workflows.find((w) => w.id === workflowId)!;
      return isChildrenMatcher(registry.findByName(workflow.type)?.step(execution.stepName)?.waitFor);
    });
  for (const signal of signals) {
    const pinned = executions.filter((execution) => execution.signalId === signal.id);
    const gates = fanInRuns(signal.workflowId);
    if (pinned.length === 0 && gates.length > 0 && signal.name === 'child_finished') {
      const label = `signal ${signal.id} (${signal.name}, ${signal.state}, claimed ${signal.claimed}, consumed ${signal.consumed})`;
      if (Number(signal.claimed) > gates.length) violations.push(`${label}: claimed more often than the ${gates.length} fan-in gate(s) that passed`);
      if (Number(signal.consumed) > Number(signal.claimed)) violations.push(`${label}: consumed more often than claimed`);
      if (Number(signal.consumed) > new Set(gates.map((execution) => execution.stepName)).size) violations.push(`${label}: consumed more often than the fan-in steps that passed`);
      if (signal.state === 'pending' && (Number(signal.claimed) !== 0 || Number(signal.consumed) !== 0)) violations.push(`${label}: pending with counters set`);
      if (signal.state !== 'pending' && signal.claimedAt === null) violations.push(`${label}: ${signal.state} without claimedAt`);
      continue;
    }
    // A successor inherits its predecessor's pin without a claim: a continuation (continuesFromId),
    // or the re-run housekeeping recovery puts after a step whose worker died.
    const inherits = (execution: StepExecution) => {
      if (execution.continuesFromId !== null) return true;
      const own = executions.filter((e) => e.workflowId === execution.workflowId);
      const before = own[own.indexOf(execution) - 1];
      return before?.outcome === 'recovered' && before.stepName === execution.stepName && before.signalId === execution.signalId;
    };
    const attaches = pinned.filter((execution) => !inherits(execution)).length;
    const label = `signal ${signal.id} (${signal.name}, ${signal.state}, claimed ${signal.claimed}, consumed ${signal.consumed})`;
    if (Number(signal.claimed) !== attaches) violations.push(`${label}: claimed ${signal.claimed} times, but ${attaches} executions attached it (${pinned.map((e) => e.id).join(', ') || 'none'})`);
    if (signal.state === 'pending' && (Number(signal.claimed) !== 0 || Number(signal.consumed) !== 0)) violations.push(`${label}: pending with counters set`);
    if (signal.state !== 'pending' && signal.claimedAt === null) violations.push(`${label}: ${signal.state} without claimedAt`);
    const chains = new Set(pinned.map((execution) => execution.stepName)).size;
    if (Number(signal.consumed) > chains) violations.push(`${label}: consumed more often than the ${chains} chain(s) attached to it`);
    if (signal.state === 'consumed' && Number(signal.consumed) < 1) violations.push(`${label}: consumed without a consumption`);
  }

  // No lost event: a buffered signal that a parked step accepts (its matcher deciding on the hero as
  // it is now) must have woken it.
  const instances = app.get(WorkflowInstances, { strict: false });
  for (const execution of executions.filter((e) => options.lostEvents && e.state === 'waiting')) {
    const workflow = workflows.find((w) => w.id === execution.workflowId)!;
    if (workflow.state !== 'ready') continue;
    const definition = registry.findByName(workflow.type);
    const step = definition?.step(execution.stepName);
    if (!definition || !step?.waitFor) continue;
    if (isChildrenMatcher(step.waitFor)) {
      // A fan-in gate is woken by the count of its ended children, not by one signal: lost only once it is reached.
      const matcher = step.waitFor;
      const children = workflows.filter((w) => w.parentId === workflow.id && w.parentStepName === matcher.stepName);
      const ended = children.filter((w) => w.state === 'finished' || w.state === 'canceled').length;
      const pending = signals.filter((s) => s.workflowId === workflow.id && s.state === 'pending' && matcher.matches(s));
      if (ended >= matcher.needed(children.length) && pending.length > 0) violations.push(`execution ${execution.id} (${execution.stepName}) is parked with ${ended} of ${children.length} children ended and signal ${pending[0].id} (${pending[0].name}) pending: a lost event`);
      continue;
    }
    const instance = await instances.createBound(manager, definition, workflow, execution, { withHero: true });
    for (const signal of signals.filter((s) => s.workflowId === workflow.id && s.state === 'pending')) {
      if (step.waitFor.matches(signal, instance)) violations.push(`signal ${signal.id} (${signal.name}) is pending while execution ${execution.id} (${execution.stepName}), parked, accepts it: a lost event`);
    }
  }
  // A concurrency key's row counts its holders (the executions of the key in progress) and queues
  // exactly the executions that wait for it (scheduled, with the key).
  for (const [key, row] of keys) {
    const holders = executions.filter((execution) => execution.flowKey === key && execution.state === 'in_progress').length;
    if (row.holding !== holders) violations.push(`concurrency key ${key} counts ${row.holding} holders, but ${holders} of its executions are in progress`);
    const waiting = executions.filter((execution) => execution.flowKey === key && execution.state === 'scheduled').map((execution) => execution.id);
    const queued = row.waiters.map((waiter) => waiter.e);
    if ([...waiting].sort().join() !== [...queued].sort().join()) violations.push(`concurrency key ${key} queues [${queued.join(', ')}], but [${waiting.join(', ')}] wait for it`);
  }
  return violations;
}

interface FlowKeyRow {
  holding: number;
  waiters: Array<{ e: string; l: number }>;
}

/** The concurrency keys' rows, by key (none without the flow-control migration). */
async function flowKeys(dataSource: DataSource): Promise<Map<string, FlowKeyRow>> {
  const rows: Array<{ flow_key: string; holding: unknown; waiters: unknown }> = await dataSource.query('SELECT flow_key, holding, waiters FROM geneva_drive_flow_keys').catch(() => []);
  // MySQL/MariaDB answer an identifier column as bytes.
  return new Map(rows.map((row) => [String(identifierText(row.flow_key)), { holding: Number(row.holding), waiters: JSON.parse(String(row.waiters)) as FlowKeyRow['waiters'] }]));
}

/** The waiters the key's free slots admit, oldest first (ConcurrencySlots' rule): their wake-up must be out. */
function admitted(row: FlowKeyRow): string[] {
  const ids: string[] = [];
  let slots = row.holding;
  for (const waiter of row.waiters) {
    if (slots >= waiter.l) break;
    ids.push(waiter.e);
    slots++;
  }
  return ids;
}
