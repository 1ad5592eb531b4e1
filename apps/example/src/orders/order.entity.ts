import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

@Entity({ name: 'example_orders' })
export class Order {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 255 })
  sku: string;

  @Column({ name: 'amount_cents', type: 'integer' })
  amountCents: number;

  @Column({ type: 'varchar', length: 32, default: 'new' })
  status: 'new' | 'reserved' | 'paid' | 'shipped' | 'delivered';

  @Column({ type: 'boolean', default: false })
  pickup: boolean;
}
