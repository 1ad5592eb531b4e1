import type { EntityManager, ObjectLiteral } from 'typeorm';
import { Signal } from '../entities/signal.entity.js';
import { StepExecution } from '../entities/step-execution.entity.js';
import { PENDING } from '../state/signal-state.js';
import { WorkflowRecord } from '../entities/workflow.entity.js';
import type { SchemaCapabilities } from './schema-capabilities.js';

/** Options for a new execution. */
export interface NewExecution {
  waitMs?: number;
  signalId?: string | null;
  cursor?: unknown;
  continuesFromId?: string | null;
  /** Runs as its wait's timeout: the gate passes with no signal (the step run again after it timed out: rerunsTimedOut). */
  timedOut?: boolean;
}

/** A new `ready` workflow, not written yet. */
export function newWorkflow(
  manager: EntityManager,
  schema: SchemaCapabilities,
  now: Date,
  values: Pick<WorkflowRecord, 'type' | 'heroType' | 'heroId' | 'allowMultiple'>,
  nextStepName: string | null,
): WorkflowRecord {
  // Every nullable column explicitly null, so the record `start` returns reads like the row.
  return schema.withNewId(created(manager, WorkflowRecord, {
    ...values,
    state: 'ready',
    currentStepName: null,
    nextStepName,
    parentId: null,
    parentStepName: null,
    childKey: null,
    onParentCancel: null,
    hasChildren: null,
    result: null,
    startedAt: null,
    transitionedAt: null,
    finishedAt: null,
    createdAt: now,
    updatedAt: now,
  }));
}

/** A new `scheduled` execution, not written yet (its id is set on uuid keys only). */
export function newExecution(manager: EntityManager, schema: SchemaCapabilities, now: Date, workflowId: string, stepName: string, options: NewExecution): StepExecution {
  return schema.withNewId(created(manager, StepExecution, {
    workflowId,
    stepName,
    state: 'scheduled',
    scheduledFor: new Date(now.getTime() + (options.waitMs ?? 0)),
    metadata: options.timedOut ? { timedOut: true } : null,
    cursor: options.cursor ?? null,
    continuesFromId: options.continuesFromId ?? null,
    signalId: options.signalId ?? null,
    createdAt: now,
    updatedAt: now,
  }));
}

/** A new `pending` signal, not written yet (its id is set on uuid keys only). */
export function newSignal(
  manager: EntityManager,
  schema: SchemaCapabilities,
  now: Date,
  workflowId: string,
  values: { name: string; payload: unknown; idempotencyKey: string | null },
): Signal {
  return schema.withNewId(created(manager, Signal, {
    workflowId,
    name: values.name,
    idempotencyKey: values.idempotencyKey,
    state: PENDING,
    payload: values.payload as Record<string, unknown>,
    claimed: 0,
    consumed: 0,
    claimedAt: null,
    consumedAt: null,
    createdAt: now,
    updatedAt: now,
  }));
}

/**
 * The entity `manager.create` would make of `values`, for the engine's own flat entities (no
 * relations, no embeddeds): its class's instance with the values set, without the per-column
 * copy through the metadata that `create` makes for every new row of the hot path.
 */
function created<T extends ObjectLiteral>(manager: EntityManager, target: new () => T, values: Partial<T>): T {
  const entity = manager.connection.getMetadata(target).create() as Record<string, unknown>;
  // As `create`, an undefined value leaves the property as the class made it.
  for (const [property, value] of Object.entries(values)) if (value !== undefined) entity[property] = value;
  return entity as T;
}
