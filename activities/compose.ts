/**
 * The worker registers one flat namespace of activities, built from several factories. Spreading them
 * into one object would let a later factory's activity silently replace an earlier one of the same
 * name (and every workflow calling it would run the wrong code); composing them here throws instead,
 * when the worker starts.
 */

type ActivityGroup = Record<string, (...args: never[]) => unknown>;
type Intersection<U> = (U extends unknown ? (group: U) => void : never) extends (group: infer I) => void ? I : never;

export class DuplicateActivityError extends Error {
  constructor(
    readonly activity: string,
    readonly groups: [string, string],
  ) {
    super(
      `activity '${activity}' is defined by both the '${groups[0]}' and the '${groups[1]}' activities: rename one of them`,
    );
    this.name = 'DuplicateActivityError';
  }
}

/** One namespace from named groups of activities; throws `DuplicateActivityError` on a name defined twice. */
export function composeActivities<Groups extends Record<string, ActivityGroup>>(
  groups: Groups,
): Intersection<Groups[keyof Groups]> {
  const composed: ActivityGroup = {};
  const owner = new Map<string, string>();
  for (const [group, activities] of Object.entries(groups)) {
    for (const [name, activity] of Object.entries(activities)) {
      const previous = owner.get(name);
      if (previous !== undefined) throw new DuplicateActivityError(name, [previous, group]);
      owner.set(name, group);
      composed[name] = activity;
    }
  }
  return composed as Intersection<Groups[keyof Groups]>;
}
