/**
 * The schedule explorer itself (test/utils/explorer), on plain transactions of the engine's
 * DataSource: what it offers at a choice point once a lock wait has ended, and what a failed run
 * leaves behind. A proof built on it is only as good as these two.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EntityManager } from 'typeorm';
import { INTERLEAVING_WORKFLOWS } from '../src/interleaving-workflows.js';
import { enabledDatabases } from '../utils/databases.js';
import { ExplorerHarness } from '../utils/explorer/harness.js';
import { scriptedChooser, type Chooser } from '../utils/explorer/schedule-explorer.js';
import { TestHero } from '../utils/fixtures.js';

for (const kind of ['postgres', 'mysql'] as const) {
  const title = `the schedule explorer [${kind}]`;
  if (!enabledDatabases().includes(kind)) {
    describe.skip(`${title} (not reachable)`, () => it('needs the server', () => undefined));
    continue;
  }

  describe(title, () => {
    let h: ExplorerHarness;
    let lockRow: (manager: EntityManager) => Promise<unknown>;
    let heroId: number;
    beforeAll(async () => {
      h = await ExplorerHarness.create(kind, INTERLEAVING_WORKFLOWS);
      const table = h.app.dataSource.driver.escape(h.app.dataSource.getRepository(TestHero).metadata.tableName);
      lockRow = (manager) => manager.query(`SELECT id FROM ${table} WHERE id = ${heroId} FOR UPDATE`);
    });
    afterAll(() => h?.close());

    const setup = async () => {
      await h.app.reset();
      heroId = (await h.app.dataSource.getRepository(TestHero).save({ name: 'order' })).id;
    };

    // The holder's COMMIT grants the waiter its lock: at the next choice the waiter's next statement
    // must be on offer, whichever of the two answers reached the process first. Seeing it as still
    // waiting there made a replayed schedule meet other options than the run it replays.
    it('offers the statement after a lock wait once the COMMIT that ended the wait has answered', async () => {
      for (let round = 0; round < 10; round++) {
        await setup();
        const offered: string[][] = [];
        // The holder takes the lock, the waiter then waits for it, and the holder commits.
        const script = scriptedChooser({ op: 'holder', through: /FOR UPDATE/i }, { op: 'waiter', through: /FOR UPDATE/i }, { op: 'holder', through: /^\s*COMMIT/i });
        const choose: Chooser = (parked, faultsLeft) => (offered.push(parked.map((option) => option.op)), script(parked, faultsLeft));
        const run = await h.explorer.run(
          [
            { name: 'holder', run: () => h.app.dataSource.transaction(async (manager) => (await lockRow(manager), await manager.query('SELECT 1'))).then(() => h.app.dataSource.query('SELECT 2')) },
            { name: 'waiter', run: () => h.app.dataSource.transaction(async (manager) => (await lockRow(manager), await manager.query('SELECT 3'))) },
          ],
          choose,
        );
        expect(run.trace.some((line) => line.op === 'waiter' && line.blocked)).toBe(true);
        // The first choice after the holder's COMMIT: the holder at its next statement, and the waiter past its lock.
        const afterCommit = run.trace.findIndex((line) => line.op === 'holder' && /^\s*COMMIT/i.test(line.sql)) + 1;
        expect(offered[afterCommit]).toEqual(['holder', 'waiter']);
      }
      // A bound on a stuck run only: MySQL's lock-wait reads are paced at 110 ms, and a loaded server is slow.
    }, 10 * 60_000);

    // A run that fails (here: a schedule naming an operation that is not waiting) must not leave the
    // parked transactions open, holding their locks for whatever the next set-up does.
    it('ends the transactions of a run that fails', async () => {
      await setup();
      let choices = 0;
      const failing = h.explorer.run([{ name: 'holder', run: () => h.app.dataSource.transaction(async (manager) => (await lockRow(manager), await manager.query('SELECT 1'))) }], () =>
        choices++ < 2 ? { op: 'holder' } : { op: 'nobody' },
      );
      await expect(failing).rejects.toThrow(/chose nobody/);
      // The row is free again: an update from outside any operation does not wait for the holder.
      const table = h.app.dataSource.driver.escape(h.app.dataSource.getRepository(TestHero).metadata.tableName);
      const nowait = `SELECT id FROM ${table} WHERE id = ${heroId} FOR UPDATE NOWAIT`;
      await expect(h.app.dataSource.transaction((manager) => manager.query(nowait))).resolves.toHaveLength(1);
    });
  });
}
