import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = path.join(__dirname, '../..');
/** Where the blocks become files: inside the project (so its modules and node_modules resolve), ignored by git. */
const OUT = path.join(ROOT, '.data', 'readme-examples');
/** tsc over the blocks and the project modules they import; the machine may be shared, so generously. */
const TSC_TIMEOUT_MS = 240_000;
/** An offline example does its work at once; more means it waits on something it should not. */
const RUN_TIMEOUT_MS = 60_000;

interface Block {
  file: string;
  line: number;
  lang: string;
  code: string;
}

/** README.md and every Markdown file under docs/, as paths relative to the project. */
function documentFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
      const relative = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(relative);
      else if (entry.name.endsWith('.md')) found.push(relative);
    }
  };
  walk('docs');
  return ['README.md', ...found.sort()];
}

/** Every fenced block of README.md and docs/**\/*.md, with where it starts. */
function fencedBlocks(): Block[] {
  const files = documentFiles();
  const blocks: Block[] = [];
  for (const file of files) {
    const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(\S*)\s*$/.exec(lines[i]!);
      if (!open) continue;
      const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
      blocks.push({ file, line: i + 1, lang: open[1]!, code: lines.slice(i + 1, end).join('\n') });
      i = end;
    }
  }
  return blocks;
}

/**
 * What a fragment (a block without imports, continuing an earlier one) may use without declaring it:
 * the objects the text around it has introduced.
 */
const CONTEXT: Record<string, string> = {
  agents:
    "import type { AgentsClient as ContextAgentsClient } from '<root>/client';\ndeclare const agents: ContextAgentsClient;",
  conv: "import type { ConversationClient as ContextConversationClient } from '<root>/client/chat';\ndeclare const conv: ContextConversationClient;",
  temporalClient:
    "import type { Client as ContextTemporalClient } from '@temporalio/client';\ndeclare const temporalClient: ContextTemporalClient;",
  AgentSchedules: "import { AgentSchedules } from '<root>/client/schedules';",
};

const tsBlocks = fencedBlocks().filter((b) => b.lang === 'ts' || b.lang === 'typescript');
/** A block with imports is a program, checked as written; one without is a fragment, checked inside an async function. */
const isProgram = (b: Block) => /^import /m.test(b.code);
/** A program that needs no server (no Temporal connection, no database) runs too. */
const runsOffline = (b: Block) =>
  isProgram(b) && !/Connection\.connect|openDatabase|DATABASE_URL|new Client\(/.test(b.code);

function generated(b: Block): string {
  const toRoot = path.relative(OUT, ROOT).split(path.sep).join('/');
  const code = b.code.replace(/from '\.\/([^']*)'/g, `from '${toRoot}/$1'`);
  const context = Object.entries(CONTEXT)
    .filter(
      ([name]) =>
        new RegExp(`\\b${name}\\b`).test(code) &&
        !new RegExp(`(?:const|let|var|function|class)\\s+${name}\\b|import[^;]*\\b${name}\\b`).test(code),
    )
    .map(([, declaration]) => declaration.replaceAll('<root>', toRoot));
  const header = `// ${b.file}:${b.line}\n`;
  if (isProgram(b)) return `${header}${context.join('\n')}\n${code}\nexport {};\n`;
  return `${header}${context.join('\n')}\nexport async function example(): Promise<void> {\n${code}\n}\n`;
}

