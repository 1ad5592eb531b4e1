import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { DataSource } from 'typeorm';
import { TransactionRunner } from '../../libs/geneva-drive/src/persistence/transaction-runner.js';
import { dataSourceOptions, describeEachDatabase, prepareDatabase } from '../utils/databases.js';
import { TestHero } from '../utils/fixtures.js';

describeEachDatabase('transaction runner', (kind) => {
  let dataSource: DataSource;
  let runner: TransactionRunner;

  beforeAll(async () => {
    await prepareDatabase(kind);
    dataSource = await new DataSource(dataSourceOptions(kind)).initialize();
    runner = new TransactionRunner(dataSource);
  });
  afterAll(() => dataSource.destroy());

  it(kind === 'sqlite' ? 'serialises the engine transactions of a process: crossing ones run one after the other' : 'runs a deadlock victim again, so both crossing transactions commit', async () => {
    const heroes = dataSource.getRepository(TestHero);
    const [a, b] = await heroes.save([heroes.create({ name: 'a' }), heroes.create({ name: 'b' })]);
    let attempts = 0;
    const log: string[] = [];
    let arrived = 0;
    let release!: () => void;
    const bothHoldOneLock = new Promise<void>((resolve) => (release = resolve));
    // Where the transactions are serialised the other never arrives: the first goes on after 2 s.
    // One timer for the test, cleared at its end: a pending one would keep the process alive.
    let timer: NodeJS.Timeout | undefined;
    const timeUp = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000)));
    // Each transaction locks one row, waits until the other holds its row, then asks for the other's.
    const crossing = (first: TestHero, second: TestHero, label: string) =>
      runner.run(async (manager) => {
        attempts++;
        log.push(`${label}:begin`);
        await manager.update(TestHero, first.id, { name: `${label}-1` });
        if (++arrived === 2) release();
        await Promise.race([bothHoldOneLock, timeUp]);
        await manager.update(TestHero, second.id, { name: `${label}-2` });
        log.push(`${label}:end`);
        return label;
      });
    try {
      await expect(Promise.all([crossing(a, b, 'x'), crossing(b, a, 'y')])).resolves.toEqual(['x', 'y']);
    } finally {
      clearTimeout(timer);
    }
    if (kind === 'sqlite') {
      expect(log).toEqual(['x:begin', 'x:end', 'y:begin', 'y:end']);
      expect(attempts).toBe(2);
    } else {
      expect(attempts).toBe(3); // one of the two was chosen as the victim and ran once more
    }
    expect((await heroes.findOneByOrFail({ id: a.id })).name).toMatch(/-[12]$/);
  });
});
