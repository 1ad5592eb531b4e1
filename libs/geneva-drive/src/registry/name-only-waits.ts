import { SignalMatcher, type SignalMatcherLike } from '../workflow/signal-matcher.js';
import type { WorkflowDefinition } from './workflow-definition.js';

/**
 * The classes among `definitions` where a signal named `name` is decided by its name alone, each
 * with its steps that wait for it: every step of the class that waits, waits for a name with no
 * predicate, or for another name (a predicate, a fan-in or a matcher of the application's own could
 * accept it: such a class is left out, and its signals go through the transaction, where matchers
 * run). A class none of whose steps waits for `name` is left out too (a name it refuses, or one
 * buffered for a later version).
 */
export function nameOnlyWaits(definitions: readonly WorkflowDefinition[], name: string): Map<string, string[]> {
  const routes = new Map<string, string[]>();
  for (const definition of definitions) {
    const steps: string[] = [];
    let decidable = true;
    for (const step of definition.steps) {
      const matcher = step.waitFor;
      if (!matcher) continue;
      if (Object.getPrototypeOf(matcher) !== SignalMatcher.prototype) decidable = false;
      else if (matcher.signalName === name) {
        if (waitsForNameAlone(matcher)) steps.push(step.name);
        else decidable = false;
      }
    }
    if (decidable && steps.length > 0) routes.set(definition.name, steps);
  }
  return routes;
}

/** Whether a step's matcher accepts a signal by its name alone: the engine's own, not a subclass that may decide otherwise, with no predicate. */
export function waitsForNameAlone(matcher: SignalMatcherLike): matcher is SignalMatcher & { signalName: string } {
  return Object.getPrototypeOf(matcher) === SignalMatcher.prototype && !(matcher as SignalMatcher).needsWorkflow;
}
