import { BadRequestException, Body, ConflictException, Controller, Get, HttpCode, NotFoundException, PayloadTooLargeException, Param, Post, UseGuards } from '@nestjs/common';
import { IsNotEmpty, IsOptional, IsString, MaxLength } from 'class-validator';
import { InvalidSignalError, SignalPayloadTooLargeError, UnencodableValueError, WorkflowNotOngoingError, WorkflowService, type Signal } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { IsEventId, IsIntegerFrom, ParseIdPipe } from '../validation.js';
import { workflowTimeline } from '../timeline.js';
import { WebhookSignatureGuard } from '../webhooks/webhook-signature.guard.js';
import type { Contract } from './contract.entity.js';
import { ContractsService } from './contracts.service.js';

class OpenContractDto {
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  documentId: string;
}

/** What the e-signature provider posts when a document is signed. */
export class SignatureWebhookDto {
  @IsEventId()
  eventId: string;

  @IsIntegerFrom(1)
  contractId: number;

  /** The document that was signed: it counts only if it is the contract's current document. */
  @IsString()
  @IsNotEmpty()
  @MaxLength(255)
  documentId: string;

  @IsOptional()
  @IsString()
  @MaxLength(255)
  signer?: string;
}

/** The same HTTP answers as the payment webhook: 200 (duplicates too), 400, 404, 409, 413. */
async function delivered(send: Promise<Signal>) {
  try {
    const signal = await send;
    return { signalId: signal.id, state: signal.state, key: signal.idempotencyKey, duplicate: signal.duplicateDelivery };
  } catch (error) {
    if (error instanceof WorkflowNotOngoingError) throw new ConflictException(error.message);
    if (error instanceof SignalPayloadTooLargeError) throw new PayloadTooLargeException(error.message);
    if (error instanceof InvalidSignalError || error instanceof UnencodableValueError) throw new BadRequestException(error.message);
    throw error;
  }
}

@Controller()
export class ContractsController {
  constructor(
    private readonly contracts: ContractsService,
    private readonly workflows: WorkflowService,
    private readonly dataSource: DataSource,
  ) {}

  /** Opens a contract: its workflow sends the document and parks until it is signed or the deadline passes. */
  @Post('contracts')
  open(@Body() body: OpenContractDto) {
    return this.contracts.open(body.documentId);
  }

  @Get('contracts/:id/timeline')
  async timeline(@Param('id', ParseIdPipe) id: number) {
    const { contract, workflow } = await this.load(id);
    const timeline = await workflowTimeline(this.workflows, this.dataSource.manager, workflow);
    // Read again after the workflow, as the order's timeline does (a step shown ended is shown with its writes).
    return { contract: (await this.contracts.find(id)) ?? contract, ...timeline };
  }

  /** Sends the deadline now. Sent twice, it is delivered once (200, `duplicate: true`). */
  @Post('contracts/:id/deadline')
  @HttpCode(200)
  async deadline(@Param('id', ParseIdPipe) id: number) {
    const { contract, workflow } = await this.load(id);
    return delivered(this.contracts.deadline(workflow, contract));
  }

  /** The e-signature provider's webhook, signed like the payment provider's (WebhookSignatureGuard). */
  @Post('webhooks/signatures')
  @HttpCode(200)
  @UseGuards(WebhookSignatureGuard)
  async signed(@Body() event: SignatureWebhookDto) {
    const { workflow } = await this.load(event.contractId);
    return delivered(this.contracts.signed(workflow, event.eventId, { documentId: event.documentId, signer: event.signer }));
  }

  private async load(id: number) {
    const contract: Contract | null = await this.contracts.find(id);
    if (!contract) throw new NotFoundException(`Contract ${id} not found`);
    const workflow = await this.contracts.workflowOf(contract);
    if (!workflow) throw new NotFoundException(`Contract ${id} has no workflow`);
    return { contract, workflow };
  }
}
