/**
 * A dashboard guard class that injects a provider of the application: `forRoot` cannot resolve it
 * (the class is instantiated in the dashboard's module, which imports nothing of the application),
 * `forRootAsync({ imports })` can, as the manual's §9.6 says.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable, Module, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import request from 'supertest';
import { GenevaDriveModule } from 'geneva-drive';
import { GenevaDriveDashboardModule } from 'geneva-drive/dashboard';
import { engineLogger } from '../src/test-app.js';
import { dataSourceOptions, prepareDatabase } from '../utils/databases.js';

@Injectable()
class OperatorTokens {
  accepts(token: unknown): boolean {
    return token === 'operator-secret';
  }
}

@Module({ providers: [OperatorTokens], exports: [OperatorTokens] })
class AuthModule {}

@Injectable()
class OperatorGuard implements CanActivate {
  constructor(private readonly tokens: OperatorTokens) {}

  canActivate(context: ExecutionContext): boolean {
    return this.tokens.accepts(context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>().headers['x-operator-token']);
  }
}

describe('a dashboard guard class with a dependency', () => {
  let app: INestApplication | undefined;
  afterEach(() => app?.close());

  const boot = async (dashboard: ReturnType<typeof GenevaDriveDashboardModule.forRoot>) => {
    await prepareDatabase('sqlite');
    const moduleRef = await Test.createTestingModule({
      imports: [
        TypeOrmModule.forRoot(dataSourceOptions('sqlite')),
        GenevaDriveModule.forRoot({ queue: { adapter: 'manual' }, housekeeping: false, logger: engineLogger() }),
        AuthModule,
        dashboard,
      ],
    })
      .setLogger(engineLogger())
      .compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return app;
  };

  it('cannot be resolved by forRoot, which imports nothing of the application', async () => {
    await expect(boot(GenevaDriveDashboardModule.forRoot({ guard: OperatorGuard }))).rejects.toThrow(/can't resolve dependencies of the OperatorGuard/);
  });

  it('gets its dependencies from the modules of forRootAsync({ imports })', async () => {
    const server = (await boot(GenevaDriveDashboardModule.forRootAsync({ imports: [AuthModule], useFactory: () => ({ guard: OperatorGuard }) }))).getHttpServer();
    await request(server).get('/geneva/api/overview').expect(403);
    await request(server).get('/geneva/api/overview').set('x-operator-token', 'operator-secret').expect(200);
  });
});
