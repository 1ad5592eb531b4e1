import { Controller, Get } from '@nestjs/common';
import { DataSource } from 'typeorm';

/** `GET /health`: answers once the application is up (the demo waits for it). */
@Controller('health')
export class HealthController {
  constructor(private readonly dataSource: DataSource) {}

  @Get()
  health() {
    return { status: 'ok', database: this.dataSource.options.type };
  }
}
