/**
 * The docs cannot drift from compiled code: every TypeScript block of docs/*.md must appear, line for
 * line, in a file under docs/samples/, apps/example/src/ or test/package/consumer-app/ — files the
 * type-check covers (`npx tsc -p tsconfig.spec.json --noEmit` includes docs/samples/ and test/). The
 * quick start's JavaScript and JSON blocks (its jest and TypeScript configuration) must likewise be
 * the consumer app's own files, which the package test installs and runs. Whitespace around the block,
 * a common indentation (a method shown outside its class) and trailing spaces do not count; anything
 * else does.
 */
import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`);
const SAMPLE_DIRS = ['docs/samples', 'apps/example/src', 'test/package/consumer-app'];
/** Languages checked in every document, and in the quick start also its configuration files. */
const CHECKED = { default: ['ts', 'typescript'], 'docs/quick-start.md': ['ts', 'typescript', 'js', 'json'] } as Record<string, string[]>;

interface Block {
  line: number;
  lines: string[];
}

/** The code blocks in `languages` of a markdown text, with the line each starts on. */
function codeBlocks(doc: string, markdown: string, languages: string[]): Block[] {
  const blocks: Block[] = [];
  const lines = normalize(markdown).split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^\s*```(\w+)\s*$/.exec(lines[i]);
    if (!open || !languages.includes(open[1])) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end])) end++;
    if (end === lines.length) throw new Error(`${doc}:${i + 1}: unterminated code block`);
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

function sampleFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sampleFiles(path);
    return entry.isFile() && /\.(ts|js|json)$/.test(entry.name) ? [path] : [];
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

const blocks = DOCS.flatMap((doc) =>
  codeBlocks(doc, readFileSync(join(ROOT, doc), 'utf8'), CHECKED[doc] ?? CHECKED.default).map((block) => ({ ...block, doc })),
);
const sources = SAMPLE_DIRS.flatMap(sampleFiles).map((path) => ({
  path: relative(ROOT, join(ROOT, path)),
  lines: normalize(readFileSync(join(ROOT, path), 'utf8')).split('\n'),
}));

describe('code samples of docs/*.md', () => {
  it('has samples in the manual and the quick start, and the type-check covers docs/samples/', () => {
    expect(blocks.filter((block) => block.doc === 'docs/MANUAL.md').length).toBeGreaterThan(20);
    expect(blocks.filter((block) => block.doc === 'docs/quick-start.md').length).toBeGreaterThan(5);
    const specConfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.spec.json'), 'utf8')) as { include: string[] };
    expect(specConfig.include).toContain('docs/samples/**/*.ts');
  });

  it.each(blocks.map((block) => [`${block.doc}:${block.line}`, block] as const))('the block at %s is compiled code', (at, block) => {
    expect(block.lines.length).toBeGreaterThan(0);
    const where = findVerbatim(block.lines, sources);
    if (where === null) {
      throw new Error(
        `${at}: this block does not appear verbatim in ${SAMPLE_DIRS.join(' or ')}; ` +
          `change the sample file and copy it here (or the other way round):\n${block.lines.join('\n')}`,
      );
    }
  });
});
