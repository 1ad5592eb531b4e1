/** What canceling a parent does to a child that is still ongoing. @publicApi */
export type OnParentCancel = 'cancel' | 'abandon';

/** A signal delivered to a child with its start (as `WorkflowService.start`'s `signals`). @publicApi */
export interface ChildSignal {
  name: string;
  payload?: unknown;
  idempotencyKey?: string | number;
  allowUnknownName?: boolean;
}

/** Options of `this.startChild`. @publicApi */
export interface StartChildOptions {
  /**
   * The child's identity among the children of this step: a non-blank string of at most 255 bytes
   * or a safe integer. A step run again after a crash starts the child of each key once.
   * @default the position of the call in the body ("0", "1", …)
   */
  key?: string | number;
  /** Signals delivered to the child with its start. */
  signals?: ChildSignal[];
  /** Canceling the parent cancels the child while it is ongoing, or leaves it (`'abandon'`). @default 'cancel' */
  onParentCancel?: OnParentCancel;
  /** As `WorkflowService.start`'s: several ongoing workflows of the child's class for its hero. @default false */
  allowMultiple?: boolean;
}

/** What `this.startChild` returns at once. @publicApi */
export interface ChildHandle {
  readonly key: string;
  /** The child's workflow type name. */
  readonly workflowClass: string;
  /** The child's id, set once the step's outcome (and the child with it) is written; null in the body. */
  id: string | null;
}

/** The child workflow classes `startChild` accepts. */
export type ChildWorkflowClass = abstract new (...args: any[]) => object;

/**
 * What a step body hands over to be written with its outcome (the executor's StepOutputs): the
 * children it starts and the result it stores.
 */
export interface StepOutputSink {
  startChild(workflowClass: ChildWorkflowClass, hero: object, options: StartChildOptions | undefined): ChildHandle;
  setResult(value: unknown): void;
}
