/**
 * Fixture workflows of the mixed-fleet specs: one workflow type, `FleetOrder`, as two versions of
 * the code define it — the current one (reserveStock, then ship) and the one deployed before
 * reserveStock was added (ship only) — plus a chore every process has, a workflow whose first step
 * is due in an hour, and one that waits for a signal with a deadline. Bodies record in
 * `fleetJournal` which step ran in which application (`<step>@<label>`).
 */
import { GenevaWorkflow, Step, Workflow } from 'geneva-drive';
import { TestHero } from '../utils/fixtures.js';

export const fleetJournal: string[] = [];

/** Which application a body ran in: set by the spec on each class it boots (one class per version). */
const labels = new Map<Function, string>();
export function labelOf(target: Function): string {
  return labels.get(target) ?? target.name;
}
export function setLabel(target: Function, label: string): void {
  labels.set(target, label);
}

/** The current version: reserveStock was added before ship. */
@Workflow({ name: 'FleetOrder', hero: () => TestHero })
export class FleetOrderWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async reserveStock() {
    fleetJournal.push(`reserveStock@${labelOf(FleetOrderWorkflow)}`);
  }

  @Step()
  async ship() {
    fleetJournal.push(`ship@${labelOf(FleetOrderWorkflow)}`);
  }
}

/** The same workflow type as a worker deployed before reserveStock existed defines it. */
@Workflow({ name: 'FleetOrder', hero: () => TestHero })
export class FleetOrderBeforeReserveWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async ship() {
    fleetJournal.push(`ship@${labelOf(FleetOrderBeforeReserveWorkflow)}`);
  }
}

/** A workflow every process of the fleet has. */
@Workflow({ name: 'FleetChore', hero: () => TestHero })
export class FleetChoreWorkflow extends GenevaWorkflow<TestHero> {
  @Step()
  async sweep() {
    fleetJournal.push('sweep');
  }
}

/** A first step due in an hour: scheduled, and run by nobody while a spec looks at it. */
@Workflow({ name: 'FleetLater', hero: () => TestHero })
export class FleetLaterWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ wait: '1h' })
  async reserveStock() {
    fleetJournal.push('later.reserveStock');
  }
}

/** The same type without its step (a version that does not have it yet). */
@Workflow({ name: 'FleetLater', hero: () => TestHero })
export class FleetLaterWithoutStepWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ wait: '1h' })
  async somethingElse() {
    fleetJournal.push('later.somethingElse');
  }
}

/** Parks waiting for `approved`, for at most a second. */
@Workflow({ name: 'FleetApproval', hero: () => TestHero })
export class FleetApprovalWorkflow extends GenevaWorkflow<TestHero> {
  @Step({ waitFor: 'approved', timeout: '1s', onTimeout: 'skip' })
  async awaitApproval() {
    fleetJournal.push('approved');
  }

  @Step()
  async close() {
    fleetJournal.push('close');
  }
}
