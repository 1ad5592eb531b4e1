/**
 * PostgreSQL's literals for the simple protocol (postgres.ts's sqlLiteral): what the hero key of a
 * transactional step's BEGIN rides on. Each value is read back by the server exactly, whatever
 * `standard_conforming_strings` says.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { sqlLiteral } from '../../libs/geneva-drive/src/persistence/sql/postgres.js';
import { enabledDatabases } from '../utils/databases.js';

const VALUES: unknown[] = ['plain', "O'Brien", 'back\\slash', "both \\' and ''", '', 'ünïcode ✓', '$1', 42, -7, 12345678901234567890n];

(enabledDatabases().includes('postgres') ? describe : describe.skip)('sqlLiteral [postgres]', () => {
  let dataSource: DataSource;
  beforeAll(async () => {
    dataSource = await new DataSource({ type: 'postgres', url: process.env.GD_PG_URL }).initialize();
  });
  afterAll(() => dataSource?.destroy());

  for (const conforming of ['on', 'off']) {
    it(`reads back every value exactly with standard_conforming_strings ${conforming}`, async () => {
      const runner = dataSource.createQueryRunner();
      try {
        await runner.query(`SET standard_conforming_strings = ${conforming}`);
        const read = [];
        for (const value of VALUES) read.push(((await runner.query(`SELECT (${sqlLiteral(value)})::text AS v`)) as Array<{ v: string }>)[0].v);
        expect(read).toEqual(VALUES.map(String));
      } finally {
        await runner.query('RESET standard_conforming_strings');
        await runner.release();
      }
    });
  }

  it('refuses what is not a number or a string', () => {
    for (const value of [null, undefined, {}, Number.NaN, true]) expect(() => sqlLiteral(value)).toThrow(TypeError);
  });
});
