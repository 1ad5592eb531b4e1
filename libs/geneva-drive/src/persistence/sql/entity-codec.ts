import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata.js';

/**
 * Converts between one entity and the rows of the hot path's fixed SQL, through the entity's own
 * metadata and the driver's value conversions — exactly what TypeORM applies when it builds a query,
 * without building one per statement. Columns the schema does not have (the signal columns before
 * their migration) are left out, as TypeORM leaves them out.
 */
export class EntityCodec<T extends ObjectLiteral> {
  private readonly byProperty = new Map<string, ColumnMetadata>();
  private readonly selectable: ColumnMetadata[];
  readonly table: string;
  /** The property of the (single) primary key. */
  readonly primaryKey: string;
  /** The property of the `@DeleteDateColumn`, if the entity has one. */
  readonly deleteDateProperty: string | undefined;

  constructor(
    private readonly dataSource: DataSource,
    private readonly target: EntityTarget<T>,
  ) {
    const metadata = dataSource.getMetadata(target);
    this.table = metadata.tablePath.split('.').map((part) => dataSource.driver.escape(part)).join('.');
    this.primaryKey = metadata.primaryColumns[0].propertyName;
    this.deleteDateProperty = metadata.deleteDateColumn?.propertyName;
    for (const column of metadata.columns) this.byProperty.set(column.propertyName, column);
    this.selectable = metadata.columns.filter((column) => column.isSelect);
  }

  /** The select list of every column (or of `properties`), each aliased `<alias>_<property>`. */
  selectList(alias: string, properties?: ReadonlyArray<keyof T & string>): string {
    return this.selectColumns(alias, properties).map(({ column, as }) => `${alias}.${column} AS ${as}`).join(', ');
  }

  /** Each column to select (quoted) and its alias `<alias>_<property>` (quoted), as {@link fromRow} reads them. */
  selectColumns(alias: string, properties?: ReadonlyArray<keyof T & string>): Array<{ column: string; as: string }> {
    return this.columnsOf(properties).map((column) => ({ column: this.quote(column), as: this.dataSource.driver.escape(`${alias}_${column.propertyName}`) }));
  }

  /** The entity a row read with {@link selectList} under `alias` holds (only `properties`, when the list had only those). */
  fromRow(row: Record<string, unknown>, alias: string, properties?: ReadonlyArray<keyof T & string>): T {
    const entity = this.dataSource.getMetadata(this.target).create() as T;
    for (const column of this.columnsOf(properties)) {
      const value = row[`${alias}_${column.propertyName}`];
      (entity as Record<string, unknown>)[column.propertyName] = this.dataSource.driver.prepareHydratedValue(value, column);
    }
    return entity;
  }

  /**
   * A copy of `entity` holding every column {@link fromRow} sets, those it lacks as null: a record
   * built in memory and inserted (its unset columns written as NULL), as a read of its row gives it.
   */
  asRead(entity: T): T {
    const copy = Object.assign(this.dataSource.getMetadata(this.target).create() as T, entity);
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

  private columnsOf(properties?: ReadonlyArray<string>): ColumnMetadata[] {
    return properties ? this.selectable.filter((column) => properties.includes(column.propertyName)) : this.selectable;
  }

  private metadataOf(property: string): ColumnMetadata {
    const column = this.byProperty.get(property);
    if (!column) throw new Error(`${this.table} has no column for ${property}`);
    return column;
  }

  private quote(column: ColumnMetadata): string {
    return this.dataSource.driver.escape(column.databaseName);
  }
}
