import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata.js';
import type { DataSource, EntityManager, EntityMetadata } from 'typeorm';
import { HeroTypeNotFoundError } from '../errors/hero-type-not-found.error.js';
import { InvalidHeroError } from '../errors/invalid-hero.error.js';
import type { HeroRow } from './sql/hot-path-sql.js';

/**
 * `heroType`/`heroId` of a hero: its entity name and its single primary key, as a string. The hero is
 * an entity instance, or a plain object carrying the primary key (what `repository.save({...})`
 * returns) when the workflow declares its class (`@Workflow({ hero: () => Entity })`). With `exact`
 * (for `start`), an entity instance must be of the declared class.
 */
export function heroReference(
  dataSource: DataSource,
  workflowName: string,
  hero: object,
  declared: Function | undefined,
  exact = false,
  /** What the call could not do, for the error (InvalidHeroError's `action`). */
  action?: string,
): { heroType: string; heroId: string } {
  const fail = (problem: string): never => {
    throw new InvalidHeroError(workflowName, problem, action);
  };
  if (hero === null || typeof hero !== 'object') fail(`the hero must be an entity instance, got ${hero === null ? 'null' : typeof hero}`);
  const plain = Object.getPrototypeOf(hero) === Object.prototype || Object.getPrototypeOf(hero) === null;
  if (plain && !declared) {
    fail(
      'the hero is a plain object, not an entity instance: make it with repository.create(...) (then save it), ' +
        'or declare its class with @Workflow({ hero: () => Entity })',
    );
  }
  const entity = plain ? declared! : hero.constructor;
  if (exact && declared && !plain && !(hero instanceof declared)) fail(`the hero must be a ${declared.name}, got ${entity.name}`);
  if (!dataSource.hasMetadata(entity)) fail(`${entity.name} is not an entity of the DataSource`);
  const metadata = dataSource.getMetadata(entity);
  if (metadata.primaryColumns.length !== 1) fail(`${metadata.name} must have exactly one primary key column`);
  const key = metadata.primaryColumns[0];
  const id = key.getEntityValue(hero);
  if (id === undefined || id === null || id === '') {
    fail(plain ? `the plain object carries no ${metadata.name}.${key.propertyName}: save it first, or pass the saved entity` : `the ${metadata.name} has no id yet: save it first`);
  }
  if (!fitsColumn(id, key)) fail(`the ${metadata.name}'s ${key.propertyName} ${JSON.stringify(id)} is not a valid value of its ${String(key.type)} column`);
  return { heroType: metadata.name, heroId: String(id) };
}

/** Whether a key value can be compared with its column at all (PostgreSQL rejects `'abc'` for an integer or uuid column). */
function fitsColumn(value: unknown, column: ColumnMetadata): boolean {
  const type = typeof column.type === 'string' ? column.type.toLowerCase() : column.type === Number ? 'integer' : '';
  const text = String(value);
  if (/int|serial/.test(type)) return /^-?\d+$/.test(text);
  if (type === 'uuid') return /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(text);
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint';
}

function heroLookup(manager: EntityManager, heroType: string, heroId: string): { metadata: EntityMetadata; where: Record<string, string> } {
  if (!manager.connection.hasMetadata(heroType)) throw new HeroTypeNotFoundError(heroType);
  const metadata = manager.connection.getMetadata(heroType);
  return { metadata, where: { [metadata.primaryColumns[0].propertyName]: heroId } };
}

/**
 * The hero's row for the fixed SQL of `start()` (table, key column and value, soft-delete column),
 * or null for an entity whose rows TypeORM filters further (single-table inheritance): `start()`
 * then checks the hero the general way.
 */
export function heroRow(manager: EntityManager, heroType: string, heroId: string): HeroRow | null {
  const { metadata } = heroLookup(manager, heroType, heroId);
  if (metadata.discriminatorColumn || metadata.parentEntityMetadata) return null;
  const driver = manager.connection.driver;
  const key = metadata.primaryColumns[0];
  return {
    table: metadata.tablePath.split('.').map((part) => driver.escape(part)).join('.'),
    column: driver.escape(key.databaseName),
    value: driver.preparePersistentValue(heroId, key),
    ...(metadata.deleteDateColumn ? { deletedColumn: driver.escape(metadata.deleteDateColumn.databaseName) } : {}),
  };
}

/** Loads the hero row, or null when it is gone. */
export async function loadHero(manager: EntityManager, heroType: string, heroId: string): Promise<object | null> {
  const { metadata, where } = heroLookup(manager, heroType, heroId);
  return manager.findOne(metadata.target, { where });
}

/** Whether the hero row exists (as `manager`'s transaction sees it). */
export function heroExists(manager: EntityManager, heroType: string, heroId: string): Promise<boolean> {
  const { metadata, where } = heroLookup(manager, heroType, heroId);
  return manager.exists(metadata.target, { where });
}
