import { describe, expect, it } from '@jest/globals';
import * as packageExports from '../index.js';
import { SignalService } from './signal.service.js';

/** What SPEC documents of SignalService: §2.4 (`signal`, `list`) and §2.8 (`signalHero`). */
const DOCUMENTED = ['signal', 'list', 'signalHero'] as const;

// The type-check fails when SignalService gains a public member the specification does not name.
type Undocumented = Exclude<keyof SignalService, (typeof DOCUMENTED)[number]>;
const noUndocumentedMembers: [Undocumented] extends [never] ? true : Undocumented = true;

describe('SignalService public surface', () => {
  it('has no public members beyond the documented ones', () => {
    expect(noUndocumentedMembers).toBe(true);
    const methods = Object.getOwnPropertyNames(SignalService.prototype).filter((name) => name !== 'constructor');
    expect(methods.filter((name) => !(DOCUMENTED as readonly string[]).includes(name))).toEqual([]);
  });

  it('keeps signal validation and insertion out of the package exports', () => {
    expect(Object.keys(packageExports)).not.toContain('SignalIntake');
  });
});
