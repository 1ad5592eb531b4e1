import type { DataSource, EntityManager } from 'typeorm';
import { GenevaDriveError } from '../errors/geneva-drive.error.js';
import { InvalidHeroError } from '../errors/invalid-hero.error.js';

/** The stored hero type names an entity this DataSource does not know (renamed or removed). @publicApi */
export class HeroTypeNotFoundError extends GenevaDriveError {
  constructor(readonly heroType: string) {
    super(`Hero type "${heroType}" is not an entity of the DataSource geneva-drive uses`);
  }
}

/** `heroType`/`heroId` of an entity instance: its entity name and its single primary key, as a string. */
export function heroReference(dataSource: DataSource, workflowName: string, hero: object, expected?: Function): { heroType: string; heroId: string } {
  if (hero === null || typeof hero !== 'object') throw new InvalidHeroError(workflowName, 'the hero must be an entity instance');
  if (expected && !(hero instanceof expected)) throw new InvalidHeroError(workflowName, `the hero must be a ${expected.name}, got ${hero.constructor.name}`);
  if (!dataSource.hasMetadata(hero.constructor)) throw new InvalidHeroError(workflowName, `${hero.constructor.name} is not an entity of the DataSource`);
  const metadata = dataSource.getMetadata(hero.constructor);
  if (metadata.primaryColumns.length !== 1) throw new InvalidHeroError(workflowName, `${metadata.name} must have exactly one primary key column`);
  const id = metadata.primaryColumns[0].getEntityValue(hero);
  if (id === undefined || id === null || id === '') throw new InvalidHeroError(workflowName, `the ${metadata.name} has no id yet: save it first`);
  return { heroType: metadata.name, heroId: String(id) };
}

/** Loads the hero row, or null when it is gone. */
export async function loadHero(manager: EntityManager, heroType: string, heroId: string): Promise<object | null> {
  if (!manager.connection.hasMetadata(heroType)) throw new HeroTypeNotFoundError(heroType);
  const metadata = manager.connection.getMetadata(heroType);
  return manager.findOne(metadata.target, { where: { [metadata.primaryColumns[0].propertyName]: heroId } });
}
