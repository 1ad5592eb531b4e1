import { childrenOf, GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { Order } from '../orders/order.entity.js';
import { Shipment } from './shipment.entity.js';

/** The carrier's delivery scan, sent to a shipment's workflow (POST /shipments/:id/delivered). */
export const PARCEL_DELIVERED = 'parcel_delivered';

/** One parcel: dispatched, then delivered once the carrier scans it. Its result is what the order's fan-in reads. */
@Workflow({ hero: () => Shipment })
export class ShipmentWorkflow extends GenevaWorkflow<Shipment> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async dispatch() {
    await this.dataSource.getRepository(Shipment).update(this.hero.id, { status: 'dispatched' });
  }

  @Step({ waitFor: PARCEL_DELIVERED, timeout: '30d' })
  async confirmDelivery() {
    if (this.timedOut) {
      this.logger.warn(`shipment ${this.hero.id} was never scanned as delivered`);
      return this.cancel();
    }
    await this.dataSource.getRepository(Shipment).update(this.hero.id, { status: 'delivered' });
    this.setResult({ shipmentId: this.hero.id, deliveredAt: new Date() });
  }
}

/**
 * An order shipped in several parcels: one ShipmentWorkflow per shipment, all started with the
 * completion of `shipParcels` (fan-out), and the order delivered once every one of them has ended
 * (fan-in).
 */
@Workflow({ hero: () => Order })
export class OrderShipmentsWorkflow extends GenevaWorkflow<Order> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async shipParcels() {
    const shipments = await this.dataSource.getRepository(Shipment).find({ where: { orderId: this.hero.id }, order: { id: 'ASC' } });
    for (const shipment of shipments) this.startChild(ShipmentWorkflow, shipment, { key: `shipment-${shipment.id}` });
    await this.dataSource.getRepository(Order).update(this.hero.id, { status: 'shipped' });
  }

  @Step({ waitFor: childrenOf('shipParcels') })
  async allDelivered() {
    const delivered = this.children.filter((child) => child.state === 'finished').length;
    const lost = this.children.length - delivered;
    if (lost > 0) this.logger.warn(`${lost} of ${this.children.length} parcels were not delivered`);
    await this.dataSource.getRepository(Order).update(this.hero.id, { status: lost === 0 ? 'delivered' : 'shipped' });
    this.setResult({ parcels: this.children.length, delivered });
  }
}
