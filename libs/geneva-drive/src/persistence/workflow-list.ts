import { Brackets, type EntityManager, type SelectQueryBuilder } from 'typeorm';
import { identifierRows } from '../entities/column-transformers.js';
import type { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { mysqlHasIndex } from './sql/mysql.js';
import { ACTIVE_EXECUTION_STATES } from '../state/step-execution-state.js';

/**
 * The operator surfaces' lists (the dashboard and the CLI, through the operator's WorkflowReader):
 * workflows by filters, newest first with a keyset cursor, so every page is an index range scan
 * however many workflows there are; the counts by type and state; short lists of executions; a
 * workflow's executions and signals a page at a time, their long columns read as bounded heads.
 */

/** The index of the list filtered by type and state (AddGenevaDriveListIndexes1730000000003). */
const WORKFLOWS_BY_TYPE_STATE = 'geneva_drive_workflows_type_state';

/** A list's criteria, checked and parsed already; each one narrows the list. */
export interface WorkflowListQuery {
  type?: string;
  state?: string;
  heroType?: string;
  heroId?: string;
  /** Workflows with an execution parked at one of these steps of their type; an empty list matches nothing. */
  parkedAt?: ReadonlyArray<{ type: string; step: string }>;
  /** Workflows with a failed execution of this step. */
  failedStep?: string;
  createdFrom?: Date;
  createdTo?: Date;
  updatedFrom?: Date;
  updatedTo?: Date;
  /** This hero id, or the workflow with this id (null: none). */
  search?: { heroId: string; workflowId: string | null };
  /** Keyset cursor: workflows with a smaller id. */
  before?: string;
  /** MySQL/MariaDB: read the (type, state, id) index (see typeStateIndexUsable). */
  useTypeStateIndex?: boolean;
}

/** Up to `limit` workflows matching `query`, newest (largest id) first. */
export function listWorkflows(manager: EntityManager, query: WorkflowListQuery, limit: number): Promise<WorkflowRecord[]> {
  const qb = manager.createQueryBuilder(WorkflowRecord, 'w').orderBy('w.id', 'DESC').limit(limit);
  if (query.type) qb.andWhere('w.type = :type', { type: query.type });
  if (query.state) qb.andWhere('w.state = :state', { state: query.state });
  if (query.heroType) qb.andWhere('w.heroType = :heroType', { heroType: query.heroType });
  if (query.heroId) qb.andWhere('w.heroId = :heroId', { heroId: query.heroId });
  if (query.parkedAt) whereParkedAt(qb, query.parkedAt);
  if (query.failedStep) {
    qb.andWhere(
      (sub) => `EXISTS ${sub.subQuery().select('1').from(StepExecution, 'f').where('f.workflowId = w.id').andWhere('f.state = :failed').andWhere('f.stepName = :failedStep').getQuery()}`,
      { failed: 'failed', failedStep: query.failedStep },
    );
  }
  for (const [key, column, op] of [
    ['createdFrom', 'createdAt', '>='],
    ['createdTo', 'createdAt', '<='],
    ['updatedFrom', 'updatedAt', '>='],
    ['updatedTo', 'updatedAt', '<='],
  ] as const) {
    const value = query[key];
    if (value) qb.andWhere(`w.${column} ${op} :${key}`, { [key]: value });
  }
  const search = query.search;
  if (search) {
    qb.andWhere(
      new Brackets((inner) => {
        inner.where('w.heroId = :q', { q: search.heroId });
        if (search.workflowId !== null) inner.orWhere('w.id = :qId', { qId: search.workflowId });
      }),
    );
  }
  if (query.before) qb.andWhere('w.id < :after', { after: query.before });
  // Left to itself, MySQL/MariaDB intersects the (type) and (state) indexes and sorts every matching
  // row (index_merge + filesort: 0.3–0.6 s over 90k rows) instead of reading (type, state, id) backwards
  // for one page. USE INDEX is MySQL/MariaDB only.
  if (query.useTypeStateIndex) qb.useIndex(WORKFLOWS_BY_TYPE_STATE);
  return qb.getMany();
}

function whereParkedAt(qb: SelectQueryBuilder<WorkflowRecord>, parkedAt: ReadonlyArray<{ type: string; step: string }>): void {
  if (parkedAt.length === 0) {
    qb.andWhere('1 = 0');
    return;
  }
  const pairs = parkedAt.map((entry, i) => `(w.type = :wt${i} AND p.stepName = :ws${i})`).join(' OR ');
  const params = Object.fromEntries(parkedAt.flatMap((entry, i) => [[`wt${i}`, entry.type], [`ws${i}`, entry.step]]));
  qb.andWhere(
    (sub) => `EXISTS ${sub.subQuery().select('1').from(StepExecution, 'p').where('p.workflowId = w.id').andWhere('p.state = :parked').andWhere(`(${pairs})`).getQuery()}`,
    { parked: 'waiting', ...params },
  );
}

/**
 * Whether a list may read the (type, state, id) index with USE INDEX: on MySQL/MariaDB once the
 * list-index migration has run (a missing index is an error there). The other databases need no hint.
 */
export function typeStateIndexUsable(manager: EntityManager): Promise<boolean> {
  if (!['mysql', 'mariadb'].includes(manager.connection.options.type)) return Promise.resolve(false);
  return mysqlHasIndex(manager, manager.connection.getMetadata(WorkflowRecord).tableName, WORKFLOWS_BY_TYPE_STATE);
}

/** How many workflows there are of each type in each state, ordered by type then state. */
export function countsByTypeAndState(manager: EntityManager): Promise<Array<{ type: string; state: string; count: string | number }>> {
  return manager
    .createQueryBuilder(WorkflowRecord, 'w')
    .select('w.type', 'type')
    .addSelect('w.state', 'state')
    .addSelect('COUNT(*)', 'count')
    .groupBy('w.type')
    .addGroupBy('w.state')
    .orderBy('w.type')
    .addOrderBy('w.state')
    .getRawMany<{ type: string; state: string; count: string | number }>()
    .then(identifierRows);
}

/**
 * Up to `limit` executions in `state` ordered by `orderBy`, as raw rows: `workflowId`, the
 * workflow's `type`, `stepName` and `columns` (dates as the driver returns them).
 */
export function executionsIn(
  manager: EntityManager,
  state: string,
  columns: Array<keyof StepExecution>,
  orderBy: keyof StepExecution,
  order: 'ASC' | 'DESC',
  limit: number,
): Promise<Array<Record<string, any>>> {
  const qb = manager
    .createQueryBuilder(StepExecution, 'e')
    .innerJoin(WorkflowRecord, 'w', 'w.id = e.workflowId')
    .select('e.workflowId', 'workflowId')
    .addSelect('w.type', 'type')
    .addSelect('e.stepName', 'stepName')
    .where('e.state = :state', { state })
    .limit(limit);
  for (const column of columns) qb.addSelect(`e.${column}`, column);
  return qb.orderBy(`e.${orderBy}`, order).getRawMany().then(identifierRows);
}

/** How a page reads the columns of a row that may be long (a payload, a cursor, an error). */
export interface LongColumns<T> {
  /** Read as their first N characters and one more (property → N), so the caller sees whether there was more. */
  heads?: Partial<Record<keyof T & string, number>>;
  /** JSON columns of which one top-level string member is read instead (property → member name). */
  members?: Partial<Record<keyof T & string, string>>;
}

/** A row without its long columns, and what was read of them (property → head or member, null when null). */
export interface RowWithHeads<T> {
  row: T;
  read: Record<string, string | null>;
}

/**
 * One workflow's rows after a cursor, by id (creation order: bigint keys grow, uuid keys are
 * time-ordered): its executions or signals (by `workflowId`), or its children (workflows by
 * `parentId`, on the (parent_id, id) index). The `long` columns are never read whole: however large
 * the payloads, a page reads a bounded number of bytes from the database.
 */
export async function pageOfWorkflow<T extends StepExecution | Signal | WorkflowRecord>(
  manager: EntityManager,
  entity: new () => T,
  workflowId: string,
  after: string | null,
  pageSize: number,
  long: LongColumns<T>,
  owner: 'workflowId' | 'parentId' = 'workflowId',
): Promise<{ rows: Array<RowWithHeads<T>>; nextAfter: string | null }> {
  const metadata = manager.connection.getMetadata(entity);
  const heads = Object.entries(long.heads ?? {}) as Array<[string, number]>;
  const members = Object.entries(long.members ?? {}) as Array<[string, string]>;
  const skipped = new Set([...heads, ...members].map(([property]) => property));
  const qb = manager
    .createQueryBuilder(entity, 'r')
    // Not the columns of a migration that has not run (SchemaCapabilities hides them): named, they would be selected.
    .select(metadata.columns.filter((column) => column.isSelect && !skipped.has(column.propertyName)).map((column) => `r.${column.propertyName}`))
    .where(`r.${owner} = :workflowId`, { workflowId })
    .orderBy('r.id', 'ASC')
    .limit(pageSize + 1);
  const column = (property: string) => `${qb.escape('r')}.${qb.escape(metadata.findColumnWithPropertyName(property)!.databaseName)}`;
  const type = manager.connection.options.type;
  for (const [property, chars] of heads) qb.addSelect(headOf(type, column(property), chars + 1), `head_${property}`);
  for (const [property, member] of members) qb.addSelect(memberOf(type, column(property), member), `head_${property}`);
  if (after !== null) qb.andWhere('r.id > :after', { after });
  const { entities, raw } = await qb.getRawAndEntities();
  const rows = entities.map((row, i) => ({ row, read: Object.fromEntries([...skipped].map((property) => [property, textOf(raw[i][`head_${property}`])])) }));
  const more = rows.length > pageSize;
  if (more) rows.length = pageSize;
  return { rows, nextAfter: more ? rows[rows.length - 1].row.id : null };
}

/** How many children the workflow has in each state (an index range of (parent_id, id); a row per state comes back). */
export async function childCountsByState(manager: EntityManager, parentId: string): Promise<Array<{ state: string; count: number }>> {
  const rows = await manager
    .createQueryBuilder(WorkflowRecord, 'w')
    .select('w.state', 'state')
    .addSelect('COUNT(*)', 'count')
    .where('w.parentId = :parentId', { parentId })
    .groupBy('w.state')
    .orderBy('w.state')
    .getRawMany<{ state: string; count: string | number }>();
  return rows.map((row) => ({ state: row.state, count: Number(row.count) }));
}

/** The workflow's active execution (scheduled, waiting or in progress), if any: its state and since when it waits, nothing long. */
export function activeExecutionState(manager: EntityManager, workflowId: string): Promise<Pick<StepExecution, 'id' | 'state' | 'waitingSince'> | null> {
  return manager
    .createQueryBuilder(StepExecution, 'e')
    .select(['e.id', 'e.state', 'e.waitingSince'])
    .where('e.workflowId = :workflowId', { workflowId })
    .andWhere('e.state IN (:...states)', { states: ACTIVE_EXECUTION_STATES })
    .orderBy('e.createdAt', 'DESC')
    .addOrderBy('e.id', 'DESC')
    .getOne();
}

/** The first `chars` characters of a text or JSON column (of its text, for PostgreSQL's jsonb). */
function headOf(type: string, column: string, chars: number): string {
  return type === 'postgres' ? `SUBSTR(CAST(${column} AS text), 1, ${chars})` : `SUBSTR(${column}, 1, ${chars})`;
}

/** A top-level string member of a JSON column (`member` is a name of the code's, never input); null where the text is not JSON. */
function memberOf(type: string, column: string, member: string): string {
  if (type === 'postgres') return `(${column} ->> '${member}')`;
  if (type === 'mysql' || type === 'mariadb') return `(CASE WHEN JSON_VALID(${column}) THEN JSON_UNQUOTE(JSON_EXTRACT(${column}, '$.${member}')) END)`;
  return `(CASE WHEN json_valid(${column}) THEN json_extract(${column}, '$.${member}') END)`;
}

/** A raw text value as a string (drivers may hand back a Buffer), null as null. */
function textOf(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}

/** The executions of a workflow that attached to each of these signals, oldest first. */
export async function claimedBy(manager: EntityManager, workflowId: string, signalIds: string[]): Promise<Map<string, string[]>> {
  const bySignal = new Map<string, string[]>();
  if (signalIds.length === 0) return bySignal;
  const rows = await manager
    .createQueryBuilder(StepExecution, 'e')
    .select(['e.id', 'e.signalId'])
    .where('e.workflowId = :workflowId', { workflowId })
    .andWhere('e.signalId IN (:...signalIds)', { signalIds })
    .orderBy('e.id', 'ASC')
    .getMany();
  for (const row of rows) bySignal.set(row.signalId!, [...(bySignal.get(row.signalId!) ?? []), row.id]);
  return bySignal;
}
