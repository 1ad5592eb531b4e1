/**
 * The engine's concurrent operations under every interleaving of their statements (see
 * test/utils/explorer): pairs of operations that meet on one workflow, on PostgreSQL and
 * MySQL/MariaDB, checked after each schedule by the invariants and by each scenario's own rule.
 * `npm test` runs a seeded sample of each; `npm run test:proofs` every schedule (or 500 sampled ones
 * where they are too many). SQLite is not here: one process has one writer there, so its engine
 * transactions never interleave (TransactionRunner queues them).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ENQUEUE_IN_TRANSACTION, SCENARIOS, WITH_FAULTS } from '../src/interleaving-scenarios.js';
import { bodyRuns, INTERLEAVING_WORKFLOWS } from '../src/interleaving-workflows.js';
import { enabledDatabases, type DatabaseKind } from '../utils/databases.js';
import { explorationBudget, ExplorerHarness, type Scenario } from '../utils/explorer/harness.js';

const seedOf = (name: string) => [...name].reduce((sum, char) => (sum * 31 + char.charCodeAt(0)) >>> 0, 7);

function explorationSuite(kind: DatabaseKind, scenarios: Array<Scenario<any>>, options: object) {
  let h: ExplorerHarness;
  beforeAll(async () => {
    h = await ExplorerHarness.create(kind, INTERLEAVING_WORKFLOWS, options);
    h.onReset = () => (bodyRuns.length = 0);
  });
  afterAll(() => h?.close());
  for (const scenario of scenarios) {
    it(scenario.name, async () => {
      const { runs } = await h.explore(scenario, explorationBudget(seedOf(scenario.name), kind));
      // A replay runs its one scenario and no other.
      expect(runs).toBeGreaterThan(process.env.GD_EXPLORE_REPLAY === undefined ? 0 : -1);
    }, 30 * 60_000);
  }
}

for (const kind of ['postgres', 'mysql'] as const) {
  const title = `interleavings [${kind}]`;
  if (!enabledDatabases().includes(kind)) {
    describe.skip(`${title} (not reachable)`, () => it('needs the server', () => undefined));
    continue;
  }
  describe(title, () => {
    describe('engine defaults', () => explorationSuite(kind, [...SCENARIOS, ...WITH_FAULTS], {}));
    describe('enqueueAfterCommit: false', () => explorationSuite(kind, ENQUEUE_IN_TRANSACTION, { enqueueAfterCommit: false }));
  });
}
