import { Injectable, Logger } from '@nestjs/common';
import { logText } from '../log-text.js';
import type { Order } from './order.entity.js';

/** A stand-in for the warehouse system the fulfilment workflow reserves stock in. */
@Injectable()
export class Warehouse {
  private readonly logger = new Logger(Warehouse.name);

  async reserve(order: Order): Promise<void> {
    this.logger.log(`reserved ${logText(order.sku)} for order ${order.id}`);
  }
}
