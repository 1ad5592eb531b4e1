import type { DataSource, QueryRunner } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import { detectPrimaryKeyType, useUuidKeys, uuidv7, type PrimaryKeyType } from './primary-keys.js';

const TABLES = ['geneva_drive_workflows', 'geneva_drive_step_executions', 'geneva_drive_signals'];

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
  private keys: PrimaryKeyType = 'bigint';

  get hasSignals(): boolean {
    return this.signals;
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

  async detect(dataSource: DataSource): Promise<void> {
    const runner = dataSource.createQueryRunner();
    try {
      // hasColumn, not getTable: on MySQL getTable reads TypeORM's own metadata table for generated columns.
      this.signals =
        (await runner.hasTable('geneva_drive_signals')) &&
        (await runner.hasColumn('geneva_drive_step_executions', 'signal_id')) &&
        (await runner.hasColumn('geneva_drive_step_executions', 'waiting_since'));
      this.keys = await detectKeys(runner);
    } finally {
      await runner.release();
    }
    if (!this.signals) {
      const metadata = dataSource.getMetadata(StepExecution);
      for (const property of ['signalId', 'waitingSince']) {
        const column = metadata.findColumnWithPropertyName(property);
        if (column) {
          column.isSelect = false;
          column.isInsert = false;
          column.isUpdate = false;
        }
      }
    }
    if (this.keys === 'uuid') {
      useUuidKeys(dataSource, [
        { entity: WorkflowRecord, properties: [] },
        { entity: StepExecution, properties: ['workflowId', 'continuesFromId', 'signalId'] },
        { entity: Signal, properties: ['workflowId'] },
      ]);
    }
  }
}

/** The tables' common key type (bigint when they do not exist yet); tables that disagree stop the boot. */
async function detectKeys(runner: QueryRunner): Promise<PrimaryKeyType> {
  const found: string[] = [];
  let keys: PrimaryKeyType | null = null;
  for (const table of TABLES) {
    const type = await detectPrimaryKeyType(runner, table);
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
