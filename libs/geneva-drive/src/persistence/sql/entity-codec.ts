import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata.js';
import type { EntityMetadata } from 'typeorm/metadata/EntityMetadata.js';

/**
 * Converts between one entity and the rows of the hot path's fixed SQL, through the entity's own
 * metadata and the driver's value conversions — exactly what TypeORM applies when it builds a query,
 * without building one per statement. Columns the schema does not have (the signal columns before
 * their migration) are left out, as TypeORM leaves them out.
 */
export class EntityCodec<T extends ObjectLiteral> {
  private readonly metadata: EntityMetadata;
  private readonly byProperty = new Map<string, ColumnMetadata>();
  /** Each column's quoted name, worked out once: the hot path names columns in every statement it builds. */
  private readonly quoted = new Map<ColumnMetadata, string>();
  private readonly selectable: ColumnMetadata[];
  /** By alias, the key each selectable column's value has in a row read with {@link selectList} (fromRow reads many rows). */
  private readonly rowKeys = new Map<string, Array<{ key: string; column: ColumnMetadata }>>();
  private readonly selectLists = new Map<string, string>();
  readonly table: string;
  /** The property of the (single) primary key. */
  readonly primaryKey: string;
  /** The property of the `@DeleteDateColumn`, if the entity has one. */
  readonly deleteDateProperty: string | undefined;

  constructor(
    private readonly dataSource: DataSource,
    target: EntityTarget<T>,
  ) {
    const metadata = (this.metadata = dataSource.getMetadata(target));
    this.table = metadata.tablePath.split('.').map((part) => dataSource.driver.escape(part)).join('.');
    this.primaryKey = metadata.primaryColumns[0].propertyName;
    this.deleteDateProperty = metadata.deleteDateColumn?.propertyName;
    for (const column of metadata.columns) {
      this.byProperty.set(column.propertyName, column);
      this.quoted.set(column, dataSource.driver.escape(column.databaseName));
    }
    this.selectable = metadata.columns.filter((column) => column.isSelect);
  }

  /** The select list of every column, each aliased `<alias>_<property>`. */
  selectList(alias: string): string {
    let list = this.selectLists.get(alias);
    if (list === undefined) {
      list = this.keysOf(alias)
        .map(({ key, column }) => `${alias}.${this.quote(column)} AS ${this.dataSource.driver.escape(key)}`)
        .join(', ');
      this.selectLists.set(alias, list);
    }
    return list;
  }

  /** The entity a row read with {@link selectList} under `alias` holds. */
  fromRow(row: Record<string, unknown>, alias: string): T {
    const entity = this.metadata.create() as T;
    for (const { key, column } of this.keysOf(alias)) {
      (entity as Record<string, unknown>)[column.propertyName] = this.dataSource.driver.prepareHydratedValue(row[key], column);
    }
    return entity;
  }

  private keysOf(alias: string): Array<{ key: string; column: ColumnMetadata }> {
    let keys = this.rowKeys.get(alias);
    if (!keys) {
      keys = this.selectable.map((column) => ({ key: `${alias}_${column.propertyName}`, column }));
      this.rowKeys.set(alias, keys);
    }
    return keys;
  }

  /**
   * A copy of `entity` holding every column {@link fromRow} sets, those it lacks as null: a record
   * built in memory and inserted (its unset columns written as NULL), as a read of its row gives it.
   */
  asRead(entity: T): T {
    const copy = Object.assign(this.metadata.create() as T, entity);
    for (const column of this.selectable) (copy as Record<string, unknown>)[column.propertyName] ??= null;
    return copy;
  }

  /**
   * Whether rows of `target` read this way are what `findOne` would give: a flat entity (no
   * relations, embeddeds, inheritance or virtual columns) that nothing needs to see loaded (no
   * `@AfterLoad`, no subscriber's `afterLoad`). Anything else is read through TypeORM.
   */
  static isPlain(dataSource: DataSource, target: EntityTarget<ObjectLiteral>): boolean {
    const metadata = dataSource.getMetadata(target);
    return (
      metadata.relations.length === 0 &&
      metadata.embeddeds.length === 0 &&
      !metadata.discriminatorColumn &&
      !metadata.parentEntityMetadata &&
      !metadata.treeType &&
      metadata.afterLoadListeners.length === 0 &&
      metadata.columns.every((column) => !column.isVirtualProperty) &&
      !dataSource.subscribers.some((subscriber) => typeof subscriber.afterLoad === 'function')
    );
  }

  /** Whether the schema has the property's column (the signal columns need their migration). */
  has(property: keyof T & string): boolean {
    return this.selectable.some((column) => column.propertyName === property);
  }

  /** The quoted column name of a property. */
  column(property: keyof T & string): string {
    return this.quote(this.metadataOf(property));
  }

  /** A property's value as the driver stores it (transformers and type conversions applied). */
  param(property: keyof T & string, value: unknown): unknown {
    return this.dataSource.driver.preparePersistentValue(value, this.metadataOf(property));
  }

  /** The writable columns among `values`' properties, with their stored values, in a stable order. */
  writable(values: Partial<T>, mode: 'insert' | 'update'): Array<{ column: string; value: unknown }> {
    const out: Array<{ column: string; value: unknown }> = [];
    for (const [property, value] of Object.entries(values)) {
      const column = this.byProperty.get(property);
      if (!column || value === undefined || (mode === 'insert' ? !column.isInsert : !column.isUpdate)) continue;
      out.push({ column: this.quote(column), value: this.dataSource.driver.preparePersistentValue(value, column) });
    }
    return out;
  }

  private metadataOf(property: string): ColumnMetadata {
    const column = this.byProperty.get(property);
    if (!column) throw new Error(`${this.table} has no column for ${property}`);
    return column;
  }

  private quote(column: ColumnMetadata): string {
    return this.quoted.get(column)!;
  }
}
