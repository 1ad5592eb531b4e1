// Copies the repository's manual chapters (and the images they show) into the package before
// `npm pack`, so the published tarball carries the same documentation as the repository (docs/ here
// is git-ignored). A link to the package's own changelog is written for the package's layout, where
// CHANGELOG.md sits beside docs/ rather than in libs/geneva-drive/.
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

const source = new URL('../../../docs/', import.meta.url);
const target = new URL('../docs/', import.meta.url);
rmSync(target, { recursive: true, force: true });
mkdirSync(target);
for (const name of readdirSync(source)) {
  if (name.endsWith('.md')) {
    const text = readFileSync(new URL(name, source), 'utf8');
    writeFileSync(new URL(name, target), text.replaceAll('](../libs/geneva-drive/CHANGELOG.md)', '](../CHANGELOG.md)'));
  } else if (name.endsWith('.png')) {
    cpSync(new URL(name, source), new URL(name, target));
  }
}
