import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';

/**
 * No module of `activities/` or `workflows/` may reach itself through its imports. A cycle makes the
 * load order decide which binding is still `undefined` (and the workflow bundle's order differs from
 * Node's), and it is where a move of one file silently drags three others with it. Type-only imports
 * count too: they are how a cycle starts before a value import closes it.
 */
const ROOT = path.resolve(__dirname, '../..');
const SCANNED_FOLDERS = ['activities', 'workflows', 'prompts'];

function sourceFiles(folder: string): string[] {
  return fs
    .readdirSync(folder, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

/** The scanned file a relative specifier names (`./x` → `x.ts` or `x/index.ts`), if any. */
function resolveRelative(from: string, specifier: string, known: Set<string>): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), specifier.replace(/\.js$/, ''));
  return [`${base}.ts`, path.join(base, 'index.ts')].find((candidate) => known.has(candidate));
}

/** Every static import and re-export of a file, value and type alike (the compiler's own pre-parser). */
export function importGraph(files: string[]): Map<string, string[]> {
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const { importedFiles } = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((imported) => resolveRelative(file, imported.fileName, known))
      .filter((target): target is string => target !== undefined);
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
export function importCycles(graph: Map<string, string[]>): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    if (component.length > 1 || (graph.get(node) ?? []).includes(node)) cycles.push(component.sort());
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return cycles;
}

describe('import cycles among activities/ and workflows/', () => {
  test('the detector finds a cycle, including one closed by a type-only import (control)', () => {
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'cycles-'));
    fs.writeFileSync(path.join(folder, 'a.ts'), "import { b } from './b';\nexport const a = b;\n");
    fs.writeFileSync(path.join(folder, 'b.ts'), "import type { C } from './c/index';\nexport const b = 1 as C;\n");
    fs.mkdirSync(path.join(folder, 'c'));
    fs.writeFileSync(path.join(folder, 'c', 'index.ts'), "export type { A as C } from '../a';\n");
    fs.writeFileSync(path.join(folder, 'd.ts'), "import { a } from './a';\nexport const d = a;\n");
    const cycles = importCycles(importGraph(sourceFiles(folder))).map((cycle) =>
      cycle.map((file) => path.relative(folder, file)),
    );
    fs.rmSync(folder, { recursive: true, force: true });
    expect(cycles).toEqual([['a.ts', 'b.ts', path.join('c', 'index.ts')]]);
  });

  test('there are none', () => {
    const files = SCANNED_FOLDERS.flatMap((folder) => sourceFiles(path.join(ROOT, folder)));
    expect(files.length).toBeGreaterThan(100);
    const cycles = importCycles(importGraph(files)).map((cycle) => cycle.map((file) => path.relative(ROOT, file)));
    expect(cycles).toEqual([]);
  });
});
