import type { EntityManager } from 'typeorm';
import type { WaitDeadline } from '../execution/wait-deadline.js';
import type { ResolvedGenevaDriveOptions } from '../interfaces/geneva-drive-options.interface.js';
import { flowKeyGauges, gaugeOf, pausedGauge, recoveryLimitPausedGauge, waitingGauges } from '../persistence/gauges.js';
import type { SchemaCapabilities } from '../persistence/schema-capabilities.js';
import type { HousekeepingSummary } from './housekeeping-summary.js';

/**
 * The gauges a housekeeping run reports (HousekeepingSummary.gauges): parked executions and the
 * overdue ones, paused workflows and those the recovery limit paused, the wait deadlines, and the
 * executions waiting for or holding a concurrency key's slot. Null without the signals migration.
 */
export async function readHousekeepingGauges(
  manager: EntityManager,
  schema: SchemaCapabilities,
  options: Pick<ResolvedGenevaDriveOptions, 'waitingVisibilityThresholdMs'>,
  deadline: WaitDeadline,
): Promise<HousekeepingSummary['gauges']> {
  if (!schema.hasSignals) return null;
  const threshold = options.waitingVisibilityThresholdMs;
  // With the threshold off, nothing is ever overdue and the overdue gauge is not reported.
  const { waiting, overdue } = await waitingGauges(manager, threshold === null ? null : new Date(Date.now() - threshold));
  const paused = await recoveryLimitPausedGauge(manager);
  const always = { 'geneva_drive.recovery_limit_paused': paused, 'geneva_drive.paused_workflows': await pausedGauge(manager) };
  const gauges: NonNullable<HousekeepingSummary['gauges']> =
    overdue === null
      ? { 'geneva_drive.waiting_step_executions': waiting, ...always }
      : { 'geneva_drive.waiting_step_executions': waiting, 'geneva_drive.waiting_overdue': overdue, ...always };
  const deadlines = await deadline.readGauges();
  if (deadlines) {
    gauges['geneva_drive.waiting_with_deadline'] = gaugeOf(deadlines.withDeadline);
    gauges['geneva_drive.deadlines_overdue'] = gaugeOf(deadlines.overdue);
  }
  if (schema.hasFlowControl) {
    const { waiting: flowWaiting, holding } = await flowKeyGauges(manager);
    gauges['geneva_drive.flow_key_waiting'] = flowWaiting;
    gauges['geneva_drive.flow_key_holding'] = holding;
  }
  return gauges;
}
