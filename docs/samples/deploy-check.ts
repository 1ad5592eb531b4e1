/** docs/deploy-check.md: the pre-deploy check in an application's own CI. */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DeployCheck, GENEVA_DRIVE_ENTITIES, GenevaDriveModule, type DeployCheckReport } from 'geneva-drive';
import { OrderFulfillmentWorkflow } from './defining-workflows.js';
import { PaymentsService, SHOP_ENTITIES, ShippingService } from './shop.js';

// #region deploy-check
/** The release's workflow classes on the production database; a queue that runs nothing, no housekeeping. */
@Module({
  imports: [
    TypeOrmModule.forRoot({ type: 'postgres', url: process.env.DATABASE_URL, entities: [...SHOP_ENTITIES, ...GENEVA_DRIVE_ENTITIES] }),
    GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false }),
  ],
  providers: [PaymentsService, ShippingService, OrderFulfillmentWorkflow],
})
export class DeployCheckModule {}

export async function checkDeploy(): Promise<DeployCheckReport> {
  const app = await NestFactory.createApplicationContext(DeployCheckModule, { logger: ['error'] });
  try {
    const report = await app.get(DeployCheck).run();
    for (const row of report.stranded) {
      console.error(`${row.workflowType} at ${row.stepName}: ${row.workflows} workflow(s), ${row.reason}`);
    }
    if (!report.ok) process.exitCode = 1;
    return report;
  } finally {
    await app.close();
  }
}
// #endregion deploy-check
