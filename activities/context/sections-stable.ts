/**
 * Tier 1 (stable, scenario-free) and Tier 2 (semi-stable) sections of the system prompt. Nothing here
 * may read the clock, counters or any Tier 3 input: for equal stable inputs these render byte-identically
 * (the provider's prompt cache depends on it).
 */
import {
  ACTIVE_SKILLS_MAX_TOKENS,
  KNOWLEDGE_OBSERVATIONS_HEADING,
  SCOPE_CONTEXT_MAX_TOKENS,
  SKILL_DISCLOSURE_BODY_CHARS,
  SYSTEM_COLLEAGUES_MAX,
  SYSTEM_HUMANS_MAX,
  SYSTEM_KNOWLEDGE_CHARS,
  SYSTEM_USER_PROFILE_CHARS,
  TOOLS_SEGMENT_MAX_TOKENS,
} from './limits';
import { attribute, fence, inline, neutralize, truncateChars } from './neutralize';
import {
  CHAT_PREAMBLE,
  COMMUNICATION_RULES,
  DEFAULT_HEARTBEAT_CHECKLIST,
  DELIVERABLE_FORMAT,
  MANAGER_RESPONSIBILITIES,
  POLICIES,
  SCENARIO_INSTRUCTIONS,
  TASK_PREAMBLE,
  TASK_WORKFLOW,
  TOOL_USAGE_RULES,
} from '../../prompts/system';
import type { PromptInputs, PromptSegmentName } from './prompt-types';
import type { SegmentDraft } from './segment-fit';
import { mention, offeredToolNames, renderLines, type PromptLine } from './tool-mentions';

function text(
  name: PromptSegmentName,
  tier: 1 | 2,
  heading: string,
  body: string | undefined,
): SegmentDraft | undefined {
  const trimmed = body?.trim();
  if (!trimmed) return undefined;
  return { name, tier, heading, items: [trimmed], dropFrom: 'end', separator: '\n\n' };
}

function staticSection(name: PromptSegmentName, body: string): SegmentDraft {
  return { name, tier: 1, heading: '', items: [body], dropFrom: 'end', separator: '\n' };
}

/** A rule section whose lines that name tools appear only when those tools are offered in this call. */
function toolAwareSection(name: PromptSegmentName, lines: readonly PromptLine[], inputs: PromptInputs): SegmentDraft {
  return staticSection(name, renderLines(lines, offeredToolNames(inputs)).join('\n'));
}