describe("the README's and docs' examples", () => {
  const names = new Map<Block, string>();
  beforeAll(() => {
    rmSync(OUT, { recursive: true, force: true });
    mkdirSync(OUT, { recursive: true });
    tsBlocks.forEach((b, i) => {
      const name = `block-${String(i + 1).padStart(2, '0')}-line-${b.line}.ts`;
      names.set(b, name);
      writeFileSync(path.join(OUT, name), generated(b));
    });
    writeFileSync(
      path.join(OUT, 'tsconfig.json'),
      JSON.stringify(
        {
          extends: '../../tsconfig.json',
          compilerOptions: { noEmit: true, rootDir: '../..', noUnusedLocals: false },
          include: ['*.ts'],
          exclude: [],
        },
        null,
        2,
      ),
    );
  });

  test('there are TypeScript blocks, and at least one runs offline', () => {
    expect(tsBlocks.length).toBeGreaterThanOrEqual(4);
    expect(tsBlocks.filter(runsOffline).length).toBeGreaterThanOrEqual(1);
  });

  test(
    'every ```ts block type-checks against the project as this CommonJS project builds it (no top-level await)',
    async () => {
      const tsc = path.join(ROOT, 'node_modules', '.bin', 'tsc');
      const result = await run(tsc, ['--noEmit', '-p', path.join(OUT, 'tsconfig.json')], {
        cwd: ROOT,
        timeout: TSC_TIMEOUT_MS,
      }).then(
        () => '',
        (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`,
      );
      // Errors name the generated file; its first line names the README line the block starts at.
      expect(result).toBe('');
    },
    TSC_TIMEOUT_MS + 10_000,
  );

  test('the blocks that need no server run (under tsx, as the README tells people to run them)', async () => {
    for (const b of tsBlocks.filter(runsOffline)) {
      const { stderr } = await run(process.execPath, [require.resolve('tsx/cli'), path.join(OUT, names.get(b)!)], {
        cwd: ROOT,
        timeout: RUN_TIMEOUT_MS,
      });
      expect([b.line, stderr]).toEqual([b.line, '']);
    }
  }, 120_000);

  test('every `npm run X` in a shell block is a package.json script', () => {
    const scripts = Object.keys(
      (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
        .scripts,
    );
    const named = fencedBlocks()
      .filter((b) => b.lang === 'bash' || b.lang === 'sh' || b.lang === '')
      .flatMap((b) => [...b.code.matchAll(/\bnpm run ([a-z][\w:-]*)/g)].map((m) => m[1]!));
    expect(named.length).toBeGreaterThan(0);
    expect([...new Set(named)].filter((s) => !scripts.includes(s))).toEqual([]);
  });

  test('every `agents <command> [<subcommand>]` a shell block names is a command of the CLI', async () => {
    const uses = fencedBlocks()
      .filter((b) => b.lang === 'bash' || b.lang === 'sh' || b.lang === '')
      .flatMap((b) =>
        [...b.code.matchAll(/(?:npm run agents --|^\s*agents) ([a-z][\w-]*)(?: ([a-z][\w-]*))?/gm)].map((m) => ({
          command: m[1]!,
          sub: m[2],
        })),
      );
    expect(uses.length).toBeGreaterThan(10);
    const help = async (...args: string[]) =>
      (
        await run(process.execPath, [require.resolve('tsx/cli'), 'client/cli.ts', ...args, '--help'], {
          cwd: ROOT,
          timeout: RUN_TIMEOUT_MS,
        })
      ).stdout;
    /** Command names of a commander help text ("Commands:" section, first word of each entry). */
    const commandsIn = (text: string) =>
      [...(text.split(/^Commands:$/m)[1] ?? '').matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]!);
    const top = commandsIn(await help());
    const missing: string[] = [];
    const subsOf = new Map<string, string[]>();
    for (const { command, sub } of uses) {
      if (!top.includes(command)) {
        missing.push(command);
        continue;
      }
      if (!subsOf.has(command))
        subsOf.set(
          command,
          commandsIn(await help(command)).filter((c) => c !== 'help'),
        );
      const subs = subsOf.get(command)!;
      // A command without subcommands takes arguments there (`agents chat scribe`).
      if (sub !== undefined && subs.length > 0 && !subs.includes(sub)) missing.push(`${command} ${sub}`);
    }
    expect([...new Set(missing)]).toEqual([]);
  }, 180_000);

  test('every relative link between the README and docs/ names a file that exists, and an anchor that its headings make', () => {
    expect(brokenLinks(documentFiles())).toEqual([]);
  });

  test('the link check bites: a missing file and a missing anchor are reported, a good link is not', () => {
    const probe = path.relative(ROOT, path.join(OUT, 'links-probe.md'));
    writeFileSync(
      path.join(ROOT, probe),
      [
        '# Probe',
        '[good](../../README.md#two-commands) [no file](no-such-page.md) [no anchor](../../README.md#no-such-heading) [here](#probe)',
        '',
      ].join('\n'),
    );
    expect(brokenLinks([probe])).toEqual([
      `${probe}:2: no-such-page.md (no such file)`,
      `${probe}:2: ../../README.md#no-such-heading (no heading makes #no-such-heading)`,
    ]);
    expect(githubSlug('The loop: `npm run bench:loop`')).toBe('the-loop-npm-run-benchloop');
  });

  test("every table is whole: each row has its header's cells, and no paragraph line runs into it", () => {
    expect(tableProblems(documentFiles())).toEqual([]);
  });

  test('the table check bites: a row with a cell too few, a missing delimiter row, a paragraph line inside', () => {
    const probe = path.relative(ROOT, path.join(OUT, 'tables-probe.md'));
    writeFileSync(
      path.join(ROOT, probe),
      [
        '| a | b |',
        '| - | - |',
        '| `x \\| y` | 2 |',
        '| only one |',
        'a paragraph line that runs into the table',
        '',
        '| no delimiter |',
        '| row |',
        '',
      ].join('\n'),
    );
    expect(tableProblems([probe])).toEqual([
      `${probe}:4: a row of 1 cell(s) in a table of 2 columns`,
      `${probe}:5: a paragraph line inside a table (leave a blank line after the table)`,
      `${probe}:7: a table without a delimiter row (| --- | --- |) under its header`,
    ]);
  });

  test("the /mcp page's tool count and tool table are the endpoint's tools, and so is its OpenAPI description", () => {
    const source = readFileSync(path.join(ROOT, 'api/mcp-server.ts'), 'utf8');
    const tools = [...source.matchAll(/\n {2}tool\(\n {4}'([a-z_]+)',/g)].map((m) => m[1]!);
    expect(tools.length).toBeGreaterThan(5);
    const page = 'docs/web-and-mcp-server.md';
    const text = prose(page);
    const counts = text.flatMap((line, i) =>
      [...line.matchAll(/\b(\d+) tools\b/g)].map((m) => `${page}:${i + 1}: ${m[1]} tools`),
    );
    expect(counts.length).toBeGreaterThan(0);
    expect(counts.filter((c) => !c.endsWith(`: ${tools.length} tools`))).toEqual([]);
    const tableTools = text.flatMap((line) => /^\| `([a-z_]+)` +\| (read|service|operator) /.exec(line)?.[1] ?? []);
    expect(tableTools.sort()).toEqual([...tools].sort());
    const described = /Tools: ([a-z_, ]+)\./.exec(source)?.[1]?.split(', ');
    expect(described?.sort()).toEqual([...tools].sort());
  });

  test('every project path the docs name in backticks exists (a moved file must take its docs along)', () => {
    const missing = documentFiles().flatMap((file) =>
      readFileSync(path.join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((text, i) =>
          [...text.matchAll(PROJECT_PATH)]
            .map((m) => m[1]!.replace(/[.,:;)]+$/, ''))
            .filter((named) => !/[{<*…]/.test(named) && !existsSync(path.join(ROOT, named)))
            .map((named) => `${file}:${i + 1}: ${named}`),
        ),
    );
    expect(missing).toEqual([]);
  });
});

/**
 * Pages other helpers write in their own branches, linked from the README before they are merged. The
 * lead empties this list once those branches are in; until then a link to them is not checked.
 */
const PENDING_DOCS: string[] = [];

/** A backticked path that starts at one of the project's top-level folders. */
const PROJECT_PATH =
  /`((?:activities|workflows|prompts|client|api|worker|schema|test|bench|scripts|deploy|examples|docs)\/[^`\s]*)`/g;

/** Each relative link of these files that names no file, or an anchor no heading of its target makes. */
function brokenLinks(files: string[]): string[] {
  return files.flatMap((file) =>
    linksOf(file)
      .filter(({ target }) => !/^[a-z][\w+.-]*:/i.test(target))
      .flatMap(({ line, target }) => {
        const [pathPart = '', anchor] = target.split('#', 2);
        const resolved =
          pathPart === '' ? file : path.normalize(path.join(path.dirname(file), decodeURIComponent(pathPart)));
        if (PENDING_DOCS.includes(resolved.split(path.sep).join('/'))) return [];
        if (!existsSync(path.join(ROOT, resolved))) return [`${file}:${line}: ${target} (no such file)`];
        if (anchor === undefined || anchor === '') return [];
        if (!resolved.endsWith('.md'))
          return [`${file}:${line}: ${target} (an anchor into a file that is not Markdown)`];
        return anchorsOf(resolved).has(anchor) ? [] : [`${file}:${line}: ${target} (no heading makes #${anchor})`];
      }),
  );
}

