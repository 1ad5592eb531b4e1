import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { deleteWorkflows, stoppedBefore } from '../persistence/purge-queries.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import type { TransactionRunner } from '../persistence/transaction-runner.js';
import type { HousekeepingSummary } from './housekeeping-summary.js';

/**
 * Deletes the workflows finished or canceled longer than `deleteCompletedWorkflowsAfter` ago, with
 * their executions and signals, `housekeepingBatchSize` workflows per transaction, and counts them in
 * the summary. A no-op when `deleteCompletedWorkflowsAfter` is null.
 */
export async function purgeStoppedWorkflows(
  transactions: TransactionRunner,
  schema: SchemaCapabilities,
  options: Pick<ResolvedGenevaDriveOptions, 'deleteCompletedWorkflowsAfterMs' | 'housekeepingBatchSize'>,
  summary: HousekeepingSummary,
): Promise<void> {
  if (options.deleteCompletedWorkflowsAfterMs === null) return;
  const cutoff = new Date(Date.now() - options.deleteCompletedWorkflowsAfterMs);
  const batch = options.housekeepingBatchSize;
  for (;;) {
    const ids = await stoppedBefore(transactions.dataSource.manager, cutoff, batch);
    if (ids.length === 0) return;
    await transactions.run(async (manager) => {
      const deleted = await deleteWorkflows(manager, ids, schema.hasSignals);
      summary.signalsDeleted += deleted.signals;
      summary.stepExecutionsDeleted += deleted.executions;
      summary.workflowsDeleted += deleted.workflows;
    });
    if (ids.length < batch) return;
  }
}
