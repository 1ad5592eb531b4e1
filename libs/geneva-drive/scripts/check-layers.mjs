#!/usr/bin/env node
/**
 * Fails when the library's source imports upward between its top-level folders, or when its files
 * import one another in a circle. The layers, lowest first, are LAYERS below (docs/ARCHITECTURE.md
 * says what each holds): a file may import its own folder and any folder of a lower layer, never a
 * higher one nor another folder of its own layer. Type-only imports count too: a type is a
 * dependency a reader follows all the same.
 *
 *   node libs/geneva-drive/scripts/check-layers.mjs            # exit 1 and a list on a violation
 *
 * `check()` is also run by libs/geneva-drive/scripts/check-layers.spec.ts, so `npm test` fails on a
 * violation too; it takes another source directory for that test's own fixtures.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

/** Top-level folders (and root files, by name) from the bottom up; one row is one layer. */
export const LAYERS = [
  ['errors', 'geneva-drive.constants.ts'],
  ['util'],
  ['state', 'exception-policy'],
  ['entities'],
  ['migrations'],
  ['instrumentation'],
  ['workflow'],
  ['interfaces'],
  ['registry'],
  ['persistence'],
  ['queue'],
  ['execution'],
  ['client'],
  ['housekeeping'],
  ['operator'],
  // GenevaDriveModule's files at the root, one room; then the entry points, none using another.
  ['module'],
  ['index.ts', 'testing', 'dashboard', 'cli', 'terminus', 'metrics', 'tracing'],
];

const layerOf = new Map(LAYERS.flatMap((row, index) => row.map((name) => [name, index])));

function sourceFiles(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.spec.ts') ? [path] : [];
  });
}

/** The root files that make GenevaDriveModule: one room. */
const MODULE_FILES = new Set(['geneva-drive.module.ts', 'geneva-drive.module-definition.ts', 'geneva-drive.options.ts', 'geneva-drive-lifecycle.ts']);

/** The room of a file under `src`: its top-level folder, or its own name at the root. */
const roomOf = (src, file) => {
  const top = relative(src, file).split(sep)[0];
  return MODULE_FILES.has(top) ? 'module' : top;
};

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

function importsOf(file) {
  const found = [];
  for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const spec = match[1] ?? match[2];
    found.push(resolve(dirname(file), spec).replace(/\.js$/, '.ts'));
  }
  return found;
}

/** The violations under `src` (the library's sources unless told), one sentence each; empty when there are none. */
export function check(src = SRC) {
  const problems = [];
  const files = sourceFiles(src);
  const graph = new Map(files.map((file) => [file, importsOf(file)]));
  for (const [file, targets] of graph) {
    const from = roomOf(src, file);
    if (!layerOf.has(from)) problems.push(`${relative(src, file)}: the folder or file "${from}" is in no layer of scripts/check-layers.mjs`);
    for (const target of targets) {
      const to = roomOf(src, target);
      if (to === from) continue;
      if (!layerOf.has(to)) continue; // reported as the importing side's own entry
      if (layerOf.get(to) >= layerOf.get(from)) {
        problems.push(`${relative(src, file)} imports ${relative(src, target)}: ${from} may not use ${to} (${layerOf.get(to) > layerOf.get(from) ? 'a higher layer' : 'a sibling of its layer'})`);
      }
    }
  }
  // Circles between files (Tarjan's strongly connected components).
  let index = 0;
  const stack = [];
  const state = new Map();
  const visit = (file) => {
    const node = { index, low: index, onStack: true };
    index++;
    state.set(file, node);
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      const seen = state.get(target);
      if (!seen) {
        visit(target);
        node.low = Math.min(node.low, state.get(target).low);
      } else if (seen.onStack) node.low = Math.min(node.low, seen.index);
    }
    if (node.low === node.index) {
      const circle = [];
      let member;
      do {
        member = stack.pop();
        state.get(member).onStack = false;
        circle.push(relative(src, member));
      } while (member !== file);
      if (circle.length > 1) problems.push(`import circle: ${circle.reverse().join(' → ')}`);
    }
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return problems;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const problems = check();
  if (problems.length > 0) {
    console.error(`geneva-drive's layers are broken (${problems.length}):\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    process.exit(1);
  }
  console.log('geneva-drive: no upward import, no import circle');
}
