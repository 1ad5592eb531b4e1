import type { DataSource, EntityMetadata, QueryRunner } from 'typeorm';
import { ProcessRecord } from '../entities/process.entity.js';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { EntitiesNotRegisteredError } from '../errors/entities-not-registered.error.js';
import { SchemaNotMigratedError } from '../errors/schema-not-migrated.error.js';
import { CreateGenevaDriveTables1730000000000 } from '../migrations/1730000000000-create-geneva-drive-tables.js';
import { AddGenevaDriveSignals1730000000001 } from '../migrations/1730000000001-add-geneva-drive-signals.js';
import { AddGenevaDriveProcesses1730000000005 } from '../migrations/1730000000005-add-geneva-drive-processes.js';
import { AddGenevaDriveChildWorkflows1730000000006 } from '../migrations/1730000000006-add-geneva-drive-child-workflows.js';
import { AddGenevaDriveFlowControl1730000000007 } from '../migrations/1730000000007-add-geneva-drive-flow-control.js';
import { AddGenevaDriveRateLimits1730000000009 } from '../migrations/1730000000009-add-geneva-drive-rate-limits.js';
import { ChildrenNotMigratedError } from '../errors/children-not-migrated.error.js';
import { FlowControlNotMigratedError } from '../errors/flow-control-not-migrated.error.js';
import { canonicalKey, keyTypeOf, useUuidKeys, uuidv7, type PrimaryKeyType } from '../migrations/primary-keys.js';
import { tableColumns } from '../migrations/schema-catalog.js';

const TABLES = ['geneva_drive_workflows', 'geneva_drive_step_executions', 'geneva_drive_signals'];
/** Optional, with a string key of its own (not part of the key-type check). */
const PROCESSES_TABLE = 'geneva_drive_processes';
/** Optional: created by the flow-control migration, with a string key of its own; read by raw SQL (no entity to register). */
const FLOW_KEYS_TABLE = 'geneva_drive_flow_keys';
const ENTITIES = [WorkflowRecord, StepExecution, Signal];

/**
 * What the database schema supports, detected once at boot. Without the signals migration the
 * signal columns are taken out of the entity's SELECT/INSERT/UPDATE lists, so everything else keeps
 * working against the older schema.
 *
 * The key type is decided here too, and only here: the tables say whether they have bigint or uuid
 * keys (the migration set chose), and with uuid keys the entities' metadata is switched to uuid
 * columns and every new row gets its id from {@link withNewId} — a time-ordered uuid, so that
 * ordering by (created_at, id) stays creation order (see `uuidv7`). There is no module option for
 * it: an option could only disagree with the tables.
 */
export class SchemaCapabilities {
  private signals = true;
  private deadlines = true;
  private children = true;
  private flowControl = true;
  private rateLimits = true;
  private processes: 'ready' | 'not migrated' | 'entity not registered' = 'ready';
  private keys: PrimaryKeyType = 'bigint';
  private sessionTimeouts = false;

  get hasSignals(): boolean {
    return this.signals;
  }

  /** Whether the wait-deadlines migration ran (`timeout_at` on executions): steps with a `timeout` need it. */
  get hasDeadlines(): boolean {
    return this.deadlines;
  }

  /** Whether the child-workflows migration ran (its columns on workflows): `startChild` needs it. */
  get hasChildren(): boolean {
    return this.children;
  }

  /** Throws ChildrenNotMigratedError, naming `what`, without the child-workflows migration. */
  assertChildren(what: string): void {
    if (!this.children) throw new ChildrenNotMigratedError(what, AddGenevaDriveChildWorkflows1730000000006.name);
  }

  /**
   * Whether the flow-control migration ran (the `geneva_drive_flow_keys` table and `flow_key` on
   * executions): steps with a concurrency key need it.
   */
  get hasFlowControl(): boolean {
    return this.flowControl;
  }

  /** Whether the rate-limits migration ran too (`rate_window` on the flow keys' table): a step with a `rateLimit` needs it. */
  get hasRateLimits(): boolean {
    return this.rateLimits;
  }

  /** Throws FlowControlNotMigratedError, naming `what` and the migration it lacks, without the rate-limits migration (or the flow-control one before it). */
  assertRateLimits(what: string): void {
    this.assertFlowControl(what);
    if (!this.rateLimits) throw new FlowControlNotMigratedError(what, AddGenevaDriveRateLimits1730000000009.name, 'the rate_window column of geneva_drive_flow_keys');
  }

  /** Throws FlowControlNotMigratedError, naming `what`, without the flow-control migration. */
  assertFlowControl(what: string): void {
    if (!this.flowControl) throw new FlowControlNotMigratedError(what, AddGenevaDriveFlowControl1730000000007.name);
  }

