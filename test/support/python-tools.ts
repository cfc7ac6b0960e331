/**
 * Python tools the suite checks the product with (third-party, nobody here wrote them): a venv under
 * `.tools/python` with pinned packages from PyPI, created or brought up to date when missing.
 * `python3` with its `venv` module must be on the machine (it is on every Debian image CI uses).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Pinned so a run is repeatable: the OpenTelemetry protocol's published definitions, compiled for
 * Python by the OpenTelemetry project (the OTLP receiver decodes with them), and the Python Temporal
 * SDK (the Python example of docs/contract.md drives a task with it).
 */
export const PYTHON_TOOL_PACKAGES = ['opentelemetry-proto==1.45.2', 'temporalio==1.35.0'];

const VENV_DIR = path.resolve(__dirname, '../../.tools/python');
const MARKER = path.join(VENV_DIR, 'durable-agents-packages.txt');

/** The venv's python, after installing what is missing (a few seconds the first time, nothing after). */
export function pythonWithTools(): string {
  const python = path.join(VENV_DIR, 'bin', 'python');
  const wanted = PYTHON_TOOL_PACKAGES.join('\n');
  if (existsSync(python) && existsSync(MARKER) && readFileSync(MARKER, 'utf8') === wanted) return python;
  if (!existsSync(python)) execFileSync('python3', ['-m', 'venv', VENV_DIR], { stdio: 'pipe' });
  execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', ...PYTHON_TOOL_PACKAGES], {
    stdio: 'pipe',
    timeout: 300_000,
  });
  writeFileSync(MARKER, wanted);
  return python;
}
