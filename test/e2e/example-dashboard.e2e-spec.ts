/**
 * The example application's dashboard wiring: /geneva behind the operator token of
 * GENEVA_DASHBOARD_TOKEN (bearer, or the password of Basic auth; malformed credentials are a 401),
 * behind a trusted TLS proxy a Secure CSRF cookie, absent without the token.
 */
import type { INestApplication } from '@nestjs/common';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { AppModule } from '../../apps/example/src/app.module.js';
import { configureApp } from '../../apps/example/src/configure-app.js';
import { workerDatabaseName } from '../utils/databases.js';

const TMP_DIR = fileURLToPath(new URL('../../.tmp/', import.meta.url));

async function boot(env: NodeJS.ProcessEnv): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule.forEnvironment(env)] }).setLogger(false as never).compile();
  const app = configureApp(moduleRef.createNestApplication<NestExpressApplication>({ logger: false }), env);
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

  it('answers malformed credentials 401, not 500', async () => {
    const app = await boot({ SQLITE_FILE: sqlite, GENEVA_DASHBOARD_TOKEN: 'night-shift' });
    try {
      // As many characters as the token, more bytes: a length check on characters let these reach timingSafeEqual, which threw.
      const raw = '\u00e9'.repeat('night-shift'.length); // sent as bytes 0xE9: Node writes header strings as latin1
      for (const authorization of [`Bearer ${raw}`, `Basic ${Buffer.from(`ops:${raw}`).toString('base64')}`, 'Bearer', 'Basic %%%', `Bearer ${'night-shift'.toUpperCase()}`, 'Bearer night-shift-and-more']) {
        const response = await request(app.getHttpServer()).get('/geneva/api/workflows').set('Authorization', authorization);
        expect({ authorization, status: response.status }).toEqual({ authorization, status: 401 });
      }
    } finally {
      await app.close();
    }
  });

  it('trusts a TLS proxy on this host: the CSRF cookie is then __Host- and Secure', async () => {
    const app = await boot({ SQLITE_FILE: sqlite, GENEVA_DASHBOARD_TOKEN: 'night-shift' });
    try {
      const plain = await request(app.getHttpServer()).get('/geneva/api/csrf').auth('ops', 'night-shift').expect(200);
      expect(String(plain.headers['set-cookie'])).toMatch(/^geneva_drive_csrf=[^;]+; Path=\/geneva; HttpOnly; SameSite=Strict$/);
      const proxied = await request(app.getHttpServer()).get('/geneva/api/csrf').auth('ops', 'night-shift').set('X-Forwarded-Proto', 'https').expect(200);
      expect(String(proxied.headers['set-cookie'])).toMatch(/^__Host-geneva_drive_csrf=[^;]+; Path=\/; Secure; HttpOnly; SameSite=Strict$/);
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
