/** Manual § Metrics: geneva-drive's Prometheus metrics in the application's own registry, and a worker's. */
import { Controller, Get, Header, Injectable, Module, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { GenevaDriveMetricsModule } from 'geneva-drive/metrics';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
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

// #region worker-metrics
/**
 * A worker is an application context (`NestFactory.createApplicationContext`): no HTTP server runs a
 * controller there. This provider serves the registry from a plain node:http server on a port of its
 * own (METRICS_PORT) while the worker runs, and closes it with the worker.
 */
@Injectable()
export class MetricsEndpoint implements OnApplicationBootstrap, OnApplicationShutdown {
  private server: Server | undefined;

  onApplicationBootstrap(): Promise<void> {
    this.server = createServer((_request, response) => {
      registry.metrics().then(
        (text) => response.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
        (error: Error) => response.writeHead(500).end(error.message),
      );
    });
    return new Promise((resolve) => this.server!.listen(Number(process.env.METRICS_PORT ?? 9464), resolve));
  }

  /** The port it listens on (METRICS_PORT=0 picks a free one). */
  get port(): number {
    return (this.server!.address() as AddressInfo).port;
  }

  onApplicationShutdown(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

/** Imported by the worker's module, next to GenevaDriveModule. */
@Module({ imports: [GenevaDriveMetricsModule.forRoot({ registry })], providers: [MetricsEndpoint] })
export class WorkerMetricsModule {}
// #endregion worker-metrics
