/**
 * The queue's DI tokens and the modules that hold the queues @nestjs/bull and @nestjs/bullmq build:
 * a leaf, so that queue-registration.ts and the adapter modules it loads lazily need not import each other.
 */
import { Module } from '@nestjs/common';

/** The Bull queue @nestjs/bull built for the engine, and the gate its processor hands jobs through. */
export const ENGINE_BULL_QUEUE = Symbol.for('geneva-drive:bull-queue');
export const STEP_JOB_GATE = Symbol.for('geneva-drive:step-job-gate');

/** The BullMQ queue @nestjs/bullmq built for the engine, and its consumer (null in an enqueue-only process). */
export const ENGINE_BULLMQ_QUEUE = Symbol.for('geneva-drive:bullmq-queue');
export const ENGINE_BULLMQ_CONSUMER = Symbol.for('geneva-drive:bullmq-consumer');

/** Holds the engine's `BullModule.registerQueue` (built in bull-queue.module.ts) and re-exports its queue token. */
@Module({})
export class GenevaDriveBullQueueModule {}

/** The same for @nestjs/bullmq (bullmq-queue.module.ts). */
@Module({})
export class GenevaDriveBullMqQueueModule {}
