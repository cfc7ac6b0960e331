import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import * as patches from '../../workflows/patches';

/**
 * The patch registry is the only place a `patched()` id is written: a call site with a literal, or an
 * id the registry does not list, fails here, so every patch has a recorded release, legacy branch and
 * retirement release. The committed histories' markers must be known ids too.
 */
const ROOT = path.resolve(__dirname, '../..');
const PATCH_FUNCTIONS = new Set(['patched', 'deprecatePatch']);
const registryIds = new Set(patches.PATCHES.map((entry) => entry.id));
/** The registry's exported id constants, by name. */
const idConstants = new Map<string, string>(
  Object.entries(patches as Record<string, unknown>).filter(
    (entry): entry is [string, string] => typeof entry[1] === 'string' && registryIds.has(entry[1]),
  ),
);

interface PatchCall {
  file: string;
  line: number;
  fn: string;
  /** The argument's source text. */
  argument: string;
  /** The argument is a bare identifier (a constant), not a literal or an expression. */
  identifier: boolean;
}

export function patchCalls(file: string, source: string): PatchCall[] {
  const sourceFile = ts.createSourceFile(file, source, ts.ScriptTarget.ES2023, true);
  const calls: PatchCall[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && ts.isIdentifier(node.expression) && PATCH_FUNCTIONS.has(node.expression.text)) {
      const argument = node.arguments[0];
      calls.push({
        file,
        line: sourceFile.getLineAndCharacterOfPosition(node.getStart()).line + 1,
        fn: node.expression.text,
        argument: argument?.getText(sourceFile) ?? '',
        identifier: argument !== undefined && ts.isIdentifier(argument),
      });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return calls;
}

const workflowFiles = fs
  .readdirSync(path.join(ROOT, 'workflows'), { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
  .map((entry) => path.join(entry.parentPath, entry.name));
const calls = workflowFiles.flatMap((file) => patchCalls(path.relative(ROOT, file), fs.readFileSync(file, 'utf8')));
const where = (call: PatchCall): string => `${call.file}:${call.line} ${call.fn}(${call.argument})`;

describe('the patch registry (workflows/patches.ts)', () => {
  test('the scanner sees a literal id, an expression and a constant (control)', () => {
    const found = patchCalls(
      'x.ts',
      "if (patched('raw-id')) a(); const b = deprecatePatch(`t-${1}`); patched(FUSED_STEP_PATCH);",
    );
    expect(found.map((call) => [call.argument, call.identifier])).toEqual([
      ["'raw-id'", false],
      ['`t-${1}`', false],
      ['FUSED_STEP_PATCH', true],
    ]);
  });

  test('every patched()/deprecatePatch() call names a registered constant, never a literal', () => {
    expect(calls.length).toBeGreaterThanOrEqual(patches.PATCHES.length);
    expect(calls.filter((call) => !call.identifier || !idConstants.has(call.argument)).map(where)).toEqual([]);
  });

  test('ids are unique, each entry is used, and a deprecated one is only ever deprecatePatch()ed', () => {
    expect(registryIds.size).toBe(patches.PATCHES.length);
    const used = new Map<string, Set<string>>();
    for (const call of calls) {
      const id = idConstants.get(call.argument);
      if (id !== undefined) used.set(id, (used.get(id) ?? new Set()).add(call.fn));
    }
    for (const entry of patches.PATCHES) {
      expect([entry.id, [...(used.get(entry.id) ?? [])]]).toEqual([
        entry.id,
        [entry.status === 'deprecated' ? 'deprecatePatch' : 'patched'],
      ]);
    }
  });

  test('every entry names real releases, in order, with deprecation at least the window after the release that added it', () => {
    const releases = fs.readdirSync(path.join(ROOT, 'test', 'histories')).sort(compareVersions);
    const release = (version: string): number => Number(version.split('.')[1]);
    // A patch added since the last recorded release names the next one; recording its histories makes it real.
    const next = `0.${release(releases.at(-1)!) + 1}.0`;
    for (const entry of patches.PATCHES) {
      expect([...releases, next]).toContain(entry.addedIn);
      expect(entry.legacy.length).toBeGreaterThan(20);
      // Legacy histories end at the release before `addedIn`; they stay in the window for SUPPORTED_RELEASES - 1 more releases.
      expect(release(entry.deprecateAfter) - release(entry.addedIn)).toBe(patches.SUPPORTED_RELEASES - 2);
    }
  });

  test("in this release's histories every patch marker is written by the run's first workflow task", () => {
    // 'Up-front patches' and 'The release baseline' in patches.ts: a patch asked later, after a local
    // activity, can be answered differently in replay. The first workflow task's commands follow its
    // completion event and come before the next workflow task completes.
    const version = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
      .version;
    const late: string[] = [];
    let markers = 0;
    for (const history of committedHistories().filter((h) => h.version === version)) {
      let completed = 0;
      for (const [index, event] of history.events.entries()) {
        if (event.eventType === 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED') completed += 1;
        if (event.markerRecordedEventAttributes?.markerName !== 'core_patch') continue;
        markers += 1;
        if (completed !== 1) late.push(`${history.file} event ${index + 1}`);
      }
    }
    expect(markers).toBeGreaterThan(0);
    expect(late).toEqual([]);
  });

  test('every patch marker in the committed histories is a registered id', () => {
    const markers = new Set<string>();
    for (const { events } of committedHistories()) {
      for (const event of events) {
        const marker = event.markerRecordedEventAttributes;
        if (marker?.markerName !== 'core_patch') continue;
        for (const payload of marker.details['patch-data']?.payloads ?? [])
          markers.add((JSON.parse(Buffer.from(payload.data, 'base64').toString('utf8')) as { id: string }).id);
      }
    }
    expect(markers.size).toBeGreaterThan(0);
    expect([...markers].filter((id) => !registryIds.has(id))).toEqual([]);
  });
});

interface CommittedHistory {
  version: string;
  file: string;
  events: Array<{
    eventType: string;
    markerRecordedEventAttributes?: {
      markerName: string;
      details: Record<string, { payloads: Array<{ data: string }> }>;
    };
  }>;
}

/** Every recorded history under `test/histories/<version>/`, read once for the tests above. */
let histories: CommittedHistory[] | undefined;
function committedHistories(): CommittedHistory[] {
  const dir = path.join(ROOT, 'test', 'histories');
  histories ??= fs.readdirSync(dir).flatMap((version) =>
    fs
      .readdirSync(path.join(dir, version))
      .filter((file) => file.endsWith('.json'))
      .map((file) => ({
        version,
        file,
        events: (
          JSON.parse(fs.readFileSync(path.join(dir, version, file), 'utf8')) as { events: CommittedHistory['events'] }
        ).events,
      })),
  );
  return histories;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}
