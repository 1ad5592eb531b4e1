import type { QueryRunner } from 'typeorm';
import { dialectOf } from './column-types.js';

/** An index kept, on PostgreSQL, to the rows where one of its columns is set. */
export interface PartialIndex {
  name: string;
  table: string;
  columns: string[];
  unique?: boolean;
  /** The column whose rows it keeps: those where it is not null. */
  notNull: string;
}

const WORKFLOWS = 'geneva_drive_workflows';
const EXECUTIONS = 'geneva_drive_step_executions';
const SIGNALS = 'geneva_drive_signals';

/**
 * Indexes whose column is null on most rows. Every read that goes by one names the column with an
 * operator that is false on null (`=`, `<`, `IS NOT NULL`), so the planner still takes it.
 */
export const PARTIAL_INDEXES: readonly PartialIndex[] = [
  { name: 'geneva_drive_step_executions_finished_at', table: EXECUTIONS, columns: ['finished_at'], notNull: 'finished_at' },
  { name: 'geneva_drive_step_executions_continues_from', table: EXECUTIONS, columns: ['continues_from_id'], notNull: 'continues_from_id' },
  { name: 'geneva_drive_step_executions_signal_id', table: EXECUTIONS, columns: ['signal_id'], notNull: 'signal_id' },
  { name: 'geneva_drive_step_executions_state_flow_key', table: EXECUTIONS, columns: ['state', 'flow_key'], notNull: 'flow_key' },
  { name: 'geneva_drive_step_executions_state_timeout', table: EXECUTIONS, columns: ['state', 'timeout_at'], notNull: 'timeout_at' },
  { name: 'geneva_drive_workflows_parent', table: WORKFLOWS, columns: ['parent_id', 'id'], notNull: 'parent_id' },
  // Unique among a parent's children as before: rows without a parent never collided (nulls are distinct).
  { name: 'geneva_drive_workflows_child_key', table: WORKFLOWS, columns: ['parent_id', 'parent_step_name', 'child_key'], unique: true, notNull: 'parent_id' },
];

/**
 * Indexes that others serve, which PostgreSQL does without: a read of one workflow's executions or
 * signals by state goes by `(workflow_id, created_at)` (a workflow holds few rows), one of its current
 * execution by the one-active unique index. MySQL/MariaDB keep them (a statement of theirs names one).
 */
export const COVERED_INDEXES: ReadonlyArray<Omit<PartialIndex, 'notNull'>> = [
  { name: 'geneva_drive_step_executions_workflow_state', table: EXECUTIONS, columns: ['workflow_id', 'state'] },
  { name: 'geneva_drive_signals_workflow_state', table: SIGNALS, columns: ['workflow_id', 'state'] },
];

/**
 * What follows the column list of `name`'s CREATE INDEX on this database: its condition on
 * PostgreSQL when it is partial there, nothing elsewhere. The migrations a database may leave out for
 * a while and run after the partial-indexes one (wait deadlines, child workflows, the flow-key index)
 * create theirs so, and that one makes those created before it so: either way the schema ends as a
 * new install's. (The signals migration run that late keeps its two indexes whole: slower writes,
 * the same reads.)
 */
export function indexCondition(queryRunner: QueryRunner, name: string): string {
  const partial = dialectOf(queryRunner) === 'postgres' ? PARTIAL_INDEXES.find((index) => index.name === name) : undefined;
  return partial ? ` WHERE ${queryRunner.dataSource.driver.escape(partial.notNull)} IS NOT NULL` : '';
}
