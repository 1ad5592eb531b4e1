/** `transactional` and `transactionTimeout` in a definition: defaults, the class-level default, and what is refused at boot. */
import { describe, expect, it } from '@jest/globals';
import { StepConfigurationError } from '../errors/step-configuration.error.js';
import { GenevaWorkflow } from '../workflow/geneva-workflow.js';
import { ResumableStep } from '../workflow/resumable-step.decorator.js';
import { Step } from '../workflow/step.decorator.js';
import type { StepIteration } from '../workflow/step-iteration.js';
import { Workflow } from '../workflow/workflow.decorator.js';
import { buildWorkflowDefinition, DEFAULT_TRANSACTION_TIMEOUT_MS } from './workflow-definition.js';

const refusal = (build: () => unknown): string => {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(StepConfigurationError);
    return (error as Error).message;
  }
  throw new Error('expected a StepConfigurationError');
};

describe('transactional steps in a definition', () => {
  it('are off by default; a step opts in, with a timeout of its own or the default', () => {
    @Workflow()
    class Steps extends GenevaWorkflow {
      @Step() async plain() {}
      @Step({ transactional: true }) async booked() {}
      @Step({ transactional: true, transactionTimeout: '2s' }) async quick() {}
    }
    const steps = buildWorkflowDefinition(Steps).steps.map((s) => [s.name, s.transactional, s.transactionTimeoutMs]);
    expect(steps).toEqual([
      ['plain', false, DEFAULT_TRANSACTION_TIMEOUT_MS],
      ['booked', true, DEFAULT_TRANSACTION_TIMEOUT_MS],
      ['quick', true, 2000],
    ]);
  });

  it('the class default applies to its steps, resumable ones included, which may opt out', () => {
    @Workflow({ transactional: true })
    class Booked extends GenevaWorkflow {
      @Step() async one() {}
      @Step({ transactional: false }) async two() {}
      @ResumableStep() async three(_iteration: StepIteration) {}
      @ResumableStep({ transactional: false }) async four(_iteration: StepIteration) {}
    }
    expect(buildWorkflowDefinition(Booked).steps.map((s) => s.transactional)).toEqual([true, false, true, false]);
  });

  it('refuses what cannot work, at boot', () => {
    const bad = (options: object) => () => {
      @Workflow()
      class Bad extends GenevaWorkflow {
        @Step(options) async one() {}
      }
      return buildWorkflowDefinition(Bad);
    };
    expect(refusal(bad({ transactionTimeout: '5s' }))).toMatch(/transactionTimeout needs transactional: true/);
    expect(refusal(bad({ transactional: true, transactionTimeout: 0 }))).toMatch(/transactionTimeout must be a positive duration/);
    expect(refusal(bad({ transactional: 'yes' }))).toMatch(/transactional must be true or false/);
    expect(
      refusal(() => {
        @Workflow({ transactional: 1 } as object)
        class Flagged extends GenevaWorkflow {}
        return buildWorkflowDefinition(Flagged);
      }),
    ).toMatch(/transactional must be true or false/);
  });
});
