import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

/** The shipments of an order (example_shipments). */
export class CreateExampleShipments1700000000002 implements MigrationInterface {
  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.createTable(
      new Table({
        name: 'example_shipments',
        columns: [
          { name: 'id', type: 'integer', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'order_id', type: 'integer' },
          { name: 'status', type: 'varchar', length: '32', default: "'new'" },
        ],
        indices: [{ name: 'IDX_example_shipments_order', columnNames: ['order_id'] }],
      }),
      true,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.dropTable('example_shipments');
  }
}
