import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Every sentence the runtime itself says to a model lives in `prompts/`: the system prompt's fixed
 * sections, the task loop's messages, the conversation wrappers, the memory and cognitive prompts.
 * (Tool descriptions stay with their tools; section headings and data stay with the builders that
 * fill them.) These checks keep it so: a new harness message written elsewhere fails here, and the
 * workflow bundle, which imports prompt text, reaches no activity code through it.
 */
const ROOT = path.resolve(__dirname, '../..');
const CODE_FOLDERS = ['activities', 'workflows', 'api', 'worker', 'client'];
/** How the runtime's own messages to the model begin: `[TASK EXECUTION …`, `[SYSTEM REMINDER …`, `[GROUP …`. */
const HARNESS_MESSAGE = /^\[[A-Z][A-Z-]{2,}(?:[ —:·\]]|$)/;
/** Markers that are not messages to a model: redaction placeholders. */
const NOT_A_PROMPT = /^\[REDACTED/;

function tsFiles(folder: string): string[] {
  return fs
    .readdirSync(path.join(ROOT, folder), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.join(e.parentPath, e.name));
}

/** The text at the start of every string and template literal in a file. */
function literalStarts(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) out.push(node.text);
    else if (ts.isTemplateExpression(node)) out.push(node.head.text);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Files a file imports by value (type-only imports and re-exports left out), resolved relatively. */
function valueImports(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  for (const st of source.statements) {
    let specifier: string | undefined;
    if (ts.isImportDeclaration(st) && !st.importClause?.isTypeOnly) {
      const bindings = st.importClause?.namedBindings;
      const allTypes =
        bindings !== undefined &&
        ts.isNamedImports(bindings) &&
        bindings.elements.length > 0 &&
        bindings.elements.every((e) => e.isTypeOnly) &&
        st.importClause?.name === undefined;
      if (!allTypes) specifier = (st.moduleSpecifier as ts.StringLiteral).text;
    } else if (ts.isExportDeclaration(st) && !st.isTypeOnly && st.moduleSpecifier) {
      specifier = (st.moduleSpecifier as ts.StringLiteral).text;
    }
    if (!specifier?.startsWith('.')) continue;
    const base = path.resolve(path.dirname(file), specifier);
    const hit = [`${base}.ts`, path.join(base, 'index.ts')].find((f) => fs.existsSync(f));
    if (hit) out.push(hit);
  }
  return out;
}

describe('prompt text has one home', () => {
  test('the detector sees a harness message in a template literal (control)', () => {
    const file = path.join(ROOT, '.data', 'prompts-home-control.ts');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, 'export const f = (n: number) => `[SYSTEM NOTICE] ${n} calls left`;\n');
    const starts = literalStarts(file);
    fs.rmSync(file);
    expect(starts.filter((s) => HARNESS_MESSAGE.test(s))).toEqual(['[SYSTEM NOTICE] ']);
  });

  test('no harness message is written outside prompts/', () => {
    const offenders = CODE_FOLDERS.flatMap(tsFiles).flatMap((file) =>
      literalStarts(file)
        .filter((s) => HARNESS_MESSAGE.test(s) && !NOT_A_PROMPT.test(s))
        .map((s) => `${path.relative(ROOT, file)}: ${s.slice(0, 40)}`),
    );
    expect(offenders).toEqual([]);
    // And prompts/ does hold them (the detector is not blind).
    const inPrompts = tsFiles('prompts').flatMap((f) => literalStarts(f).filter((s) => HARNESS_MESSAGE.test(s)));
    expect(inPrompts.length).toBeGreaterThanOrEqual(10);
  });

  test('the workflow bundle reaches no activity code through the prompt modules', () => {
    const seen = new Set<string>();
    const queue = tsFiles('workflows');
    while (queue.length > 0) {
      const file = queue.pop()!;
      if (seen.has(file)) continue;
      seen.add(file);
      queue.push(...valueImports(file));
    }
    const reached = [...seen].map((f) => path.relative(ROOT, f));
    expect(reached.filter((f) => f.startsWith('prompts/')).length).toBeGreaterThanOrEqual(2);
    expect(reached.filter((f) => f.startsWith('activities/'))).toEqual([]);
  });
});
