import type { ObjectLiteral } from 'typeorm';
import type { Signal } from '../../entities/signal.entity.js';
import type { StepExecution } from '../../entities/step-execution.entity.js';
import type { WorkflowRecord } from '../../entities/workflow.entity.js';
import { CLAIMED, PENDING } from '../../state/signal-state.js';
import type { EntityCodec } from './entity-codec.js';
import { currentExecutionIn, type ChainedStart, type TrailingRead } from './hot-path-sql.js';

interface Parts {
  workflows: EntityCodec<WorkflowRecord>;
  executions: EntityCodec<StepExecution>;
  signals: EntityCodec<Signal>;
  /** `SELECT <hero> FROM <hero table> h WHERE <key> = …` (HotPathSql.heroRead). */
  heroRead(codec: EntityCodec<ObjectLiteral>, heroId: string): TrailingRead;
  /** The condition on `s` of the signals a gate may attach, and their order (HotPathSql). */
  attachable(bind: (value: unknown) => string, workflowId: string, name: string): string;
  signalOrder: string;
}

/**
 * A chained step's phase 1 as the statement that follows its predecessor's guarded write in one
 * message (HotPathSql.chainedStart). That write took the workflow and execution row locks and
 * scheduled the step (`d`, the row it inserted; none when it refused); this statement,
 * with a snapshot of its own taken once they are held, sees every commit made under them. It reads
 * the hero and, when the hero is there, starts the step: `in_progress` and the workflow `performing`.
 * A gate that waits for a name alone claims the oldest attachable signal of that name and starts
 * the step pinned to it, or parks the step (`waiting`) when there is none. With no hero it writes
 * nothing, and the step stays scheduled for its own phase 1 to decide. It answers one row: the hero
 * (`h_…`), the claimed signal as it left it (`s_…`) and the step's state as it left it (`started`).
 */
export function chainedStartStatement(parts: Parts, start: ChainedStart): TrailingRead {
  const { workflows: w, executions: e, signals: s } = parts;
  return {
    sql: (bind) => {
      const hero = parts.heroRead(start.hero.codec, start.hero.id).sql(bind);
      // A row this message's transaction wrote (its xmin, the transaction's 32-bit id; the message
      // opens no savepoint): the one the guarded write inserted. When the guard refused, that write
      // touched no execution, and nothing here writes. A `scheduled` row of that step written by
      // anyone else (an operator's skip meanwhile) is its own job's.
      const due =
        `SELECT x.${e.column('id')} AS id FROM ${e.table} x WHERE x.${e.column('workflowId')} = ${bind(start.workflowId)} ` +
        `AND ${currentExecutionIn(e, 'x', 'scheduled')} AND x.${e.column('stepName')} = ${bind(start.stepName)} ` +
        `AND x.xmin::text = (txid_current() % 4294967296)::text AND EXISTS (SELECT 1 FROM h)`;
      const ctes = [`h AS (${hero})`, `d AS (${due})`];
      let found = 'true';
      let executionSet: string[];
      if (start.gate) {
        const { gate } = start;
        found = 'EXISTS (SELECT 1 FROM f)';
        ctes.push(
          `f AS (SELECT s.${s.column('id')} AS id FROM ${s.table} s WHERE ${parts.attachable(bind, start.workflowId, gate.name)} AND EXISTS (SELECT 1 FROM d) ORDER BY ${parts.signalOrder} LIMIT 1)`,
          `c AS (UPDATE ${s.table} s SET ${s.column('claimed')} = s.${s.column('claimed')} + 1, ${s.column('state')} = ${bind(CLAIMED)}, ` +
            `${s.column('claimedAt')} = CASE WHEN s.${s.column('state')} = ${bind(PENDING)} THEN ${bind(s.param('claimedAt', gate.now))} ELSE s.${s.column('claimedAt')} END, ` +
            `${s.column('updatedAt')} = ${bind(s.param('updatedAt', gate.now))} WHERE s.${s.column('id')} IN (SELECT id FROM f) RETURNING ${s.selectList('s')})`,
        );
        // Each column as the start or the park writes it; x's own value gives the CASE its type.
        const started = new Map(e.writable(start.started, 'update').map(({ column, value }) => [column, value]));
        const parked = new Map(e.writable(gate.parked, 'update').map(({ column, value }) => [column, value]));
        executionSet = [...new Set([...started.keys(), ...parked.keys()])].map((column) => {
          const branch = (values: Map<string, unknown>) => (values.has(column) ? bind(values.get(column)) : `x.${column}`);
          return `${column} = CASE WHEN ${found} THEN ${branch(started)} WHEN NOT ${found} THEN ${branch(parked)} ELSE x.${column} END`;
        });
        executionSet.push(`${e.column('signalId')} = (SELECT id FROM f)`);
      } else {
        executionSet = e.writable(start.started, 'update').map(({ column, value }) => `${column} = ${bind(value)}`);
      }
      ctes.push(
        `u AS (UPDATE ${e.table} x SET ${executionSet.join(', ')} WHERE x.${e.column('id')} IN (SELECT id FROM d) RETURNING x.${e.column('state')} AS state)`,
        `v AS (UPDATE ${w.table} v SET ${w.writable(start.workflow, 'update').map(({ column, value }) => `${column} = ${bind(value)}`).join(', ')} ` +
          `WHERE v.${w.column('id')} = ${bind(start.workflowId)} AND EXISTS (SELECT 1 FROM d) AND ${found} RETURNING 1)`,
      );
      const claimed = start.gate ? ', c.*' : '';
      return `WITH ${ctes.join(', ')} SELECT (SELECT state FROM u) AS started, h.*${claimed} FROM (SELECT 1) AS o LEFT JOIN h ON true${start.gate ? ' LEFT JOIN c ON true' : ''}`;
    },
  };
}
