/**
 * The layer rule of the library's sources (scripts/check-layers.mjs) is part of the test suite: a new
 * upward import or import circle fails `npm test` as it fails the script. The checker itself is tried
 * on small trees written here, so a checker that stopped seeing violations would fail too.
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { check } from './check-layers.mjs';

const trees: string[] = [];

/** Writes `files` (path → text, paths relative to the tree) under a new temporary directory. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'gd-layers-'));
  trees.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

afterAll(() => {
  for (const root of trees) rmSync(root, { recursive: true, force: true });
});

describe('the layers of the library', () => {
  it('has no upward import and no import circle', () => {
    expect(check()).toEqual([]);
  });
});

describe('the layer checker', () => {
  it('accepts imports downward, within a folder, and type-only ones that follow the rule', () => {
    const src = tree({
      'errors/a.error.ts': 'export class AError extends Error {}\n',
      'persistence/store.ts': "import { AError } from '../errors/a.error.js';\nimport { helper } from './helper.js';\nexport const store = [AError, helper];\n",
      'persistence/helper.ts': 'export const helper = 1;\n',
      'execution/executor.ts': "import type { store } from '../persistence/store.js';\nexport type Store = typeof store;\n",
      'index.ts': "export { AError } from './errors/a.error.js';\nexport type { Store } from './execution/executor.js';\n",
    });
    expect(check(src)).toEqual([]);
  });

  it('reports an upward import, a type-only one included', () => {
    const src = tree({
      'persistence/store.ts': "import type { Executor } from '../execution/executor.js';\nexport type Store = Executor;\n",
      'execution/executor.ts': 'export interface Executor { run(): void }\n',
    });
    expect(check(src)).toEqual(['persistence/store.ts imports execution/executor.ts: persistence may not use execution (a higher layer)']);
  });

  it('reports an import between two folders of one layer', () => {
    const src = tree({
      'state/workflow-state.ts': "import { POLICY } from '../exception-policy/policy.js';\nexport const STATES = [POLICY];\n",
      'exception-policy/policy.ts': "export const POLICY = 'pause';\n",
    });
    expect(check(src)).toEqual(['state/workflow-state.ts imports exception-policy/policy.ts: state may not use exception-policy (a sibling of its layer)']);
  });

  it('reports an entry point that imports another entry point', () => {
    const src = tree({
      'dashboard/index.ts': "export type { Config } from '../cli/config.js';\n",
      'cli/config.ts': 'export interface Config { queue?: string }\n',
    });
    expect(check(src)).toEqual(['dashboard/index.ts imports cli/config.ts: dashboard may not use cli (a sibling of its layer)']);
  });

  it('reports an import circle, also inside one folder and through a dynamic import', () => {
    const src = tree({
      'queue/a.ts': "import { b } from './b.js';\nexport const a = () => b;\n",
      'queue/b.ts': "export const b = () => import('./a.js');\n",
    });
    expect(check(src)).toEqual(['import circle: queue/a.ts → queue/b.ts']);
  });

  it('reports a folder that is in no layer', () => {
    const src = tree({ 'signals/signal.service.ts': "import { AError } from '../errors/a.error.js';\n", 'errors/a.error.ts': 'export class AError extends Error {}\n' });
    expect(check(src)).toEqual(['signals/signal.service.ts: the folder or file "signals" is in no layer of scripts/check-layers.mjs']);
  });
});
