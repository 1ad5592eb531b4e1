/** Manual § Scaling out with Bull: the same queue on BullMQ, through @nestjs/bullmq. */
import { BullModule, InjectQueue } from '@nestjs/bullmq';
import { Injectable, Module } from '@nestjs/common';
import type { Queue } from 'bullmq';
import { GenevaDriveModule } from 'geneva-drive';

// #region nest-bullmq
@Injectable()
export class BullMqQueueDashboard {
  constructor(@InjectQueue('orders-workflows') private readonly queue: Queue) {}

  counts() {
    return this.queue.getJobCounts();
  }
}

@Module({
  imports: [
    BullModule.forRoot({ connection: { url: process.env.REDIS_URL }, prefix: 'shop-production' }),
    GenevaDriveModule.forRoot({
      queue: { adapter: 'bullmq', name: 'orders-workflows', concurrency: 4, worker: { lockDuration: 60_000 } },
    }),
  ],
  providers: [BullMqQueueDashboard],
})
export class BullMqWorkerModule {}
// #endregion nest-bullmq
