/**
 * The workflows of the child-workflows kill spec (test/e2e/child-workflows-kill.e2e-spec.ts), shared
 * by the spec (under jest) and its worker process (test/src/child-kill-worker.ts, compiled with tsc).
 * The library is imported by relative path so that the compiled worker loads exactly one copy of it.
 */
import { DataSource, Like } from 'typeorm';
import { childrenOf, GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

/** What a fan-out body declared before its outcome was written: the handles startChild returned. */
export interface DeclaredChildren {
  executionId: string;
  handles: Array<{ key: string; id: string | null }>;
}

/**
 * Where the fan-out body stops once its children are declared (in memory only). The worker process
 * reports them to the spec there and waits for its go-ahead, which the spec may answer with SIGKILL.
 */
export const fanOutHold = {
  afterDeclaring: async (_declared: DeclaredChildren): Promise<void> => undefined,
};

/** The leaf heroes of a parent hero: named after it, in id order. */
export const leafName = (parent: string, index: number) => `${parent} leaf ${index}`;

@Workflow({ name: 'CrashLeaf', hero: () => TestHero })
export class CrashLeafWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async ship() {
    this.setResult({ leaf: this.hero.name });
  }
}

/** One leaf child per leaf hero: even positions under their default (positional) key, odd ones under a key of their own. */
@Workflow({ name: 'CrashFanOut', hero: () => TestHero })
export class CrashFanOutWorkflow extends GenevaWorkflow<TestHero> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async fanOut() {
    const leaves = await this.dataSource.getRepository(TestHero).find({ where: { name: Like(`${this.hero.name} leaf %`) }, order: { id: 'ASC' } });
    const handles = leaves.map((leaf, index) => this.startChild(CrashLeafWorkflow, leaf, index % 2 === 1 ? { key: `parcel-${leaf.id}` } : {}));
    await fanOutHold.afterDeclaring({ executionId: this.currentExecution.id, handles: handles.map(({ key, id }) => ({ key, id })) });
  }

  @Step({ waitFor: childrenOf('fanOut') })
  async fanIn() {
    this.setResult({ children: this.children.map(({ id, key, state, result }) => ({ id, key, state, result })) });
  }
}

export const CRASH_CHILD_WORKFLOWS = [CrashLeafWorkflow, CrashFanOutWorkflow];
