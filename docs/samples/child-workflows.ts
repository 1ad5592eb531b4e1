/** Manual § 7.16: child workflows, fan-out and fan-in. */
import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Column, DataSource, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { childrenOf, GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { Order } from './shop.js';

/** One parcel of an order. */
@Entity({ name: 'shop_shipments' })
export class Shipment {
  @PrimaryGeneratedColumn()
  id: number;

  @Column({ name: 'order_id', type: 'integer' })
  orderId: number;
}

/** Books a parcel with the carrier. */
@Injectable()
export class Carrier {
  async book(shipment: Shipment): Promise<string> {
    return `TRACK-${shipment.id}`;
  }
}

// #region fan-out-fan-in
@Workflow({ hero: () => Order })
export class ShipOrderWorkflow extends GenevaWorkflow<Order> {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {
    super();
  }

  /** One child per shipment, all started with this step's completion. */
  @Step()
  async fanOut() {
    const shipments = await this.dataSource.getRepository(Shipment).findBy({ orderId: this.hero.id });
    for (const shipment of shipments) this.startChild(ShipmentWorkflow, shipment, { key: `shipment-${shipment.id}` });
  }

  /** Parks until every shipment's workflow ended. */
  @Step({ waitFor: childrenOf('fanOut'), timeout: '7d' })
  async fanIn() {
    const lost = this.children.filter((child) => child.state === 'canceled');
    if (lost.length > 0) this.logger.warn(`${lost.length} shipments were canceled`);
    this.setResult({ shipped: this.children.length - lost.length });
  }
}

@Workflow({ hero: () => Shipment })
export class ShipmentWorkflow extends GenevaWorkflow<Shipment> {
  constructor(private readonly carrier: Carrier) {
    super();
  }

  @Step()
  async ship() {
    this.setResult({ trackingNumber: await this.carrier.book(this.hero) });
  }
}
// #endregion fan-out-fan-in
