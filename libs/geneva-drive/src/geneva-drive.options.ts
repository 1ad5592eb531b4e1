import { InvalidOptionError } from './errors/invalid-option.error.js';
import { QueueConfigurationError } from './errors/queue-configuration.error.js';
import type { GenevaDriveModuleOptions, QueueAdapterOptions, ResolvedGenevaDriveOptions } from './interfaces/geneva-drive-options.interface.js';
import type { QueuePort } from './interfaces/queue.port.js';
import { parseDuration } from './util/duration.js';
import { rejectUnknownKeys } from './util/unknown-keys.js';

/** Every module option, so that a misspelled one stops the boot (a Record: adding an option to the interface without listing it here does not compile). */
const MODULE_OPTIONS: Record<keyof GenevaDriveModuleOptions, true> = {
  queue: true,
  dataSource: true,
  enqueueAfterCommit: true,
  maxSignalPayloadSize: true,
  maxCursorSize: true,
  waitingVisibilityThreshold: true,
  deleteCompletedWorkflowsAfter: true,
  stuckInProgressThreshold: true,
  stuckScheduledThreshold: true,
  stuckRecoveryAction: true,
  maxRecoveries: true,
  housekeepingBatchSize: true,
  housekeeping: true,
  chainSteps: true,
  preparedStatements: true,
  logger: true,
};

const PORT_METHODS = ['enqueue', 'start', 'repeat', 'stop'] as const;

/** True when `adapter` is an object implementing every method of `QueuePort`. */
export function isQueuePort(adapter: unknown): adapter is QueuePort {
  return typeof adapter === 'object' && adapter !== null && PORT_METHODS.every((method) => typeof (adapter as Record<string, unknown>)[method] === 'function');
}

const QUEUE_OPTIONS: Record<Exclude<QueueAdapterOptions['adapter'], QueuePort>, string[]> = {
  bull: ['adapter', 'redis', 'name', 'prefix', 'concurrency', 'configKey', 'limiter', 'settings', 'defaultJobOptions', 'createClient'],
  bullmq: ['adapter', 'redis', 'name', 'prefix', 'concurrency', 'configKey', 'defaultJobOptions', 'worker'],
  local: ['adapter', 'concurrency'],
  manual: ['adapter'],
};

const WHERE = 'GenevaDriveModule';

function fail(option: string, problem: string): never {
  throw new InvalidOptionError(WHERE, option, problem);
}

function requireDuration(value: unknown, option: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) fail(option, `${option} must be a duration (milliseconds or a string like '15m'), got ${JSON.stringify(value)}`);
  return ms;
}

/**
 * Applies defaults and validates the module options once, at boot, with errors that name the option.
 * `declaredDataSource` is the `dataSource` given to `forRoot`/beside `forRootAsync`'s factory; the
 * factory may return it instead (not both, unless they agree).
 */
