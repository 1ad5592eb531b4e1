import type { GenevaDriveModuleOptions, ResolvedGenevaDriveOptions } from './interfaces/geneva-drive-options.interface.js';
import { QueueConfigurationError } from './errors/queue-configuration.error.js';
import type { QueuePort } from './queue/queue.port.js';
import { requireDuration } from './util/duration.js';

const KNOWN_ADAPTERS = ['bull', 'local', 'manual'];
const PORT_METHODS = ['enqueue', 'start', 'repeat', 'stop'] as const;

/** True when `adapter` is an object implementing every method of `QueuePort`. */
export function isQueuePort(adapter: unknown): adapter is QueuePort {
  return typeof adapter === 'object' && adapter !== null && PORT_METHODS.every((method) => typeof (adapter as Record<string, unknown>)[method] === 'function');
}

/** Applies defaults and validates the module options once, at boot, with errors that name the option. */
export function resolveOptions(options: GenevaDriveModuleOptions = {}): ResolvedGenevaDriveOptions {
  const queue = options.queue ?? { adapter: 'local' };
  if (typeof queue.adapter === 'object' && queue.adapter !== null) {
    if (!isQueuePort(queue.adapter)) {
      const missing = PORT_METHODS.filter((method) => typeof (queue.adapter as unknown as Record<string, unknown>)[method] !== 'function');
      throw new QueueConfigurationError(`geneva-drive: queue.adapter is an object but does not implement QueuePort (missing ${missing.join(', ')})`);
    }
  } else if (!KNOWN_ADAPTERS.includes(queue.adapter)) {
    throw new QueueConfigurationError(
      `geneva-drive: queue.adapter must be one of ${KNOWN_ADAPTERS.join(', ')} or an object implementing QueuePort, got ${JSON.stringify(queue.adapter)}`,
    );
  }
  const stuckRecoveryAction = options.stuckRecoveryAction ?? 'reattempt';
  if (stuckRecoveryAction !== 'reattempt' && stuckRecoveryAction !== 'cancel') {
    throw new TypeError(`geneva-drive: stuckRecoveryAction must be 'reattempt' or 'cancel', got ${JSON.stringify(stuckRecoveryAction)}`);
  }
  const maxSignalPayloadSize = options.maxSignalPayloadSize === undefined ? 131_072 : options.maxSignalPayloadSize;
  if (maxSignalPayloadSize !== null && !(Number.isInteger(maxSignalPayloadSize) && maxSignalPayloadSize > 0)) {
    throw new TypeError('geneva-drive: maxSignalPayloadSize must be a positive integer or null');
  }
  const maxCursorSize = options.maxCursorSize ?? 131_072;
  if (!(Number.isInteger(maxCursorSize) && maxCursorSize > 0)) throw new TypeError('geneva-drive: maxCursorSize must be a positive integer');
  const batch = options.housekeepingBatchSize ?? 1000;
  if (!Number.isInteger(batch) || batch <= 0) throw new TypeError('geneva-drive: housekeepingBatchSize must be a positive integer');
  return {
    queue,
    dataSource: options.dataSource,
    enqueueAfterCommit: options.enqueueAfterCommit ?? true,
    maxSignalPayloadSize,
    maxCursorSize,
    waitingVisibilityThresholdMs:
      options.waitingVisibilityThreshold === null ? null : requireDuration(options.waitingVisibilityThreshold ?? '7d', 'waitingVisibilityThreshold'),
    deleteCompletedWorkflowsAfterMs:
      options.deleteCompletedWorkflowsAfter === null
        ? null
        : requireDuration(options.deleteCompletedWorkflowsAfter ?? '30d', 'deleteCompletedWorkflowsAfter'),
    stuckInProgressThresholdMs: requireDuration(options.stuckInProgressThreshold ?? '1h', 'stuckInProgressThreshold'),
    stuckScheduledThresholdMs: requireDuration(options.stuckScheduledThreshold ?? '15m', 'stuckScheduledThreshold'),
    stuckRecoveryAction,
    housekeepingBatchSize: batch,
    housekeepingEveryMs:
      options.housekeeping === false ? null : requireDuration((options.housekeeping ?? { every: '30m' }).every, 'housekeeping.every'),
    logger: options.logger,
  };
}

