import { Column, Entity, PrimaryColumn } from 'typeorm';
import { counterTransformer, identifierTransformer, idTransformer } from './column-transformers.js';
import { jsonColumnTransformer } from './json-column.js';

import type { SignalState } from '../state/signal-state.js';

export type { SignalState };

/**
 * An external event addressed to one workflow, persisted before anything is dispatched.
 * @publicApi
 */
// The migrations own the schema (partial indexes, generated columns): never synchronize it.
@Entity({ name: 'geneva_drive_signals', synchronize: false })
export class Signal<Payload = any> {
  @PrimaryColumn({ type: 'bigint', generated: 'increment', transformer: idTransformer })
  id: string;

  @Column({ name: 'workflow_id', type: 'bigint', transformer: idTransformer })
  workflowId: string;

  @Column({ type: 'varchar', length: 255, transformer: identifierTransformer })
  name: string;

  @Column({ name: 'idempotency_key', type: 'varchar', length: 255, nullable: true, transformer: identifierTransformer })
  idempotencyKey: string | null;

  @Column({ type: 'varchar', length: 16})
  state: SignalState;

  @Column({ type: 'text', nullable: true, transformer: jsonColumnTransformer })
  payload: Payload;

  /** How many executions attached to this signal. */
  @Column({ type: 'bigint', transformer: counterTransformer })
  claimed: number;

  /** How many attached execution chains resolved cleanly. */
  @Column({ type: 'bigint', transformer: counterTransformer })
  consumed: number;

  @Column({ name: 'claimed_at', type: Date, nullable: true })
  claimedAt: Date | null;

  @Column({ name: 'consumed_at', type: Date, nullable: true })
  consumedAt: Date | null;

  @Column({ name: 'created_at', type: Date })
  createdAt: Date;

  @Column({ name: 'updated_at', type: Date })
  updatedAt: Date;

  /** True when this call was a redelivery of an already recorded event (not persisted). */
  duplicateDelivery = false;

  /** At least one execution attached (reads the counter, not the lifecycle state). */
  isClaimed(): boolean {
    return this.claimed > 0;
  }

  /** At least one attached chain resolved cleanly (reads the counter, not the lifecycle state). */
  isConsumed(): boolean {
    return this.consumed > 0;
  }
}
