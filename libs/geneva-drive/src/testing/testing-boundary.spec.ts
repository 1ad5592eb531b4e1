import { describe, expect, it } from '@jest/globals';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = fileURLToPath(new URL('..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'testing' ? [] : sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

describe('the geneva-drive/testing entry point', () => {
  it('is imported by no production file, so applications never load the test helpers', () => {
    const offenders = sources(SRC).filter((file) => /from '(\.\.?\/)+(\w+\/)*testing(\/|\.js'|')/.test(readFileSync(file, 'utf8')));
    expect(offenders.map((file) => relative(SRC, file))).toEqual([]);
    expect(sources(SRC).length).toBeGreaterThan(30); // the walk really saw the library
  });
});
