import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One parcel of an order, shipped and delivered on its own (a child workflow of the order's). */
@Entity({ name: 'example_shipments' })
export class Shipment {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'order_id', type: 'integer' })
  orderId: number;

  @Column({ type: 'varchar', length: 32, default: 'new' })
  status: 'new' | 'dispatched' | 'delivered';
}
