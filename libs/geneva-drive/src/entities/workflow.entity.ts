import { Column, Entity, PrimaryColumn } from 'typeorm';
import { ONGOING_WORKFLOW_STATES, type WorkflowState } from '../state/workflow-state.js';
import { booleanTransformer, identifierTransformer, idTransformer, nullableBooleanTransformer } from './column-transformers.js';
import { jsonColumnTransformer } from './json-column.js';

/**
 * One workflow instance about one hero. The row is the workflow's state of record; its lock
 * serialises every change to the workflow, its executions and its signals.
 * @publicApi
 */
// The migrations own the schema (partial indexes, generated columns): never synchronize it.
@Entity({ name: 'geneva_drive_workflows', synchronize: false })
export class WorkflowRecord {
  @PrimaryColumn({ type: 'bigint', generated: 'increment', transformer: idTransformer })
  id: string;

  /** The stable workflow type name (`@Workflow({ name })`, default the class name). */
  @Column({ type: 'varchar', length: 255, transformer: identifierTransformer })
  type: string;

  /** TypeORM entity name of the hero. */
  @Column({ name: 'hero_type', type: 'varchar', length: 255, transformer: identifierTransformer })
  heroType: string;

  /** Primary key of the hero, as a string (integer and uuid keys both fit). */
  @Column({ name: 'hero_id', type: 'varchar', length: 191, transformer: identifierTransformer })
  heroId: string;

  @Column({ type: 'varchar', length: 32})
  state: WorkflowState;

  /** The step whose body is running right now; null between steps. */
  @Column({ name: 'current_step_name', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  currentStepName: string | null;

  /** The step the most recently created execution targets (still the failed step after a failure). */
  @Column({ name: 'next_step_name', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  nextStepName: string | null;

  @Column({ name: 'allow_multiple', type: 'boolean', transformer: booleanTransformer })
  allowMultiple: boolean;

  /** When the first step started. */
  @Column({ name: 'started_at', type: Date, nullable: true })
  startedAt: Date | null;

  /** When the workflow last entered `paused`, `finished` or `canceled`; cleared by `resume`. */
  @Column({ name: 'transitioned_at', type: Date, nullable: true })
  transitionedAt: Date | null;

  /** When the workflow entered `finished` or `canceled`. */
  @Column({ name: 'finished_at', type: Date, nullable: true })
  finishedAt: Date | null;

  /** The workflow whose step started this one (`this.startChild`); null for a workflow started by `start()`. */
  @Column({ name: 'parent_id', type: 'bigint', nullable: true, transformer: idTransformer })
  parentId: string | null;

  /** The parent's step that started this child. */
  @Column({ name: 'parent_step_name', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  parentStepName: string | null;

  /** The child's key among the children of that step (the position of the `startChild` call unless given). */
  @Column({ name: 'child_key', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  childKey: string | null;

  /** What canceling the parent does to this child while it is ongoing: `cancel` it, or `abandon` it (leave it running). */
  @Column({ name: 'on_parent_cancel', type: 'varchar', length: 16, nullable: true })
  onParentCancel: 'cancel' | 'abandon' | null;

  /** True once a step of this workflow started children (their cancellation then follows this one's); null before. */
  @Column({ name: 'has_children', type: 'boolean', nullable: true, transformer: nullableBooleanTransformer })
  hasChildren: boolean | null;

  /** What a step stored with `this.setResult(value)` (a child's result, delivered to its parent). */
  @Column({ type: 'text', nullable: true, transformer: jsonColumnTransformer })
  result: any;

  @Column({ name: 'created_at', type: Date })
  createdAt: Date;

  @Column({ name: 'updated_at', type: Date })
  updatedAt: Date;

  isOngoing(): boolean {
    return ONGOING_WORKFLOW_STATES.includes(this.state);
  }
  isReady(): boolean {
    return this.state === 'ready';
  }
  isPerforming(): boolean {
    return this.state === 'performing';
  }
  isPaused(): boolean {
    return this.state === 'paused';
  }
  isFinished(): boolean {
    return this.state === 'finished';
  }
  isCanceled(): boolean {
    return this.state === 'canceled';
  }
}
