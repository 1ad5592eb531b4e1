/**
 * Fixture workflows of the exact-identifier spec: identity strings (workflow type names, hero ids,
 * step names, signal names) spelled in ways a case-, accent- or pad-insensitive collation would
 * confuse, each of which is a different identity.
 */
import type { Type } from '@nestjs/common';
import { Entity, PrimaryColumn } from 'typeorm';
import { addStep, GenevaWorkflow, Step, Workflow } from 'geneva-drive';
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

/**
 * A hero whose key is a string. Starting and finding workflows never loads the hero, so the heroes
 * of the spec need no table (their ids would need exact comparison in the application's own table).
 */
@Entity({ name: 'test_keyed_heroes', synchronize: false })
export class KeyedHero {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  id: string;
}

/** A workflow about a KeyedHero with the given stored name and one step, never run by the spec. */
function defineNamed(name: string, className: string): Type<GenevaWorkflow<KeyedHero>> {
  @Workflow({ name, hero: () => KeyedHero })
  class Named extends GenevaWorkflow<KeyedHero> {
    @Step()
    async only() {}
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
