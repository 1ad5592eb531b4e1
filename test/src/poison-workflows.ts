/**
 * The poison-step proof's workflow, shared by the spec (under jest) and its worker process (compiled
 * with tsc and run by plain node). The library is imported by relative path so that the compiled
 * worker loads exactly one copy of it.
 */
import { writeSync } from 'node:fs';
import { GenevaWorkflow, Step, Workflow } from '../../libs/geneva-drive/src/index.js';
import { TestHero } from '../utils/fixtures.js';

/** The line the poison body writes before it kills its process. */
export const POISON_LINE = 'poison body ran in execution';

/**
 * Its first step kills the process running it, every time, as an out-of-memory kill or a native
 * crash would: SIGKILL, so nothing of the engine's gets to run after the body started.
 */
@Workflow({ hero: () => TestHero })
export class PoisonWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async swallow() {
    // A synchronous write to the pipe: the line is out before the signal lands.
    writeSync(1, `${POISON_LINE} ${this.currentExecution.id}\n`);
    process.kill(process.pid, 'SIGKILL');
    await new Promise(() => undefined); // the signal is delivered before anything else runs
  }

  @Step()
  async digest() {}
}
