import type { DataSource } from 'typeorm';
import { StepExecution } from '../entities/step-execution.entity.js';

/**
 * What the database schema supports, detected once at boot. Without the signals migration the
 * signal columns are taken out of the entity's SELECT/INSERT/UPDATE lists, so everything else keeps
 * working against the older schema.
 */
export class SchemaCapabilities {
  private signals = true;

  get hasSignals(): boolean {
    return this.signals;
  }

  async detect(dataSource: DataSource): Promise<void> {
    const runner = dataSource.createQueryRunner();
    try {
      // hasColumn, not getTable: on MySQL getTable reads TypeORM's own metadata table for generated columns.
      this.signals =
        (await runner.hasTable('geneva_drive_signals')) &&
        (await runner.hasColumn('geneva_drive_step_executions', 'signal_id')) &&
        (await runner.hasColumn('geneva_drive_step_executions', 'waiting_since'));
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
  }
}
