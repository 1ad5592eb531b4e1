import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module.js';
import { configureApp, ensureDataDirectory } from './configure-app.js';

async function bootstrap() {
  ensureDataDirectory();
  const app = configureApp(await NestFactory.create<NestExpressApplication>(AppModule.forEnvironment()));
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  const steps = process.env.WORKER === '0' ? 'runs no steps' : process.env.REDIS_URL ? 'runs steps from Bull on REDIS_URL' : 'runs steps on the local queue';
  console.log(`geneva-drive example listening on http://localhost:${port} (${process.env.DATABASE_URL ? 'database from DATABASE_URL' : 'SQLite'}; ${steps})`);
}

void bootstrap();
