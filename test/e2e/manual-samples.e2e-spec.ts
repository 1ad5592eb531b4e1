/**
 * The manual cannot drift from compiled code: every TypeScript block of docs/MANUAL.md must appear,
 * line for line, in a file under docs/samples/ or apps/example/src/ — files the type-check covers
 * (`npx tsc -p tsconfig.spec.json --noEmit` includes docs/samples/). Whitespace around the block, a
 * common indentation (a method shown outside its class) and trailing spaces do not count; anything
 * else does.
 */
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MANUAL = join(ROOT, 'docs/MANUAL.md');
const SAMPLE_DIRS = ['docs/samples', 'apps/example/src'];

interface Block {
  line: number;
  lines: string[];
}

/** The ```ts / ```typescript blocks of a markdown text, with the line each starts on. */
function typeScriptBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  const lines = normalize(markdown).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(ts|typescript)\s*$/.exec(lines[i]);
    if (!open) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    if (end === lines.length) throw new Error(`docs/MANUAL.md:${i + 1}: unterminated code block`);
    blocks.push({ line: i + 1, lines: trimBlankEdges(lines.slice(start, end)) });
    i = end;
  }
  return blocks;
}

function normalize(text: string): string {
  return text.replace(/\r\n?/g, '\n');
}

function trimBlankEdges(lines: string[]): string[] {
  let start = 0;
  let end = lines.length;
  while (start < end && lines[start].trim() === '') start++;
  while (end > start && lines[end - 1].trim() === '') end--;
  return lines.slice(start, end);
}

/** Removes the indentation all non-blank lines share, and trailing whitespace. */
function dedent(lines: string[]): string[] {
  const indents = lines.filter((line) => line.trim() !== '').map((line) => /^[ \t]*/.exec(line)![0].length);
  const common = indents.length === 0 ? 0 : Math.min(...indents);
  return lines.map((line) => line.slice(Math.min(common, /^[ \t]*/.exec(line)![0].length)).trimEnd());
}

function typeScriptFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return typeScriptFiles(path);
    return entry.isFile() && entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Where the block appears (file:line), or null. */
function findVerbatim(block: string[], sources: Array<{ path: string; lines: string[] }>): string | null {
  const wanted = dedent(block).join('\n');
  const first = block[0].trim();
  for (const source of sources) {
    for (let i = 0; i + block.length <= source.lines.length; i++) {
      if (source.lines[i].trim() !== first) continue;
      if (dedent(source.lines.slice(i, i + block.length)).join('\n') === wanted) return `${source.path}:${i + 1}`;
    }
  }
  return null;
}

const blocks = typeScriptBlocks(readFileSync(MANUAL, 'utf8'));
const sources = SAMPLE_DIRS.flatMap(typeScriptFiles).map((path) => ({
  path: relative(ROOT, join(ROOT, path)),
  lines: normalize(readFileSync(join(ROOT, path), 'utf8')).split('\n'),
}));

describe('docs/MANUAL.md samples', () => {
  it('has TypeScript samples, and the type-check covers docs/samples/', () => {
    expect(blocks.length).toBeGreaterThan(20);
    const specConfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.spec.json'), 'utf8')) as { include: string[] };
    expect(specConfig.include).toContain('docs/samples/**/*.ts');
  });

  it.each(blocks.map((block) => [block.line, block] as const))('the block at docs/MANUAL.md:%i is compiled code', (line, block) => {
    expect(block.lines.length).toBeGreaterThan(0);
    const where = findVerbatim(block.lines, sources);
    if (where === null) {
      throw new Error(
        `docs/MANUAL.md:${line}: this TypeScript block does not appear verbatim in ${SAMPLE_DIRS.join(' or ')}; ` +
          `change the sample file and copy it here (or the other way round):\n${block.lines.join('\n')}`,
      );
    }
  });
});
