/** Manual § Health checks, and housekeeping on @nestjs/schedule. */
import { Controller, Get, Injectable, Module } from '@nestjs/common';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { GenevaDriveModule, HousekeepingService } from 'geneva-drive';
import { GenevaDriveHealthIndicator } from 'geneva-drive/terminus';

// #region health
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly workflows: GenevaDriveHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    // Down when the database or the queue does not answer, or past these gauges of the last housekeeping run.
    return this.health.check([() => this.workflows.isHealthy('workflows', { waitingOverdue: 100, stuck: 10 })]);
  }
}

@Module({ imports: [TerminusModule], controllers: [HealthController], providers: [GenevaDriveHealthIndicator] })
export class HealthModule {}
// #endregion health

// #region schedule
@Injectable()
export class HousekeepingJob {
  constructor(private readonly housekeeping: HousekeepingService) {}

  @Cron('*/30 * * * *') // every 30 minutes, in every process that registers this provider
  async run() {
    await this.housekeeping.run();
  }
}

@Module({
  imports: [ScheduleModule.forRoot(), GenevaDriveModule.forRoot({ queue: { adapter: 'local' }, housekeeping: false })],
  providers: [HousekeepingJob],
})
export class ScheduledHousekeepingModule {}
// #endregion schedule
