import { GenevaWorkflow, SignalMatcher, SignalService, Step, Workflow, WorkflowNotOngoingError, WorkflowService, type Signal, type WorkflowRecord } from 'geneva-drive';
import { DataSource } from 'typeorm';
import { logText } from '../log-text.js';
import { Contract } from './contract.entity.js';

/** What the signature provider reports, and what the deadline sends (with `timedOut`). */
export interface DocumentSignedPayload {
  documentId: string;
  signer?: string;
  timedOut?: boolean;
}

/**
 * "This contract's document was signed": the one rule, in a constant shared by the step that waits
 * and by everything that sends (the signature webhook, the deadline), so the name cannot drift and a
 * signature of another document (an outdated version, say) is recorded but wakes nothing.
 */
export const DOCUMENT_SIGNED = new SignalMatcher<DocumentSignedPayload, { hero: Contract }>(
  'document_signed',
  (payload, wf) => payload.documentId === wf.hero.documentId,
);

/** How long a contract waits for its signature before the deadline is sent. */
export const SIGNATURE_DEADLINE = '14d';

/**
 * Sends the contract's deadline: a `document_signed` that says it timed out. It carries the document
 * id, so it passes DOCUMENT_SIGNED like a real signature, and its key makes it one signal however
 * often the deadline fires (the clock below, an operator, a retry).
 */
export function sendSignatureDeadline(signals: SignalService, workflow: WorkflowRecord, contract: Contract): Promise<Signal<DocumentSignedPayload>> {
  return signals.signal<DocumentSignedPayload>(workflow, DOCUMENT_SIGNED.signalName, {
    payload: { documentId: contract.documentId, timedOut: true },
    idempotencyKey: `deadline-${workflow.id}`,
  });
}

@Workflow({ hero: () => Contract })
export class ContractWorkflow extends GenevaWorkflow<Contract> {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  @Step()
  async sendForSignature() {
    this.logger.log(`sending document ${logText(this.hero.documentId)} for signature`);
  }

  /** Parks until the signature, or the deadline, arrives: whichever comes first is the one handled. */
  @Step({ waitFor: DOCUMENT_SIGNED })
  async awaitSignature() {
    const { timedOut, signer } = this.receivedSignal!.payload as DocumentSignedPayload;
    const contracts = this.dataSource.getRepository(Contract);
    if (timedOut) {
      await contracts.update(this.hero.id, { status: 'expired' });
      this.cancel(); // given up on: no further step runs
    }
    await contracts.update(this.hero.id, { status: 'signed', signedBy: signer ?? null });
  }

  @Step()
  async sendSignedCopy() {
    this.logger.log(`sending the signed copy of ${logText(this.hero.documentId)} to ${this.hero.signedBy ? logText(this.hero.signedBy) : 'the signer'}`);
  }
}

/** The contract's clock: one step that sends the deadline once SIGNATURE_DEADLINE has passed. */
@Workflow({ hero: () => Contract })
export class ContractDeadlineWorkflow extends GenevaWorkflow<Contract> {
  constructor(
    private readonly workflows: WorkflowService,
    private readonly signals: SignalService,
  ) {
    super();
  }

  @Step({ wait: SIGNATURE_DEADLINE })
  async sendDeadline() {
    const contract = await this.workflows.findOngoing(ContractWorkflow, this.hero);
    if (!contract) return; // signed, or given up on, already
    try {
      await sendSignatureDeadline(this.signals, contract, this.hero);
    } catch (error) {
      if (!(error instanceof WorkflowNotOngoingError)) throw error; // it ended meanwhile: nothing to do
    }
  }
}