  /**
   * Whether the process table can be used (its migration ran and `ProcessRecord` is registered with
   * the DataSource), or why not: processes then record nothing, and housekeeping reports no
   * unrunnable executions.
   */
  get processTable(): 'ready' | 'not migrated' | 'entity not registered' {
    return this.processes;
  }

  /**
   * Whether the server bounds a session's statements and idle transactions (MariaDB 10.3 and later:
   * `max_statement_time`, `idle_transaction_timeout`): a transactional step's transaction is then
   * bounded by them (HotPathSql.sessionBounds). MySQL has neither; PostgreSQL's are set otherwise.
   */
  get hasSessionTimeouts(): boolean {
    return this.sessionTimeouts;
  }

  /** The key type of the geneva-drive tables. */
  get primaryKey(): PrimaryKeyType {
    return this.keys;
  }

  /** Gives a row about to be inserted its id when the keys are uuids; with bigint keys the database assigns it. */
  withNewId<T extends { id: string }>(row: T): T {
    if (this.keys === 'uuid') row.id = uuidv7();
    return row;
  }

  /** The canonical form of a workflow (or execution, signal) id a caller gave, or null when no row can have it. */
  canonicalId(id: unknown): string | null {
    return canonicalKey(id, this.keys);
  }

  /**
   * Reads the schema, and stops the boot when it cannot work: geneva-drive's entities unknown to the
   * DataSource, its tables or columns missing (the signals, wait-deadlines, child-workflows and flow-control migrations alone may be missing), or
   * tables that disagree on their key type. The process table is optional too (see processTable).
   * `dataSourceName` is for the messages.
   */
  async detect(dataSource: DataSource, dataSourceName = 'default'): Promise<void> {
    const missingEntities = ENTITIES.filter((entity) => !dataSource.hasMetadata(entity)).map((entity) => entity.name);
    if (missingEntities.length > 0) throw new EntitiesNotRegisteredError(dataSourceName, missingEntities);
    const runner = dataSource.createQueryRunner();
    const tables = new Map<string, Map<string, string> | null>();
    let processes: Map<string, string> | null;
    let flowKeys: Map<string, string> | null;
    try {
      for (const table of TABLES) tables.set(table, await tableColumns(runner, table));
      processes = await tableColumns(runner, PROCESSES_TABLE);
      flowKeys = await tableColumns(runner, FLOW_KEYS_TABLE);
      this.sessionTimeouts = await sessionTimeoutsOf(runner);
    } finally {
      await runner.release();
    }
    this.keys = commonKeyType(tables);
    const workflows = tables.get('geneva_drive_workflows')!;
    const executions = tables.get('geneva_drive_step_executions')!;
    const absent = [...tables].filter(([name, columns]) => columns === null && name !== 'geneva_drive_signals').map(([name]) => name);
    if (absent.length > 0) throw new SchemaNotMigratedError(absent, CreateGenevaDriveTables1730000000000.name);
    const stepColumns = columnsOf(dataSource, StepExecution);
    const missing = [
      ...missingColumns('geneva_drive_workflows', workflows, columnsOf(dataSource, WorkflowRecord).filter((column) => !CHILD_COLUMNS.includes(column))),
      ...missingColumns('geneva_drive_step_executions', executions, stepColumns.filter((column) => !SIGNAL_COLUMNS.includes(column) && !DEADLINE_COLUMNS.includes(column) && !FLOW_COLUMNS.includes(column))),
    ];
    if (missing.length > 0) throw new SchemaNotMigratedError(missing, CreateGenevaDriveTables1730000000000.name);
    const signals = tables.get('geneva_drive_signals')!;
    this.signals = signals !== null && SIGNAL_COLUMNS.every((column) => executions.has(column));
    if (this.signals) {
      const missingSignalColumns = missingColumns('geneva_drive_signals', signals, columnsOf(dataSource, Signal));
      if (missingSignalColumns.length > 0) throw new SchemaNotMigratedError(missingSignalColumns, AddGenevaDriveSignals1730000000001.name);
    }
    this.deadlines = DEADLINE_COLUMNS.every((column) => executions.has(column));
    this.children = CHILD_COLUMNS.every((column) => workflows.has(column));
    // Both halves, or flow control is off: MySQL/MariaDB may hold the table of a run that stopped before the column.
    this.flowControl = flowKeys !== null && FLOW_COLUMNS.every((column) => executions.has(column));
    if (this.flowControl) {
      const missingFlowKeyColumns = missingColumns(FLOW_KEYS_TABLE, flowKeys!, FLOW_KEYS_TABLE_COLUMNS);
      if (missingFlowKeyColumns.length > 0) throw new SchemaNotMigratedError(missingFlowKeyColumns, AddGenevaDriveFlowControl1730000000007.name);
    }
    this.rateLimits = this.flowControl && flowKeys!.has(RATE_WINDOW_COLUMN);
    if (processes === null) this.processes = 'not migrated';
    else if (!dataSource.hasMetadata(ProcessRecord)) this.processes = 'entity not registered';
    else {
      const missingProcessColumns = missingColumns(PROCESSES_TABLE, processes, columnsOf(dataSource, ProcessRecord));
      if (missingProcessColumns.length > 0) throw new SchemaNotMigratedError(missingProcessColumns, AddGenevaDriveProcesses1730000000005.name);
      this.processes = 'ready';
    }
    const absentProperties = [
      ...(this.signals ? [] : ['signalId', 'waitingSince']),
      ...(this.deadlines ? [] : ['timeoutAt']),
      ...(this.flowControl ? [] : ['flowKey']),
    ];
    hideColumns(dataSource.getMetadata(StepExecution), absentProperties);
    if (!this.children) hideColumns(dataSource.getMetadata(WorkflowRecord), ['parentId', 'parentStepName', 'childKey', 'onParentCancel', 'hasChildren', 'result']);
    if (this.keys === 'uuid') {
      useUuidKeys(dataSource, [
        { entity: WorkflowRecord, properties: ['parentId'] },
        { entity: StepExecution, properties: ['workflowId', 'continuesFromId', 'signalId'] },
        { entity: Signal, properties: ['workflowId'] },
      ]);
    }
  }
}