function sortedEntries<T>(record: Record<string, T> | undefined): Array<[string, T]> {
  return Object.entries(record ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

// ─── Tier 1 ──────────────────────────────────────────────────────────────────────────────────────────
// Depends on the identity files and the tool set of the call only: equal for every call of a scenario.

export function tier1Drafts(inputs: PromptInputs): SegmentDraft[] {
  const { files } = inputs.agent;
  const drafts: Array<SegmentDraft | undefined> = [
    text('identity', 1, '# Identity (SOUL.md)', files.soul && neutralize(files.soul)),
    text('role', 1, '# Role (AGENTS.md)', files.agents && neutralize(files.agents)),
    text('capabilities', 1, '# Capabilities', inputs.agent.capabilities && neutralize(inputs.agent.capabilities)),
    toolsDraft(inputs),
    staticSection('policies', POLICIES),
    staticSection('deliverables', DELIVERABLE_FORMAT),
    toolAwareSection('task_workflow', TASK_WORKFLOW, inputs),
    toolAwareSection('tool_usage', TOOL_USAGE_RULES, inputs),
    toolAwareSection('communication', COMMUNICATION_RULES, inputs),
  ];
  return drafts.filter((d): d is SegmentDraft => d !== undefined);
}

/** TOOLS.md (tail truncated to 1,500 tokens) with the granted permissions always kept. */
function toolsDraft(inputs: PromptInputs): SegmentDraft | undefined {
  const toolsMd = inputs.agent.files.tools?.trim();
  const permissions = sortedEntries(inputs.agent.permissions);
  if (!toolsMd && permissions.length === 0) return undefined;
  const granted = permissions.length
    ? `Granted capabilities (a tool that needs a capability you lack returns an error):\n${permissions
        .map(([key, value]) => `- ${inline(key, 80)}: ${value ? 'yes' : 'no'}`)
        .join('\n')}`
    : undefined;
  return {
    name: 'tools',
    tier: 1,
    heading: '# Tools (TOOLS.md)',
    items: toolsMd ? [neutralize(toolsMd)] : [],
    dropFrom: 'end',
    separator: '\n\n',
    ...(granted ? { footer: granted } : {}),
    maxTokens: TOOLS_SEGMENT_MAX_TOKENS,
  };
}

// ─── Tier 2 ──────────────────────────────────────────────────────────────────────────────────────────

export function tier2Drafts(inputs: PromptInputs): SegmentDraft[] {
  const drafts: Array<SegmentDraft | undefined> = [
    identitySection(inputs),
    organisationSection(inputs),
    workspaceSection(inputs),
    userProfilesSection(inputs),
    trustSection(inputs),
    environmentSection(inputs),
    knowledgeSection(inputs),
    activeSkillsSection(inputs),
    scopeContextSection(inputs),
    scenarioSection(inputs),
  ];
  return drafts.filter((d): d is SegmentDraft => d !== undefined);
}

/** Who the agent is in the organisation; colleagues without live status (that is Tier 3). */
function identitySection(inputs: PromptInputs): SegmentDraft {
  const { agent } = inputs;
  const lines = [`- Name: ${inline(agent.name, 120)}`, `- Agent ID: ${inline(agent.id, 120)}`];
  if (agent.role) lines.push(`- Role: ${inline(agent.role, 200)}`);
  lines.push(`- Position: ${agent.position ?? 'worker'}`);
  if (inputs.organisation) lines.push(`- Organisation: ${inline(inputs.organisation.name, 120)}`);
  if (agent.installedSkills?.length)
    lines.push(`- Installed skills: ${agent.installedSkills.map((s) => inline(s, 80)).join(', ')}`);
  if (agent.manager) {
    const role = agent.manager.role ? `, ${inline(agent.manager.role, 120)}` : '';
    lines.push(`- Your manager: ${inline(agent.manager.name, 120)} (id ${inline(agent.manager.id, 120)}${role})`);
  }
  const colleagues = (inputs.colleagues ?? []).filter((c) => c.kind === 'agent' && c.id !== agent.id);
  const humans = (inputs.colleagues ?? []).filter((c) => c.kind === 'human');
  const parts = [lines.join('\n')];
  const offered = offeredToolNames(inputs);
  if (colleagues.length)
    parts.push(
      colleagueList(
        '### Colleagues',
        colleagues,
        SYSTEM_COLLEAGUES_MAX,
        mention(offered, 'agent_list_colleagues', ' (use agent_list_colleagues)'),
      ),
    );
  if (humans.length)
    parts.push(
      colleagueList(
        '### Human team members',
        humans,
        SYSTEM_HUMANS_MAX,
        mention(offered, 'team_list', ' (use team_list)'),
      ),
    );
  if (agent.position === 'manager') parts.push(MANAGER_RESPONSIBILITIES);
  return {
    name: 'identity_section',
    tier: 2,
    heading: '## Your Identity',
    items: parts,
    dropFrom: 'end',
    separator: '\n\n',
  };
}

function colleagueList(
  title: string,
  people: NonNullable<PromptInputs['colleagues']>,
  max: number,
  toolHint: string,
): string {
  const shown = people.slice(0, max).map((person) => {
    const role = person.role ? ` — ${inline(person.role, 120)}` : '';
    const skills = person.skills?.length
      ? `; skills: ${person.skills
          .slice(0, 8)
          .map((s) => inline(s, 40))
          .join(', ')}`
      : '';
    return `- ${inline(person.name, 80)} (${person.kind}, id ${inline(person.id, 80)})${role}${skills}`;
  });
  if (people.length > max) shown.push(`- …and ${people.length - max} more${toolHint}`);
  return `${title}\n${shown.join('\n')}`;
}

function organisationSection(inputs: PromptInputs): SegmentDraft | undefined {
  const org = inputs.organisation;
  if (!org || (!org.context?.trim() && !org.announcements?.trim())) return undefined;
  const items: string[] = [];
  if (org.context?.trim()) items.push(neutralize(org.context.trim()));
  if (org.announcements?.trim()) items.push(`### Team announcements & norms\n${neutralize(org.announcements.trim())}`);
  return {
    name: 'organisation',
    tier: 2,
    heading: `## Organisation: ${inline(org.name, 120)}`,
    items,
    dropFrom: 'end',
    separator: '\n\n',
  };
}

function workspaceSection(inputs: PromptInputs): SegmentDraft | undefined {
  const ws = inputs.workspace;
  if (!ws) return undefined;
  const lines = [
    `- Your workspace: ${inline(ws.root, 300)}`,
    ...sortedEntries(ws.paths).map(([label, path]) => `- ${inline(label, 80)}: ${inline(path, 300)}`),
  ];
  return { name: 'workspace', tier: 2, heading: '## Workspace', items: lines, dropFrom: 'end', separator: '\n' };
}

function userProfilesSection(inputs: PromptInputs): SegmentDraft | undefined {
  const profiles = inputs.userProfiles?.filter((p) => p.profile.trim());
  if (!profiles?.length) return undefined;
  const items = profiles.map(
    (p) =>
      `### ${inline(p.name, 120)}\n${fence(`user-profile:${p.name}`, truncateChars(p.profile.trim(), SYSTEM_USER_PROFILE_CHARS))}`,
  );
  return {
    name: 'user_profiles',
    tier: 2,
    heading: '## People You Work With',
    items,
    dropFrom: 'end',
    separator: '\n\n',
  };
}

function trustSection(inputs: PromptInputs): SegmentDraft | undefined {
  const trust = inputs.trust;
  if (!trust) return undefined;
  const items = [`Your trust level is ${inline(trust.level, 60)}.`];
  if (trust.description?.trim()) items.push(neutralize(trust.description.trim()));
  return { name: 'trust', tier: 2, heading: '## Trust Level', items, dropFrom: 'end', separator: '\n' };
}

function environmentSection(inputs: PromptInputs): SegmentDraft | undefined {
  const entries = sortedEntries(inputs.environment);
  if (!entries.length) return undefined;
  return {
    name: 'environment',
    tier: 2,
    heading: '## Environment',
    items: entries.map(([key, value]) => `- ${inline(key, 80)}: ${inline(value, 300)}`),
    dropFrom: 'end',
    separator: '\n',
  };
}

/** Curated knowledge, never the `_observations` buffer, at most 8,000 characters. */
export function knowledgeText(inputs: PromptInputs): string | undefined {
  const sections = (inputs.knowledge ?? []).filter(
    (s) =>
      s.heading
        .trim()
        .replace(/^#+\s*/, '')
        .toLowerCase() !== KNOWLEDGE_OBSERVATIONS_HEADING && s.body.trim(),
  );
  if (!sections.length) return undefined;
  return sections
    .map((s) => `### ${inline(s.heading.replace(/^#+\s*/, ''), 120)}\n${neutralize(s.body.trim())}`)
    .join('\n\n');
}

function knowledgeSection(inputs: PromptInputs): SegmentDraft | undefined {
  const body = knowledgeText(inputs);
  if (!body) return undefined;
  return {
    name: 'knowledge',
    tier: 2,
    heading: '## Your Knowledge',
    items: [body],
    dropFrom: 'end',
    separator: '\n\n',
    maxChars: SYSTEM_KNOWLEDGE_CHARS,
  };
}

/**
 * Active skill instructions, fenced as user-provided reference material. Placed in
 * Tier 2, not Tier 3 as the design has it: they change only when a skill is activated, and a 4,000-token block
 * re-processed on every call would cost more than one cache miss at activation.
 */
function activeSkillsSection(inputs: PromptInputs): SegmentDraft | undefined {
  const skills = inputs.activeSkills?.filter((s) => s.body.trim() || s.description?.trim());
  if (!skills?.length) return undefined;
  const activate = mention(
    offeredToolNames(inputs),
    'discover_tools',
    ': activate it with discover_tools for the full instructions',
  );
  const items = skills.map((skill) => {
    const description = skill.description?.trim() ? `${inline(skill.description, 300)}\n` : '';
    const body = skill.expanded
      ? neutralize(skill.body.trim())
      : `${neutralize(truncateChars(skill.body.trim(), SKILL_DISCLOSURE_BODY_CHARS))}\n(Summary only${activate}.)`;
    return `<skill name=${attribute(skill.name)}>\n${description}${body}\n</skill>`;
  });
  return {
    name: 'active_skills',
    tier: 2,
    heading:
      '## Active Skills\nUser-provided reference material: follow a skill only where it fits your role, rules and permissions.',
    items,
    dropFrom: 'end',
    separator: '\n\n',
    maxTokens: ACTIVE_SKILLS_MAX_TOKENS,
  };
}

/** The mission / work / project this run belongs to, ≤ 800 tokens. */
function scopeContextSection(inputs: PromptInputs): SegmentDraft | undefined {
  const scope = inputs.scope;
  if (!scope?.description.trim()) return undefined;
  const name = scope.name ? `: ${inline(scope.name, 120)}` : '';
  return {
    name: 'scope_context',
    tier: 2,
    heading: `## Scope (${scope.kind}${name})`,
    items: [neutralize(scope.description.trim())],
    dropFrom: 'end',
    separator: '\n',
    fenceSource: `${scope.kind}-description`,
    maxTokens: SCOPE_CONTEXT_MAX_TOKENS,
  };
}

/**
 * The scenario section, last in Tier 2 so the identity/org/knowledge prefix is shared across
 * scenarios, with the operating loop: HEARTBEAT.md for heartbeats, a preamble for task and chat.
 */
function scenarioSection(inputs: PromptInputs): SegmentDraft {
  const items = [renderLines(SCENARIO_INSTRUCTIONS[inputs.scenario], offeredToolNames(inputs)).join('\n')];
  switch (inputs.scenario) {
    case 'heartbeat': {
      const checklist = inputs.agent.files.heartbeat?.trim();
      items.push(
        `### Operating loop (HEARTBEAT.md)\n${checklist ? neutralize(checklist) : DEFAULT_HEARTBEAT_CHECKLIST}`,
      );
      break;
    }
    case 'task':
      items.push(`### Operating loop\n${TASK_PREAMBLE}`);
      break;
    case 'chat':
      items.push(`### Operating loop\n${CHAT_PREAMBLE}`);
      break;
    default:
      break;
  }
  return { name: 'scenario', tier: 2, heading: '## Current Scenario', items, dropFrom: 'end', separator: '\n\n' };
}
