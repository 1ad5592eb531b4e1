import type { Signal } from '../../entities/signal.entity.js';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { RUNNABLE_WORKFLOW_STATES } from '../../state/workflow-state.js';
import { CLAIMED, PENDING } from '../../state/signal-state.js';
import type { EntityCodec } from './entity-codec.js';
import { pgRowVersion } from './pg-row-version.js';
import { currentExecutionIn, type DeliveredSignal, type SignalDelivery } from './hot-path-sql.js';


/** {@link signalStatement}'s text, and its parameters for a signal of the kind it was built for. */
export interface SignalStatement {
  sql: string;
  values(signal: Signal): unknown[];
}

interface Codecs {
  workflows: EntityCodec<WorkflowRecord>;
  executions: EntityCodec<StepExecution>;
  signals: EntityCodec<Signal>;
}

/**
 * `signal()` as one message of PostgreSQL's simple protocol (postgres.ts deliverSignal): BEGIN; the
 * workflow's row lock; this statement, which inserts the signal (claimed, if it wakes a step), wakes
 * the parked execution whose step waits for the name alone (`waiting → scheduled`, pinned, due now,
 * its wake-up's job id) and reads back the workflow's row and the woken executions' as it leaves
 * them (the wake-up job that starts in this process runs on them: SignalRendezvous.sendWakes); COMMIT. One round trip where the
 * transaction took five.
 *
 * Race-free as the transaction is: in READ COMMITTED each statement of a message reads a snapshot of
 * its own, so this one, run once the lock is held, sees every commit made under it (a gate that
 * parked the step, an earlier delivery of the key). Every writer of a workflow's executions and
 * signals holds that lock.
 *
 * It writes nothing when the workflow is not found, not runnable (paused, finished, canceled) or of
 * a class outside `delivery.routes`: the answer then has no row, and the caller delivers through the
 * transaction, which knows what to do there. Its text depends on the name, the routes and whether
 * the signal has a key, never on the call's values (built for one signal, it serves every signal of
 * that name and routes, keyed or not as that one), so that it is prepared once per session: the
 * values are its parameters, typed by `columnTypes` (the signals table's columns as the database
 * declares them) where nothing else gives them a type.
 */
