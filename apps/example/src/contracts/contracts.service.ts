import { Injectable } from '@nestjs/common';
import { SignalService, WorkflowService, type Signal, type WorkflowRecord } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { Contract } from './contract.entity.js';
import { ContractDeadlineWorkflow, ContractWorkflow, DOCUMENT_SIGNED, sendSignatureDeadline, type DocumentSignedPayload } from './contract.workflow.js';

@Injectable()
export class ContractsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
  ) {}

  /** Saves the contract and starts its workflow and its deadline clock, in one transaction. */
  async open(documentId: string): Promise<{ contract: Contract; workflowId: string; deadlineWorkflowId: string }> {
    return this.dataSource.transaction(async (manager) => {
      const contract = await manager.save(manager.create(Contract, { documentId }));
      const workflow = await this.workflows.start(ContractWorkflow, contract, { manager });
      const deadline = await this.workflows.start(ContractDeadlineWorkflow, contract, { manager });
      return { contract, workflowId: workflow.id, deadlineWorkflowId: deadline.id };
    });
  }

  find(id: number): Promise<Contract | null> {
    return this.dataSource.getRepository(Contract).findOneBy({ id });
  }

  /** The contract's newest ContractWorkflow, in whatever state (so redeliveries to a finished one are recognised). */
  async workflowOf(contract: Contract): Promise<WorkflowRecord | null> {
    const [record] = await this.workflows.findForHero(ContractWorkflow, contract);
    return record ?? null;
  }

  /** The signature provider's event; the provider's event id makes its retries harmless. */
  signed(workflow: WorkflowRecord, eventId: string, payload: DocumentSignedPayload): Promise<Signal<DocumentSignedPayload>> {
    return this.signals.signal<DocumentSignedPayload>(workflow, DOCUMENT_SIGNED.signalName, { payload, idempotencyKey: eventId });
  }

  /** The deadline, now (an operator, or a scheduler of your own, instead of waiting for the clock). */
  deadline(workflow: WorkflowRecord, contract: Contract): Promise<Signal<DocumentSignedPayload>> {
    return sendSignatureDeadline(this.signals, workflow, contract);
  }
}
