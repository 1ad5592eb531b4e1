import { describe, expect, it } from '@jest/globals';
import { importOptional, importOptionals, MissingDependencyError } from './missing-dependency.error.js';

describe('importOptional', () => {
  it('turns a missing optional package into MissingDependencyError naming it', async () => {
    const missing = importOptional('geneva-drive-absent-peer', 'The widget', () => import('geneva-drive-absent-peer' as string));
    await expect(missing).rejects.toThrow(MissingDependencyError);
    await expect(missing).rejects.toThrow('The widget needs the package "geneva-drive-absent-peer", which is not installed: npm install geneva-drive-absent-peer');
  });

  it('names every missing package of a feature at once, so one install fixes the boot', async () => {
    const missing = importOptionals('The widget', [
      ['typeorm', () => import('typeorm')],
      ['geneva-drive-absent-peer', () => import('geneva-drive-absent-peer' as string)],
      ['@geneva-drive/absent-module', () => import('@geneva-drive/absent-module' as string)],
    ] as const);
    await expect(missing).rejects.toThrow(
      'The widget needs the packages "geneva-drive-absent-peer" and "@geneva-drive/absent-module", which are not installed: npm install geneva-drive-absent-peer @geneva-drive/absent-module',
    );
    await expect(missing).rejects.toMatchObject({ packageNames: ['geneva-drive-absent-peer', '@geneva-drive/absent-module'] });
  });

  it('returns the module when it is installed', async () => {
    const typeorm = await importOptional('typeorm', 'The widget', () => import('typeorm'));
    expect(typeof typeorm.DataSource).toBe('function');
  });

  it('lets other failures through unchanged', async () => {
    const failure = new Error('the package threw while loading');
    await expect(importOptional('typeorm', 'The widget', () => Promise.reject(failure))).rejects.toBe(failure);
  });
});
