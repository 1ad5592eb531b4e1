import type { ModuleMetadata, Provider } from '@nestjs/common';
import type { QueueAdapterOptions } from './geneva-drive-options.interface.js';

/**
 * What the data-source file may export next to its DataSource, as `genevaDrive`: the workflow
 * classes (with the providers they need) and the queue the application's workers listen on.
 * @publicApi
 */
export interface GenevaDriveCliConfig {
  /**
   * The application's workflow classes and their dependencies. Needed to wake a parked step with
   * `signal`, and for `resume` and `skip`: their matchers and step lists live in the classes.
   */
  providers?: Provider[];
  /** Modules those providers need. */
  imports?: ModuleMetadata['imports'];
  /**
   * The application's queue, so that a step woken (or resumed, or skipped to) from the shell is
   * enqueued where the workers are: `{ adapter: 'bull' | 'bullmq', redis, name?, prefix? }` (the CLI itself
   * never processes jobs: concurrency is 0). Without it the CLI records its jobs nowhere and the
   * application's housekeeping enqueues the due execution after `stuckScheduledThreshold`.
   * @default { adapter: 'manual' }
   */
  queue?: QueueAdapterOptions;
}
