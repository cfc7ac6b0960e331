/**
 * The `OrgId` search attribute inside workflows: a run hands its organisation to every child it starts,
 * and a task run started without one (a raw Temporal start) tags itself once its task is recorded.
 *
 * Both read only what the history already holds (the run's start attributes and earlier upserts, an
 * activity's recorded result), so a replay makes the same commands: runs recorded before organisations
 * have no `OrgId`, hand none on and upsert none.
 */
import type { SearchAttributePair } from '@temporalio/common';
import { upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { OrgIdSearchAttribute } from './contract';

/** The run's `OrgId` as a pair for a child's start attributes; none when the run has no organisation. */
export function inheritedOrgAttribute(): SearchAttributePair[] {
  const org = workflowInfo().typedSearchAttributes.get(OrgIdSearchAttribute);
  return org ? [{ key: OrgIdSearchAttribute, value: org }] : [];
}

/** Tags the run with `org` unless it already carries it (set at start by every client of ours). */
export function announceOrg(org: string | undefined): void {
  if (!org || workflowInfo().typedSearchAttributes.get(OrgIdSearchAttribute) === org) return;
  upsertSearchAttributes([{ key: OrgIdSearchAttribute, value: org }]);
}

/** Start options for a child that carries no other search attribute: the run's `OrgId`, or nothing. */
export function inheritedOrgOption(): { typedSearchAttributes?: SearchAttributePair[] } {
  const pairs = inheritedOrgAttribute();
  return pairs.length ? { typedSearchAttributes: pairs } : {};
}