/** The cells of a table row: split at each `|` not escaped as `\\|` (GFM splits inside code spans too). */
function cellCount(row: string): number {
  return row
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/).length;
}

/**
 * Tables that do not render as written: a row whose cell count is not its header's, a header without
 * the delimiter row under it, and a paragraph line right after a row (GFM makes it a row of the table).
 */
function tableProblems(files: string[]): string[] {
  return files.flatMap((file) => {
    const lines = prose(file);
    const problems: string[] = [];
    let columns: number | undefined;
    lines.forEach((line, i) => {
      const where = `${file}:${i + 1}`;
      if (!line.startsWith('|')) {
        if (columns !== undefined && line.trim() !== '')
          problems.push(`${where}: a paragraph line inside a table (leave a blank line after the table)`);
        columns = undefined;
        return;
      }
      if (columns === undefined) {
        columns = cellCount(line);
        if (!/^\|(\s*:?-+:?\s*\|)+\s*$/.test(lines[i + 1] ?? ''))
          problems.push(`${where}: a table without a delimiter row (| --- | --- |) under its header`);
        return;
      }
      if (cellCount(line) !== columns)
        problems.push(`${where}: a row of ${cellCount(line)} cell(s) in a table of ${columns} columns`);
    });
    return problems;
  });
}

/** The text of a Markdown file with its fenced blocks blanked (lines kept, so line numbers stay right). */
function prose(file: string): string[] {
  let fenced = false;
  return readFileSync(path.join(ROOT, file), 'utf8')
    .split('\n')
    .map((line) => {
      if (line.startsWith('```')) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    });
}

/** Inline links and images `[text](target)`, outside fenced blocks and inline code. */
function linksOf(file: string): { line: number; target: string }[] {
  return prose(file).flatMap((text, i) =>
    [...text.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => ({
      line: i + 1,
      target: m[1]!,
    })),
  );
}

/** The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens. */
function githubSlug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a file's headings make, with GitHub's -1, -2 … for repeated headings. */
function anchorsOf(file: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of prose(file)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = githubSlug(heading[1]!);
    const count = seen.get(slug) ?? 0;
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
    seen.set(slug, count + 1);
  }
  return anchors;
}
