/**
 * The worker's endpoints for an orchestrator (`HEALTH_PORT`, default off): `/healthz` answers 200 while
 * the process serves at all (restart it when this stops answering), `/readyz` 200 only while PostgreSQL
 * and Temporal are up and a worker is polling, 503 otherwise (during start-up, an outage, or the drain
 * after SIGTERM), with the dependency states as JSON either way.
 */
import { createServer, type Server } from 'node:http';
import type { HealthSnapshot } from './health';

export interface WorkerHealthSource {
  snapshot(): HealthSnapshot;
  /** A worker is polling the task queue (false before the first starts, between restarts and while draining). */
  polling(): boolean;
}

export async function serveWorkerHealth(source: WorkerHealthSource, port: number, host = '0.0.0.0'): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const send = (status: number, body: unknown) =>
      res
        .writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' })
        .end(JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return send(405, { error: { code: 'method_not_allowed', message: 'GET only' } });
    if (path === '/healthz') return send(200, { status: 'ok' });
    if (path === '/readyz') {
      const snapshot = source.snapshot();
      const ready = snapshot.status === 'ok' && source.polling();
      return send(ready ? 200 : 503, { ready, polling: source.polling(), ...snapshot });
    }
    return send(404, { error: { code: 'route_not_found', message: 'this port serves /healthz and /readyz' } });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return server;
}
