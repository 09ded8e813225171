/**
 * `POST /+admin/retention`: a retention run on demand (`?dry_run=1`: the plan only, nothing
 * changed), answered with the report as JSON. An admin surface: with `[admin] token` set it
 * answers only a request that carries the token (access/admin-auth.ts), as `details=admin` does.
 * A real run while another process's run holds the lease answers 409.
 */
import type { FastifyInstance } from 'fastify';
import { ADMIN_CHALLENGE, ADMIN_DENIAL_MESSAGES, type AdminGate } from '../../access/admin-auth.js';
import { HttpError } from '../../http/errors.js';
import type { RetentionRunner } from '../../lifecycle/retention.js';

export interface RetentionRouteOptions {
  runner: RetentionRunner;
  admin: AdminGate;
}

const TRUE = new Set(['1', 'true', 'yes']);

export async function retentionRoute(app: FastifyInstance, opts: RetentionRouteOptions): Promise<void> {
  app.post('/+admin/retention', async (request, reply) => {
    const denial = opts.admin.refusal(request);
    if (denial) throw new HttpError(401, ADMIN_DENIAL_MESSAGES[denial], { 'www-authenticate': ADMIN_CHALLENGE, 'cache-control': 'no-store' });
    const query = new URLSearchParams(request.raw.url?.split('?')[1] ?? '');
    const dryRun = TRUE.has((query.get('dry_run') ?? '').toLowerCase());
    const report = await opts.runner.run({ dryRun, trigger: 'admin' });
    if (report === 'busy') throw new HttpError(409, 'a retention run is under way in another process; try again once it has finished');
    return reply.header('cache-control', 'no-store').type('application/json').send(report);
  });
}
