import { Module, type DynamicModule } from '@nestjs/common';
import { TypeOrmModule, getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { GenevaDriveModule } from '../geneva-drive.module.js';
import type { QueueAdapterOptions } from '../interfaces/geneva-drive-options.interface.js';
import { OPERATOR_DATA_SOURCE } from '../operator/operator.constants.js';
import { WorkflowActions } from '../operator/workflow-actions.js';
import { WorkflowCatalog } from '../operator/workflow-catalog.js';
import { WorkflowReader } from '../operator/workflow-reader.js';
import type { GenevaDriveCliConfig } from '../interfaces/cli-config.interface.js';

const SILENT = { log: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined, verbose: () => undefined };

/** The queue of the CLI: the application's, enqueue-only; or none (manual: jobs are recorded and dropped). */
export function cliQueue(queue: QueueAdapterOptions | undefined): QueueAdapterOptions {
  if (queue?.adapter === 'bull' || queue?.adapter === 'bullmq') return { ...queue, concurrency: 0 };
  return queue ?? { adapter: 'manual' };
}

/** A minimal application context: the file's DataSource, geneva-drive without housekeeping timers, the reader and the actions. */
@Module({})
export class GenevaDriveCliModule {
  static register(dataSource: DataSource, config: GenevaDriveCliConfig): DynamicModule {
    return {
      module: GenevaDriveCliModule,
      imports: [
        TypeOrmModule.forRootAsync({
          useFactory: () => dataSource.options,
          dataSourceFactory: async () => (dataSource.isInitialized ? dataSource : dataSource.initialize()),
        }),
        GenevaDriveModule.forRoot({ queue: cliQueue(config.queue), housekeeping: false, logger: SILENT }),
        ...(config.imports ?? []),
      ],
      providers: [...(config.providers ?? []), { provide: OPERATOR_DATA_SOURCE, useExisting: getDataSourceToken() }, WorkflowCatalog, WorkflowReader, WorkflowActions],
    };
  }
}
