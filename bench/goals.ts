/**
 * The hot path's timing goals for the comparison shape (PostgreSQL + Bull, one process, concurrency
 * 10, this machine), each reported as the median of the timed runs with the load each run saw.
 * Reported, never gated: timings on a shared machine move with its load; the deterministic counts
 * are the gate (shape.ts).
 */
import type { DatabaseKind } from './config.js';
import type { RunLoad, ShapeRun, SignalsResult } from './shape.js';
import { median, table } from './stats.js';

/** Every timed run of the shape, in run order. */
export interface ShapeTimings {
  signalFirst: ShapeRun[];
  signalAfter: ShapeRun[];
  /** Signals one at a time, each after the previous workflow finished. */
  sequential: SignalsResult[];
  /** Signals fired at once. */
  simultaneous: SignalsResult[];
}

interface Goal {
  measure: string;
  /** At least (`min`) or at most (`max`) this. */
  bound: 'min' | 'max';
  target: number;
  unit: string;
  /** One value per run, with the load of the run it came from. */
  values: (timings: ShapeTimings) => Array<{ value: number | undefined; load: RunLoad }>;
}

const GOALS = (db: DatabaseKind, signals: { sequential: number; simultaneous: number }): Goal[] => [
  { measure: 'signal right after start()', bound: 'min', target: 450, unit: 'workflows/s', values: (t) => t.signalFirst.map((r) => ({ value: r.workflowsPerSecond, load: r.load })) },
  { measure: 'signal after all parked', bound: 'min', target: 400, unit: 'workflows/s', values: (t) => t.signalAfter.map((r) => ({ value: r.workflowsPerSecond, load: r.load })) },
  { measure: 'park rate', bound: 'min', target: 600, unit: '/s', values: (t) => t.signalAfter.map((r) => ({ value: r.parkedPerSecond, load: r.load })) },
  { measure: `signal() → woken body p50 (${signals.sequential} one at a time)`, bound: 'max', target: 3, unit: 'ms', values: (t) => t.sequential.map((r) => ({ value: r.signalToStepStart.p50, load: r.load })) },
  { measure: `signal() → woken body p99 (${signals.sequential} one at a time)`, bound: 'max', target: 8, unit: 'ms', values: (t) => t.sequential.map((r) => ({ value: r.signalToStepStart.p99, load: r.load })) },
  { measure: 'signal() call alone p50', bound: 'max', target: 1, unit: 'ms', values: (t) => t.sequential.map((r) => ({ value: r.signalCall.p50, load: r.load })) },
  { measure: `${signals.simultaneous} signals at once, p50 from each call`, bound: 'max', target: 150, unit: 'ms', values: (t) => t.simultaneous.map((r) => ({ value: r.signalToStepStart.p50, load: r.load })) },
  { measure: 'Node CPU per workflow (signal first)', bound: 'max', target: 2, unit: 'ms', values: (t) => t.signalFirst.map((r) => ({ value: r.nodeCpuMsPerWorkflow, load: r.load })) },
  { measure: 'Node CPU per workflow (signal after)', bound: 'max', target: 2, unit: 'ms', values: (t) => t.signalAfter.map((r) => ({ value: r.nodeCpuMsPerWorkflow, load: r.load })) },
  ...(db === 'sqlite'
    ? []
    : (['signalFirst', 'signalAfter'] as const).map(
        (order): Goal => ({
          measure: `${db === 'postgres' ? 'PostgreSQL CPU' : 'mariadbd CPU (whole server)'} per workflow (signal ${order === 'signalFirst' ? 'first' : 'after'})`,
          bound: 'max',
          target: 2.2,
          unit: 'ms',
          values: (t) => t[order].map((r) => ({ value: r.serverCpuMsPerWorkflow, load: r.load })),
        }),
      )),
];

export interface GoalResult {
  measure: string;
  goal: string;
  median: number | undefined;
  runs: Array<number | undefined>;
  loads: RunLoad[];
  met: boolean | undefined;
}

export function evaluateGoals(db: DatabaseKind, timings: ShapeTimings): GoalResult[] {
  const signals = { sequential: timings.sequential[0]?.signals ?? 0, simultaneous: timings.simultaneous[0]?.signals ?? 0 };
  return GOALS(db, signals).map((goal) => {
    const values = goal.values(timings);
    const measured = values.map((v) => v.value).filter((v): v is number => v !== undefined);
    const mid = measured.length === 0 ? undefined : median(measured);
    return {
      measure: goal.measure,
      goal: `${goal.bound === 'min' ? '≥' : '≤'} ${goal.target} ${goal.unit}`,
      median: mid,
      runs: values.map((v) => v.value),
      loads: values.map((v) => v.load),
      met: mid === undefined ? undefined : goal.bound === 'min' ? mid >= goal.target : mid <= goal.target,
    };
  });
}

export function goalsTable(goals: GoalResult[]): string {
  return table([
    ['timing goal (reported, not gated)', 'goal', 'median', 'met', 'runs', 'load per run (1-min, start→end)'],
    ...goals.map((g) => [g.measure, g.goal, figure(g.median), g.met === undefined ? '' : g.met ? 'yes' : 'no', g.runs.map(figure).join(' / '), loads(g.loads)]),
  ]);
}

export function loads(list: RunLoad[]): string {
  return list.map((l) => `${l.start.toFixed(2)}→${l.end.toFixed(2)}`).join(', ');
}

export function figure(value: number | undefined): string {
  if (value === undefined) return 'n/a';
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}
