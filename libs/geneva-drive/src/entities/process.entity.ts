import { Column, Entity, PrimaryColumn } from 'typeorm';
import { booleanTransformer } from './column-transformers.js';
import { jsonColumnTransformer } from './json-column.js';

/** What one process can run of one workflow class (registry/runnable-steps.ts reads it). */
export interface ProcessCatalogEntry {
  /** The steps the class defines, in run order. */
  steps: string[];
  /** Steps the class declares removed: a process that knows the removal may skip them. */
  removedSteps: string[];
  /** The class skips steps it does not define (`skipUndefinedSteps`). */
  skipUndefinedSteps: boolean;
}

/** Workflow type → what a process can run of it. */
export type ProcessCatalog = Record<string, ProcessCatalogEntry>;

/**
 * One process of the application that runs geneva-drive, as it last said it was alive: written when
 * it starts and on each heartbeat, deleted when it stops cleanly. Housekeeping reads the live ones
 * to report executions no live process can run (a class or step missing from every worker).
 */
// The migrations own the schema: never synchronize it.
@Entity({ name: 'geneva_drive_processes', synchronize: false })
export class ProcessRecord {
  /** `<host>:<pid>:<random>`, chosen by the process at boot. */
  @PrimaryColumn({ type: 'varchar', length: 255 })
  id: string;

  @Column({ type: 'varchar', length: 255 })
  host: string;

  @Column({ type: 'integer' })
  pid: number;

  /** Whether it takes step jobs from the queue (a consumer with `concurrency` above 0). */
  @Column({ name: 'runs_steps', type: 'boolean', transformer: booleanTransformer })
  runsSteps: boolean;

  /** The workflow classes it registers, and their steps. */
  @Column({ type: 'text', transformer: jsonColumnTransformer })
  catalog: ProcessCatalog;

  @Column({ name: 'started_at', type: Date })
  startedAt: Date;

  /** Its last heartbeat, by its own clock. */
  @Column({ name: 'seen_at', type: Date })
  seenAt: Date;
}