/** See SchemaCapabilities.hasSessionTimeouts: asked of the server (MySQL answers an unknown variable with an error). */
async function sessionTimeoutsOf(runner: QueryRunner): Promise<boolean> {
  const type = runner.connection.options.type;
  if (type !== 'mysql' && type !== 'mariadb') return false;
  try {
    await runner.query('SELECT @@session.idle_transaction_timeout, @@session.max_statement_time');
    return true;
  } catch {
    return false;
  }
}

/** The columns the signals migration adds to the executions table. */
const SIGNAL_COLUMNS = ['signal_id', 'waiting_since'];
/** The column the wait-deadlines migration adds to the executions table. */
const DEADLINE_COLUMNS = ['timeout_at'];
/** The column the flow-control migration adds to the executions table. */
const FLOW_COLUMNS = ['flow_key'];
/** The column the rate-limits migration adds to the flow keys' table. */
const RATE_WINDOW_COLUMN = 'rate_window';
/** The columns of the flow-control migration's table (the engine reads and writes it with raw SQL). */
const FLOW_KEYS_TABLE_COLUMNS = ['flow_key', 'holding', 'waiters', 'created_at', 'updated_at'];
/** The columns the child-workflows migration adds to the workflows table. */
const CHILD_COLUMNS = ['parent_id', 'parent_step_name', 'child_key', 'on_parent_cancel', 'has_children', 'result'];

/** Leaves the properties' columns out of the entity's SELECT, INSERT and UPDATE lists (their migration has not run). */
function hideColumns(metadata: EntityMetadata, properties: string[]): void {
  for (const property of properties) {
    const column = metadata.findColumnWithPropertyName(property);
    if (column) {
      column.isSelect = false;
      column.isInsert = false;
      column.isUpdate = false;
    }
  }
}

function columnsOf(dataSource: DataSource, entity: Function): string[] {
  return dataSource.getMetadata(entity).columns.map((column) => column.databaseName);
}

function missingColumns(table: string, present: Map<string, string>, expected: string[]): string[] {
  return expected.filter((column) => !present.has(column)).map((column) => `${table}.${column}`);
}

/** The tables' common key type (bigint when they do not exist yet); tables that disagree stop the boot. */
function commonKeyType(tables: Map<string, Map<string, string> | null>): PrimaryKeyType {
  const found: string[] = [];
  let keys: PrimaryKeyType | null = null;
  for (const [table, columns] of tables) {
    const type = keyTypeOf(table, columns);
    if (type === null) continue;
    found.push(`${table}.id is ${type}`);
    if (keys !== null && type !== keys) {
      throw new Error(
        `geneva-drive's tables disagree on their key type (${found.join(', ')}): they must all come from one migration set, ` +
          'GENEVA_DRIVE_MIGRATIONS (bigint) or genevaDriveMigrations({ primaryKey })',
      );
    }
    keys = type;
  }
  return keys ?? 'bigint';
}
