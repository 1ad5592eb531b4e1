import 'reflect-metadata';
import { ValidationPipe } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { AppModule } from './app.module.js';

async function bootstrap() {
  mkdirSync(dirname(resolve(process.env.SQLITE_FILE ?? 'apps/example/data/example.sqlite')), { recursive: true });
  const app = await NestFactory.create(AppModule);
  app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true }));
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  console.log(`geneva-drive example listening on http://localhost:${port} (${process.env.DATABASE_URL ? 'database from DATABASE_URL' : 'SQLite'}, ${process.env.REDIS_URL ? 'Bull on REDIS_URL' : 'local queue'})`);
}

void bootstrap();
