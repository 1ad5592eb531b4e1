// Copies the repository's manual chapters into the package before `npm pack`, so the published
// tarball carries the same documentation as the repository (docs/ here is git-ignored).
import { cpSync, mkdirSync, readdirSync, rmSync } from 'node:fs';

const source = new URL('../../../docs/', import.meta.url);
const target = new URL('../docs/', import.meta.url);
rmSync(target, { recursive: true, force: true });
mkdirSync(target);
for (const name of readdirSync(source)) {
  if (name.endsWith('.md')) cpSync(new URL(name, source), new URL(name, target));
}
