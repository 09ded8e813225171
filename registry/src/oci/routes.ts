/**
 * Mounts the `/v2/` tree in its own fastify scope, so its error handler answers in the
 * distribution-spec shape instead of the server's default one, and dispatches each request by
 * the action at the end of its path and by method.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BASIC_CHALLENGE } from '../http/auth.js';
import { resolveName } from './access.js';
import { deleteBlob, getBlob } from './blobs.js';
import { dropMalformedContentType, type OciCall, type OciDeps } from './context.js';
import { errorPayload, OciError, OciStatusError, sendError } from './errors.js';
import { layerContents } from './layer-contents.js';
import { deleteManifest, getManifest, putManifest } from './manifests.js';
import { parseOciUrl, type OciAction } from './names.js';
import { listReferrers } from './referrers.js';
import { listTags } from './tags.js';
import { cancelUpload, commitUpload, patchUpload, startUpload, uploadStatus } from './uploads.js';

export const API_VERSION_HEADER = 'Docker-Distribution-API-Version';

function unsupported(method: string, what: string): OciError {
  return new OciError('UNSUPPORTED', `${method} is not supported on ${what}`);
}

async function dispatch(deps: OciDeps, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { action, query } = parseOciUrl(request.raw.url ?? '/v2/');
  const method = request.method;
  if (action.kind === 'base') {
    if (method !== 'GET' && method !== 'HEAD') throw unsupported(method, '/v2/');
    // 200 for everyone (reads are open), but with the Basic challenge: clients built on
    // containers/image (skopeo, podman) send credentials on writes only when the ping named a
    // scheme, and otherwise fail the first push with 401 without retrying.
    await reply.code(200).header('WWW-Authenticate', BASIC_CHALLENGE).send();
    return;
  }
  const call: OciCall = { deps, target: resolveName(deps.ociIndexes, action.name), query, request, reply };
  await route(call, action, method);
}

async function route(call: OciCall, action: Exclude<OciAction, { kind: 'base' }>, method: string): Promise<void> {
  switch (action.kind) {
    case 'manifest':
      if (method === 'GET' || method === 'HEAD') return getManifest(call, action.reference, method === 'HEAD');
      if (method === 'PUT') return putManifest(call, action.reference);
      if (method === 'DELETE') return deleteManifest(call, action.reference);
      throw unsupported(method, 'manifests');
    case 'blob':
      if (method === 'GET' || method === 'HEAD') return getBlob(call, action.digest, method === 'HEAD');
      if (method === 'DELETE') return deleteBlob(call, action.digest);
      throw unsupported(method, 'blobs');
    case 'blob-contents':
      if (method === 'GET') return layerContents(call, action.digest);
      throw unsupported(method, 'layer contents');
    case 'upload-start':
      if (method === 'POST') return startUpload(call);
      throw unsupported(method, 'blob uploads');
    case 'upload':
      if (method === 'PATCH') return patchUpload(call, action.session);
      if (method === 'PUT') return commitUpload(call, action.session);
      if (method === 'GET') return uploadStatus(call, action.session);
      if (method === 'DELETE') return cancelUpload(call, action.session);
      throw unsupported(method, 'upload sessions');
    case 'tags':
      if (method === 'GET') return listTags(call);
      throw unsupported(method, 'tag lists');
    case 'referrers':
      if (method === 'GET') return listReferrers(call, action.digest);
      throw unsupported(method, 'referrers');
  }
}

export async function registerOciRoutes(app: FastifyInstance, deps: OciDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request, reply) => {
      reply.header(API_VERSION_HEADER, 'registry/2.0');
      dropMalformedContentType(request);
    });
    scope.setErrorHandler((err, request, reply) => {
      if (err instanceof OciError || err instanceof OciStatusError) return sendError(reply, err);
      const status = typeof (err as { statusCode?: unknown }).statusCode === 'number' ? (err as { statusCode: number }).statusCode : 500;
      if (status >= 500) {
        request.log.error({ err }, 'OCI request failed');
        // Not UNKNOWN: that code means an upstream failure (502) in the spec's table.
        return reply.code(500).type('application/json').send(errorPayload('INTERNAL_ERROR', `internal error (request id ${request.id})`));
      }
      const message = err instanceof Error ? err.message : 'bad request';
      return reply.code(status).type('application/json').send(errorPayload('REQUEST_INVALID', message));
    });
    const handler = (request: FastifyRequest, reply: FastifyReply) => dispatch(deps, request, reply);
    for (const url of ['/v2', '/v2/', '/v2/*']) scope.all(url, handler);
  });
}
