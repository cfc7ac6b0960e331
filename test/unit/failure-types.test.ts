import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { FailureType, LlmFailureType } from '../../workflows/failure-types';

/**
 * Failure types are written once, in `workflows/failure-types.ts`: a thrower, a retry policy or a
 * client that spells one as a string literal drifts the day the registry's value is renamed, and a
 * typo in one is a branch that never matches. This fails on any string literal equal to a registered
 * type outside the registry, and on an `ApplicationFailure` thrown with a literal type.
 */
const ROOT = path.resolve(__dirname, '../..');
const SCANNED_FOLDERS = ['activities', 'workflows', 'client', 'api', 'worker'];
const REGISTRY = path.join('workflows', 'failure-types.ts');
const registered = new Set<string>([...Object.values(FailureType), ...Object.values(LlmFailureType)]);
const APPLICATION_FAILURE_FACTORIES = new Set(['nonRetryable', 'retryable', 'create', 'fromError']);

interface Finding {
  where: string;
  literal: string;
}

export function literalFailureTypes(file: string, source: string): Finding[] {
  const sourceFile = ts.createSourceFile(file, source, ts.ScriptTarget.ES2023, true);
  const findings: Finding[] = [];
  const report = (node: ts.Node, literal: string): void => {
    findings.push({ where: `${file}:${sourceFile.getLineAndCharacterOfPosition(node.getStart()).line + 1}`, literal });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteralLike(node) && registered.has(node.text)) report(node, node.text);
    // ApplicationFailure.nonRetryable(message, 'Type') / .create({ type: 'Type' }): a type not registered at all.
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      node.expression.expression.getText(sourceFile) === 'ApplicationFailure' &&
      APPLICATION_FAILURE_FACTORIES.has(node.expression.name.text)
    ) {
      const [first, second] = node.arguments;
      if (second && ts.isStringLiteralLike(second) && !registered.has(second.text)) report(second, second.text);
      if (first && ts.isObjectLiteralExpression(first)) {
        for (const property of first.properties) {
          if (
            ts.isPropertyAssignment(property) &&
            property.name.getText(sourceFile) === 'type' &&
            ts.isStringLiteralLike(property.initializer) &&
            !registered.has(property.initializer.text)
          ) {
            report(property.initializer, property.initializer.text);
          }
        }
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return findings;
}

describe('the failure-type registry (workflows/failure-types.ts)', () => {
  test('the scanner finds a registered literal and an unregistered thrown type (control)', () => {
    const source =
      "if (e.type === 'UnknownTask') x(); throw ApplicationFailure.nonRetryable('m', 'Brand'); ApplicationFailure.create({ type: 'Other', message: 'm' }); const ok = FailureType.UnknownTask;";
    expect(literalFailureTypes('x.ts', source).map((f) => f.literal)).toEqual(['UnknownTask', 'Brand', 'Other']);
  });

  test('values are unique', () => {
    expect(registered.size).toBe(Object.values(FailureType).length + Object.values(LlmFailureType).length);
  });

  test('no thrower, retry policy or client spells a failure type as a literal', () => {
    const files = SCANNED_FOLDERS.flatMap((folder) =>
      fs
        .readdirSync(path.join(ROOT, folder), { recursive: true, withFileTypes: true })
        .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
        .map((entry) => path.relative(ROOT, path.join(entry.parentPath, entry.name))),
    ).filter((file) => file !== REGISTRY);
    expect(files.length).toBeGreaterThan(100);
    const findings = files.flatMap((file) => literalFailureTypes(file, fs.readFileSync(path.join(ROOT, file), 'utf8')));
    expect(findings.map((f) => `${f.where} '${f.literal}'`)).toEqual([]);
  });
});