export function signalStatement(codecs: Codecs, delivery: SignalDelivery, columnTypes: ReadonlyMap<string, string>): SignalStatement {
  const { workflows: w, executions: e, signals: s } = codecs;
  const { signal, routes } = delivery;
  /** How each parameter is read from a signal and its row as the driver would store it. */
  const parameters: Array<(signal: Signal, row: Map<string, unknown>) => unknown> = [];
  const bind = (value: (signal: Signal, row: Map<string, unknown>) => unknown) => `$${parameters.push(value)}`;
  const typed = (column: string) => `CAST(${bind((_, row) => row.get(column))} AS ${columnTypes.get(unquoted(column)) ?? 'text'})`;
  const constant = (value: string) => `'${value.replace(/'/g, "''")}'`;
  const list = (items: string[]) => items.map(constant).join(', ');
  const pairs = [...routes].flatMap(([type, steps]) => steps.map((step) => `(${list([type, step])})`));
  const workflowId = bind((given) => given.workflowId);
  const now = bind((given) => given.createdAt);
  const woken = 'EXISTS (SELECT 1 FROM e)';
  // The signal as it is stored: claimed at once when it wakes the step, pending otherwise.
  const inserted = s.writable(signal, 'insert');
  const insertValues = inserted.map(({ column }) => {
    if (column === s.column('state')) return `CASE WHEN ${woken} THEN '${CLAIMED}' ELSE '${PENDING}' END`;
    if (column === s.column('claimed')) return '(SELECT count(*) FROM e)';
    if (column === s.column('claimedAt')) return `CASE WHEN ${woken} THEN CAST(${now} AS timestamptz) END`;
    if (column === s.column('createdAt') || column === s.column('updatedAt')) return `CAST(${now} AS timestamptz)`;
    return typed(column);
  });
  const signalId = typed(s.column('id'));
  const found =
    signal.idempotencyKey === null
      ? 'false'
      : `NOT EXISTS (SELECT 1 FROM i) AND d.${s.column('workflowId')} = w.${w.column('id')} AND d.${s.column('name')} = ${constant(signal.name)} AND d.${s.column('idempotencyKey')} = ${bind((given) => given.idempotencyKey)}`;
  const sql =
    `WITH w AS (SELECT ${w.selectList('w')}, ${pgRowVersion('w')} AS w_version, w.${w.column('id')} AS id, w.${w.column('type')} AS type FROM ${w.table} w ` +
    `WHERE w.${w.column('id')} = ${workflowId} AND w.${w.column('state')} IN (${list([...RUNNABLE_WORKFLOW_STATES])}) AND w.${w.column('type')} IN (${list([...routes.keys()])})), ` +
    `e AS (SELECT p.${e.column('id')} AS id FROM ${e.table} p JOIN w ON p.${e.column('workflowId')} = w.id ` +
    `WHERE ${currentExecutionIn(e, 'p', 'waiting')} AND (w.type, p.${e.column('stepName')}) IN (${pairs.join(', ')})), ` +
    `i AS (INSERT INTO ${s.table} (${inserted.map(({ column }) => column).join(', ')}) SELECT ${insertValues.join(', ')} FROM w ON CONFLICT DO NOTHING RETURNING 1), ` +
    `x AS (UPDATE ${e.table} x SET ${e.column('state')} = 'scheduled', ${e.column('signalId')} = ${signalId}, ${e.column('scheduledFor')} = ${now}, ` +
    `${e.column('jobId')} = x.${e.column('id')}::text || '-wake-' || ${signalId}::text, ${e.column('updatedAt')} = ${now} ` +
    `WHERE x.${e.column('id')} IN (SELECT id FROM e) AND EXISTS (SELECT 1 FROM i) RETURNING ${e.selectList('x')}, ${pgRowVersion('x')} AS x_version) ` +
    `SELECT w.*, (SELECT count(*) FROM i) AS inserted, x.*, ${s.selectList('d')} FROM w LEFT JOIN x ON true LEFT JOIN ${s.table} d ON ${found}`;
  return {
    sql,
    values: (given) => {
      const row = new Map(s.writable(given, 'insert').map(({ column, value }) => [column, value]));
      return parameters.map((parameter) => parameter(given, row));
    },
  };
}

/** A column as the catalog names it. */
function unquoted(column: string): string {
  return column.replace(/^"|"$/g, '').replaceAll('""', '"');
}

/**
 * What {@link signalStatement} answered: null when it wrote nothing (see there). `versioned` is told
 * the version (pgRowVersion) of the workflow's row and of each woken execution's as it left them.
 */
export function deliveredSignal(
  codecs: Codecs,
  delivery: SignalDelivery,
  rows: Array<Record<string, unknown>>,
  versioned: (row: WorkflowRecord | StepExecution, version: string) => void,
): DeliveredSignal | null {
  if (rows.length === 0) return null;
  const workflow = codecs.workflows.fromRow(rows[0], 'w');
  versioned(workflow, String(rows[0].w_version));
  if (Number(rows[0].inserted) === 0) {
    if (rows[0].d_id == null) throw new Error(`Signal "${delivery.signal.name}" of workflow ${workflow.id} was neither written nor found`);
    return { workflow, signal: codecs.signals.fromRow(rows[0], 'd'), duplicate: true, woken: [] };
  }
  const woken = rows
    .filter((row) => row.x_id != null)
    .map((row) => {
      const execution = codecs.executions.fromRow(row, 'x');
      versioned(execution, String(row.x_version));
      return execution;
    });
  const signal = delivery.signal;
  if (woken.length > 0) Object.assign(signal, { state: CLAIMED, claimed: woken.length, claimedAt: signal.createdAt });
  return { workflow, signal, duplicate: false, woken };
}
