import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { buildApi } from '../../api/server';

const run = promisify(execFile);

/**
 * The published API description, checked by a third-party linter: `redocly lint` with its
 * recommended rules finds no error and no warning. The document is built by the real server (its
 * routes need no database or Temporal to be listed) and fetched without a token, as a client would.
 */
describe('the OpenAPI document', () => {
  let spec: Record<string, any>;
  let url: string;

  beforeAll(async () => {
    const app = await buildApi({ client: {} as never, db: {} as never, workspaceRoot: os.tmpdir() });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const response = await fetch(`${url}/v1/openapi.json`);
      expect(response.status).toBe(200);
      spec = (await response.json()) as Record<string, any>;
    } finally {
      await app.close();
    }
  });

  test('every operation has an operationId, and the servers entry is the API as it was reached', () => {
    const operations = Object.values(spec.paths).flatMap((methods: any) => Object.values(methods)) as Array<{
      operationId?: string;
    }>;
    expect(operations.length).toBeGreaterThanOrEqual(30);
    expect(operations.filter((o) => !o.operationId)).toEqual([]);
    expect(new Set(operations.map((o) => o.operationId)).size).toBe(operations.length);
    expect(spec.servers).toEqual([{ url, description: 'This API' }]);
  });

  test('conflicts, timeouts and the SSE resume header are declared', () => {
    const codes = (op: any) => String(op.responses['409']?.description ?? '');
    expect(codes(spec.paths['/v1/tasks'].post)).toContain('task_exists');
    expect(codes(spec.paths['/v1/tasks/{taskId}/review'].post)).toContain('not_in_review');
    expect(codes(spec.paths['/v1/approvals/{requestId}'].post)).toContain('approval_decided');
    expect(spec.paths['/v1/tasks/{taskId}/cancel'].post.responses['504']).toBeDefined();
    for (const p of [
      '/v1/tasks/{taskId}/events',
      '/v1/tasks/{taskId}/deltas',
      '/v1/agents/{agentId}/chat/{itemId}/stream',
    ]) {
      const get = spec.paths[p].get;
      expect([p, get.parameters.some((x: any) => x.in === 'header' && x.name === 'Last-Event-ID')]).toEqual([p, true]);
      expect([p, Boolean(get.responses['204'])]).toEqual([p, true]);
    }
  });

  test('redocly lint (recommended rules): no error, no warning', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'da-openapi-'));
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(spec, null, 2));
    const redocly = path.resolve(__dirname, '../../node_modules/.bin/redocly');
    const result = await run(redocly, ['lint', '--extends=recommended', '--format=json', file], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    }).catch((error: { stdout?: string; stderr?: string }) => error);
    const report = JSON.parse(result.stdout ?? '{}') as {
      totals?: { errors: number; warnings: number };
      problems?: Array<{ ruleId: string; message: string; location?: Array<{ pointer?: string }> }>;
    };
    const problems = (report.problems ?? []).map(
      (p) => `${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer ?? '?'}`,
    );
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  test('every schema compiles with Ajv in strict mode (JSON Schema 2020-12, standard formats only)', () => {
    // OpenAPI 3.1's schemas are JSON Schema 2020-12; their `$ref`s point into components.schemas,
    // which each schema gets as `$defs` so it compiles on its own.
    const toDefs = (value: unknown): unknown =>
      JSON.parse(JSON.stringify(value).replaceAll('"#/components/schemas/', '"#/$defs/'));
    const $defs = toDefs(spec.components?.schemas ?? {}) as Record<string, unknown>;
    const schemas: Array<[string, unknown]> = Object.entries($defs).map(([name, schema]) => [
      `#/components/schemas/${name}`,
      schema,
    ]);
    const collect = (node: unknown, pointer: string): void => {
      if (Array.isArray(node)) node.forEach((item, i) => collect(item, `${pointer}/${i}`));
      else if (node && typeof node === 'object')
        for (const [key, value] of Object.entries(node)) {
          if (key === 'schema' && value && typeof value === 'object') schemas.push([`${pointer}/schema`, value]);
          else collect(value, `${pointer}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`);
        }
    };
    collect(spec.paths, '#/paths');
    expect(schemas.length).toBeGreaterThan(100);
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    const failures = schemas.flatMap(([pointer, schema]) => {
      try {
        ajv.compile({ ...(toDefs(schema) as object), $defs });
        return [];
      } catch (error) {
        return [`${pointer}: ${(error as Error).message}`];
      }
    });
    expect(failures).toEqual([]);
  });
});
