/** Manual § Operations and § Scaling out. */
import { ConflictException, Controller, Get, Module, NotFoundException, Param, Post } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import {
  GENEVA_DRIVE_ENTITIES,
  GENEVA_DRIVE_MIGRATIONS,
  GenevaDriveModule,
  HousekeepingService,
  InvalidStateError,
  WorkflowNotFoundError,
  WorkflowService,
  type HousekeepingSummary,
  type WorkflowRecord,
} from 'geneva-drive';
import { OrderFulfillmentWorkflow } from './defining-workflows.js';
import { PaymentsService, SHOP_ENTITIES, ShippingService } from './shop.js';

// #region admin-controller
@Controller('admin/workflows')
export class WorkflowAdminController {
  constructor(private readonly workflows: WorkflowService) {}

  @Get('paused')
  paused(): Promise<WorkflowRecord[]> {
    return this.workflows.findByState('paused');
  }

  @Get(':id/history')
  async history(@Param('id') id: string) {
    const workflow = await this.workflows.find(id).catch(toHttp);
    return { workflow, executions: await this.workflows.executionHistory(workflow) };
  }

  @Post(':id/pause')
  pause(@Param('id') id: string) {
    return this.workflows.pause(id).catch(toHttp);
  }

  @Post(':id/resume')
  resume(@Param('id') id: string) {
    return this.workflows.resume(id).catch(toHttp);
  }

  @Post(':id/skip')
  skip(@Param('id') id: string) {
    return this.workflows.skip(id).catch(toHttp);
  }

  @Post(':id/cancel')
  cancel(@Param('id') id: string) {
    return this.workflows.cancel(id).catch(toHttp);
  }
}

/** 404 for an unknown id, 409 for an action the workflow's state does not allow (nothing changed). */
function toHttp(error: unknown): never {
  if (error instanceof WorkflowNotFoundError) throw new NotFoundException(error.message);
  if (error instanceof InvalidStateError) throw new ConflictException(error.message);
  throw error;
}
// #endregion admin-controller

// #region housekeeping-command
/** Everything the workflows need, and a queue that only enqueues: this process runs no steps. */
@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL, entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES], migrations: [...GENEVA_DRIVE_MIGRATIONS] }),
    GenevaDriveModule.forRoot({ queue: { adapter: 'bull', redis: process.env.REDIS_URL, concurrency: 0 }, housekeeping: false }),
  ],
  providers: [PaymentsService, ShippingService, OrderFulfillmentWorkflow],
})
export class HousekeepingCommandModule {}

export async function runHousekeeping(): Promise<HousekeepingSummary> {
  const app = await NestFactory.createApplicationContext(HousekeepingCommandModule, { logger: ['error', 'warn'] });
  try {
    const summary = await app.get(HousekeepingService).run();
    console.log(JSON.stringify(summary, null, 2));
    if (summary.unrecoverable.length > 0) process.exitCode = 1;
    return summary;
  } finally {
    await app.close();
  }
}
// #endregion housekeeping-command

// #region web-only
/** A web process: serves HTTP, starts workflows and sends signals, runs no steps. */
export const webTierGenevaDrive = GenevaDriveModule.forRoot({
  queue: { adapter: 'bull', redis: process.env.REDIS_URL, concurrency: 0 },
});

/** A worker process: eight step jobs at a time; it also takes its turn at housekeeping. */
export const workerGenevaDrive = GenevaDriveModule.forRoot({
  queue: { adapter: 'bull', redis: process.env.REDIS_URL, concurrency: 8 },
});
// #endregion web-only
