/**
 * PostgreSQL: a message of several statements that fails part-way is answered by an ErrorResponse
 * and then a ReadyForQuery carrying the session's transaction state, which the server sends
 * separately; a client may read the first before the second arrives. The engine decides what
 * committed from that state: it must wait for it. These tests hand the driver the server's answer
 * one protocol message per read, each read a turn of the event loop later, as a busy host does.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PostgresHotPathSql } from '../../libs/geneva-drive/src/persistence/sql/postgres.js';
import { createTestApp, type TestApp } from '../src/test-app.js';
import { enabledDatabases } from '../utils/databases.js';

type Stream = { listeners(event: 'data'): Array<(chunk: Buffer) => void>; removeAllListeners(event: 'data'): void; on(event: 'data', listener: (chunk: Buffer) => void): void };

/** Delivers what the server sends on `stream` one protocol message per `data` event, each in a later turn of the event loop. */
function oneMessagePerRead(stream: Stream): () => void {
  const readers = stream.listeners('data');
  stream.removeAllListeners('data');
  let pending = Buffer.alloc(0);
  let delivering = Promise.resolve();
  const split = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5 && pending.length >= 1 + pending.readUInt32BE(1)) {
      const message = pending.subarray(0, 1 + pending.readUInt32BE(1));
      pending = pending.subarray(message.length);
      delivering = delivering.then(() => new Promise<void>((resolve) => setImmediate(() => {
        for (const read of readers) read(message);
        resolve();
      })));
    }
  };
  stream.on('data', split);
  return () => {
    stream.removeAllListeners('data');
    for (const read of readers) stream.on('data', read);
  };
}

(enabledDatabases().includes('postgres') ? describe : describe.skip)('answers read one protocol message at a time [postgres]', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp('postgres', []);
  });
  afterAll(() => app?.close());

  it('COMMIT and the next BEGIN in one message, the read after them failing: the COMMIT went through, no transaction is left open', async () => {
    const sql = new PostgresHotPathSql(app.dataSource, false);
    await app.dataSource.query('CREATE TABLE IF NOT EXISTS message_answers (id int)');
    await app.dataSource.query('DELETE FROM message_answers');
    const runner = app.dataSource.createQueryRunner();
    const client = (await runner.connect()) as { connection: { stream: Stream }; getTransactionStatus(): string };
    const restore = oneMessagePerRead(client.connection.stream);
    try {
      await runner.startTransaction();
      await runner.query('INSERT INTO message_answers VALUES (1)');
      const failingRead = { sql: () => 'SELECT 1 / 0 AS never' };
      expect(await sql.commitAndBeginStep(runner.manager, 10_000, failingRead)).toBeNull();
      expect(client.getTransactionStatus()).toBe('I');
    } finally {
      restore();
      await runner.release();
    }
    expect(await app.dataSource.query('SELECT id FROM message_answers')).toEqual([{ id: 1 }]);
    await app.dataSource.query('DROP TABLE message_answers');
  });
});