export function resolveOptions(options: GenevaDriveModuleOptions = {}, declaredDataSource?: string): ResolvedGenevaDriveOptions {
  if (typeof options !== 'object' || options === null) fail('options', `the options must be an object, got ${options === null ? 'null' : typeof options}`);
  rejectUnknownKeys(WHERE, options, Object.keys(MODULE_OPTIONS), '', (key) =>
    key === 'isGlobal' ? 'isGlobal goes beside useFactory in forRootAsync, not in the options it returns' : undefined,
  );
  const queue = options.queue ?? { adapter: 'local' };
  if (typeof queue.adapter === 'object' && queue.adapter !== null) {
    if (!isQueuePort(queue.adapter)) {
      const missing = PORT_METHODS.filter((method) => typeof (queue.adapter as unknown as Record<string, unknown>)[method] !== 'function');
      throw new QueueConfigurationError(`geneva-drive: queue.adapter is an object but does not implement QueuePort (missing ${missing.join(', ')})`);
    }
  } else {
    if (!Object.hasOwn(QUEUE_OPTIONS, queue.adapter)) {
      fail('queue.adapter', `queue.adapter must be one of ${Object.keys(QUEUE_OPTIONS).join(', ')} or an object implementing QueuePort, got ${JSON.stringify(queue.adapter)}`);
    }
    rejectUnknownKeys(WHERE, queue, QUEUE_OPTIONS[queue.adapter], 'queue.');
  }
  if (options.dataSource !== undefined && declaredDataSource !== undefined && options.dataSource !== declaredDataSource) {
    fail('dataSource', `dataSource is "${declaredDataSource}" beside useFactory but "${options.dataSource}" in what it returns: give it once`);
  }
  const dataSource = options.dataSource ?? declaredDataSource;
  if (dataSource !== undefined && (typeof dataSource !== 'string' || dataSource.trim() === '')) fail('dataSource', 'dataSource must be the name of a TypeORM DataSource');
  const stuckRecoveryAction = options.stuckRecoveryAction ?? 'reattempt';
  if (stuckRecoveryAction !== 'reattempt' && stuckRecoveryAction !== 'cancel') {
    fail('stuckRecoveryAction', `stuckRecoveryAction must be 'reattempt' or 'cancel', got ${JSON.stringify(stuckRecoveryAction)}`);
  }
  const maxRecoveries = options.maxRecoveries === undefined ? 3 : options.maxRecoveries;
  if (maxRecoveries !== null && !(Number.isInteger(maxRecoveries) && maxRecoveries >= 0)) {
    fail('maxRecoveries', `maxRecoveries must be a non-negative integer or null, got ${String(maxRecoveries)}`);
  }
  const maxSignalPayloadSize = options.maxSignalPayloadSize === undefined ? 131_072 : options.maxSignalPayloadSize;
  if (maxSignalPayloadSize !== null && !(Number.isInteger(maxSignalPayloadSize) && maxSignalPayloadSize > 0)) {
    fail('maxSignalPayloadSize', 'maxSignalPayloadSize must be a positive integer or null');
  }
  const maxCursorSize = options.maxCursorSize ?? 131_072;
  if (!(Number.isInteger(maxCursorSize) && maxCursorSize > 0)) fail('maxCursorSize', 'maxCursorSize must be a positive integer');
  const batch = options.housekeepingBatchSize ?? 1000;
  if (!Number.isInteger(batch) || batch <= 0) fail('housekeepingBatchSize', 'housekeepingBatchSize must be a positive integer');
  const housekeeping = options.housekeeping ?? { every: '30m' };
  if (housekeeping !== false) rejectUnknownKeys(WHERE, housekeeping, ['every'], 'housekeeping.');
  const chain = options.chainSteps ?? {};
  if (chain !== false && (typeof chain !== 'object' || chain === null)) fail('chainSteps', 'chainSteps must be false or { maxSteps?, maxDuration? }');
  if (chain !== false) rejectUnknownKeys(WHERE, chain, ['maxSteps', 'maxDuration'], 'chainSteps.');
  const maxChainSteps = chain === false ? 0 : (chain.maxSteps ?? 10);
  if (!(Number.isInteger(maxChainSteps) && maxChainSteps >= 0)) fail('chainSteps', 'chainSteps.maxSteps must be a non-negative integer');
  if (options.preparedStatements !== undefined && typeof options.preparedStatements !== 'boolean') fail('preparedStatements', 'preparedStatements must be true or false');
  return {
    queue,
    dataSource,
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
    maxRecoveries,
    housekeepingBatchSize: batch,
    housekeepingEveryMs: housekeeping === false ? null : requireDuration(housekeeping.every, 'housekeeping.every'),
    chainSteps: { maxSteps: maxChainSteps, maxDurationMs: chain === false ? 0 : requireDuration(chain.maxDuration ?? '100ms', 'chainSteps.maxDuration') },
    preparedStatements: options.preparedStatements ?? true,
    logger: options.logger,
  };
}
