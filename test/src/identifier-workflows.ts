/**
 * Fixture workflows of the exact-identifier spec: identity strings (workflow type names, hero ids,
 * step names, signal names) spelled in ways a case-, accent- or pad-insensitive collation would
 * confuse, each of which is a different identity.
 */
import type { Type } from '@nestjs/common';
import { Entity, PrimaryColumn, Table, type DataSource } from 'typeorm';
import { addStep, GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { identifierTransformer } from '../../libs/geneva-drive/src/entities/column-transformers.js';
import { columnTypes, dialectOf } from '../../libs/geneva-drive/src/migrations/column-types.js';
import { TestHero } from '../utils/fixtures.js';

/** "café" precomposed (NFC) and decomposed (NFD): the same text to a reader, different strings. */
export const CAFE_NFC = 'caf\u00e9';
export const CAFE_NFD = 'cafe\u0301';

/**
 * A base spelling and the spellings that differ from it only by case, an accent, a trailing space
 * or Unicode normalisation; every one is an identity of its own.
 */
export function spellingsOf(base: string): Array<[variant: string, spelling: string]> {
  return [
    ['base', base],
    ['case', base.toUpperCase()],
    ['accent', base.normalize('NFD').replace(/\p{M}/gu, '')],
    ['trailing space', `${base} `],
    ['normalisation (NFD)', base.normalize('NFD')],
  ];
}

/** A hero whose key is a string chosen by the application, compared exactly (as geneva-drive's identifiers). */
@Entity({ name: 'test_keyed_heroes', synchronize: false })
export class KeyedHero {
  @PrimaryColumn({ type: 'varchar', length: 64, transformer: identifierTransformer })
  id: string;
}

/** Creates KeyedHero's table (after the test database was prepared). */
export async function createKeyedHeroTable(dataSource: DataSource): Promise<void> {
  const queryRunner = dataSource.createQueryRunner();
  try {
    const t = columnTypes(dialectOf(queryRunner));
    await queryRunner.createTable(new Table({ name: 'test_keyed_heroes', columns: [{ ...t.identifier('id', 64), isPrimary: true }] }), true);
  } finally {
    await queryRunner.release();
  }
}

/** What the steps of the named workflows ran: `<type name>:<hero id>`. */
export const heroJournal: string[] = [];

/** A workflow about a KeyedHero with the given stored name, whose only step waits for a signal `go`. */
function defineNamed(name: string, className: string): Type<GenevaWorkflow<KeyedHero>> {
  @Workflow({ name, hero: () => KeyedHero })
  class Named extends GenevaWorkflow<KeyedHero> {
    @Step({ waitFor: 'go' })
    async only() {
      heroJournal.push(`${name}:${this.hero.id}`);
    }
  }
  Object.defineProperty(Named, 'name', { value: className });
  return Named;
}

/** One workflow class per spelling of "Bílling" (stored type names that differ only so). */
export const NAMED_WORKFLOWS = spellingsOf('Bílling').map(([variant, name], index) => ({
  variant,
  name,
  workflowClass: defineNamed(name, `BillingWorkflow${index}`),
}));

/** The step names of SpelledStepsWorkflow, in order. */
export const STEP_SPELLINGS = spellingsOf('shíp');

/** What SpelledStepsWorkflow's steps ran: their names, in order. */
export const stepJournal: string[] = [];

/** Steps named by every spelling of "shíp", in that order. */
@Workflow({ hero: () => TestHero })
export class SpelledStepsWorkflow extends GenevaWorkflow<TestHero> {}
for (const [, name] of STEP_SPELLINGS) {
  addStep(SpelledStepsWorkflow, { name, run: () => void stepJournal.push(name) });
}
