/**
 * The example application's dashboard wiring: /geneva behind the operator token of
 * GENEVA_DASHBOARD_TOKEN (bearer, or the password of Basic auth), absent without it.
 */
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { AppModule } from '../../apps/example/src/app.module.js';
import { workerDatabaseName } from '../utils/databases.js';

const TMP_DIR = fileURLToPath(new URL('../../.tmp/', import.meta.url));

async function boot(env: NodeJS.ProcessEnv): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule.forEnvironment(env)] }).setLogger(false as never).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

describe('example app: dashboard at /geneva', () => {
  const sqlite = `${TMP_DIR}${workerDatabaseName()}-example-dashboard.sqlite`;
  beforeAll(() => {
    mkdirSync(TMP_DIR, { recursive: true });
    rmSync(sqlite, { force: true });
  });
  afterAll(() => rmSync(sqlite, { force: true }));

  it('asks for the operator token, and lets it in as a bearer token or a Basic password', async () => {
    const app = await boot({ SQLITE_FILE: sqlite, GENEVA_DASHBOARD_TOKEN: 'night-shift' });
    try {
      const refused = await request(app.getHttpServer()).get('/geneva').expect(401);
      expect(refused.headers['www-authenticate']).toContain('Basic realm="geneva-drive"');
      await request(app.getHttpServer()).get('/geneva').auth('ops', 'wrong').expect(401);
      await request(app.getHttpServer()).get('/geneva').auth('ops', 'night-shift').expect(200);
      await request(app.getHttpServer()).get('/geneva/api/workflows').set('Authorization', 'Bearer night-shift').expect(200);
    } finally {
      await app.close();
    }
  });

  it('is not mounted without GENEVA_DASHBOARD_TOKEN', async () => {
    const app = await boot({ SQLITE_FILE: sqlite });
    try {
      await request(app.getHttpServer()).get('/geneva').expect(404);
    } finally {
      await app.close();
    }
  });
});
