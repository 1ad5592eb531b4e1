/** Manual § Metrics: geneva-drive's Prometheus metrics in the application's own registry. */
import { Controller, Get, Header, Module } from '@nestjs/common';
import { GenevaDriveMetricsModule } from 'geneva-drive/metrics';
import { collectDefaultMetrics, Registry } from 'prom-client';

// #region metrics
export const registry = new Registry();
collectDefaultMetrics({ register: registry }); // the process metrics too, if you like

@Controller('metrics')
export class MetricsController {
  @Get()
  @Header('Content-Type', registry.contentType)
  scrape() {
    return registry.metrics();
  }
}

@Module({ imports: [GenevaDriveMetricsModule.forRoot({ registry })], controllers: [MetricsController] })
export class MetricsModule {}
// #endregion metrics
