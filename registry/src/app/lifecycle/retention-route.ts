/**
 * `POST /+admin/retention`: a retention run on demand (`?dry_run=1`: the plan only, nothing
 * changed), answered with the report as JSON. An admin action: only a request that carries the
 * `[admin] token`, and refused while none is set (access/admin-auth.ts `requireForAction`).
 * A real run while another process's run holds the lease answers 409.
 */
import type { FastifyInstance } from 'fastify';
import type { AdminGate } from '../../access/admin-auth.js';
import { HttpError } from '../../http/errors.js';
import type { RetentionRunner } from '../../lifecycle/retention.js';
import { dryRunOf } from './admin-action.js';

export interface RetentionRouteOptions {
  runner: RetentionRunner;
  admin: AdminGate;
}

export async function retentionRoute(app: FastifyInstance, opts: RetentionRouteOptions): Promise<void> {
  app.post('/+admin/retention', async (request, reply) => {
    opts.admin.requireForAction(request);
    const dryRun = dryRunOf(request);
    const report = await opts.runner.run({ dryRun, trigger: 'admin' });
    if (report === 'busy') throw new HttpError(409, 'a retention run is under way in another process; try again once it has finished');
    return reply.header('cache-control', 'no-store').type('application/json').send(report);
  });
}
