/** Manual § 9.8: transactional steps. */
import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { Order } from './shop.js';

// #region outbox-entity
/** A message to send once the step that wrote it committed; a relay delivers unsent rows. */
@Entity({ name: 'shop_outbox' })
export class OutboxMessage {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ type: 'varchar', length: 64 })
  topic: string;

  @Column({ name: 'order_id', type: 'integer' })
  orderId: number;

  @Column({ type: 'boolean', default: false })
  sent: boolean;
}
// #endregion outbox-entity

// #region transactional-step
@Workflow({ name: 'order-booking', hero: () => Order })
export class OrderBookingWorkflow extends GenevaWorkflow<Order> {
  /**
   * The order's status and the outbox message commit together with this step's completion, or not
   * at all: a run that crashed, lost its connection or was recovered left nothing behind.
   */
  @Step({ transactional: true, transactionTimeout: '5s' })
  async book() {
    await this.manager.getRepository(Order).update(this.hero.id, { status: 'paid' });
    await this.manager.getRepository(OutboxMessage).insert({ topic: 'order.paid', orderId: this.hero.id });
  }
}
// #endregion transactional-step
