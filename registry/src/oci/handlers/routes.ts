/**
 * Mounts the `/v2/` tree in its own fastify scope, so its error handler answers in the
 * distribution-spec shape instead of the server's default one, and dispatches each request by
 * the action at the end of its path and by method. HEAD is answered wherever GET is (the GET
 * handler runs; node sends no body for HEAD), and a 405 names the methods the route has in `Allow`.
 */
import { authorizeRead } from './read-access.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { allowOf, handlerFor, type Methods } from '../../http/route-table.js';
import { OciError } from '../model/errors.js';
import { answerOciError } from './answers.js';
import { deleteBlob, getBlob } from './blobs.js';
import { listCatalog } from './catalog.js';
import { dropMalformedContentType } from './content-type.js';
import type { OciDeps } from './deps.js';
import type { OciCall, OciExchange } from './exchange.js';
import { layerContents } from './layer-contents.js';
import { deleteManifest, getManifest, putManifest } from './manifests.js';
import { listReferrers } from './referrers.js';
import { listTags } from './tags.js';
import { parseBasic } from '../../access/secrets.js';
import { identifyAnywhere, issueToken } from './token-realm.js';
import { bearerChallenge, realmOf, TOKEN_PATH } from './token/challenge.js';
import { readCredentials, type Credentials } from './token/credentials.js';
import { cancelUpload, commitUpload, patchUpload, startUpload, uploadStatus } from './uploads.js';
import { parseOciUrl, type OciAction } from './url.js';
import { checkMirrored, resolveTarget } from './mirror.js';
import { namespaceOf, type Namespace } from '../model/namespace.js';

export const API_VERSION_HEADER = 'Docker-Distribution-API-Version';

const NO_NAMESPACE: Namespace = { kind: 'none' };

type Handler = (x: OciExchange) => Promise<void>;

interface Route {
  /** What the route is, for the 405 message. */
  what: string;
  methods: Methods<Handler>;
}

/**
 * A handler of a route under `<name>`: the name resolves to its index once the method matched;
 * on a request for a mirrored registry (`?ns=`, mirror.ts) the whole name is a repository of its index.
 */
function named(name: string[], fn: (call: OciCall) => Promise<void>): Handler {
  return (x) => fn({ ...x, target: resolveTarget(x.deps, x.namespace, name) });
}

/** `named`, for a read: a private index's reads need credentials that read it (read-access.ts). */
function namedRead(name: string[], fn: (call: OciCall) => Promise<void>): Handler {
  return named(name, (call) => {
    authorizeRead(call);
    return fn(call);
  });
}

/**
 * The version check is where docker learns how to authenticate: it sends credentials only after
 * this answered 401 with a challenge, so a request without credentials is sent to the token
 * realm (reads stay open on every other route). With a valid token, or Basic credentials whose
 * password is a live credential of a hosted OCI index here, it is the spec's 200.
 */
async function versionCheck(x: OciExchange): Promise<void> {
  const c = x.credentials;
  if (c.kind === 'bearer' || (c.kind === 'basic' && identifyAnywhere(x.deps.ociIndexes, parseBasic(c.header)?.password).kind === 'credential')) {
    await x.reply.code(200).header('Content-Length', '0').send();
    return;
  }
  const message =
    c.kind === 'none'
      ? `authentication required: fetch a bearer token from ${TOKEN_PATH} (anonymous tokens allow pulls; log in with an upload token to push), or send HTTP Basic credentials`
      : 'the password is not the upload token of any hosted OCI index on this registry, nor a live named token of one';
  throw new OciError('UNAUTHORIZED', message, { 'WWW-Authenticate': bearerChallenge(realmOf(x.deps.originOf, x.request)) });
}

function routeOf(action: OciAction): Route {
  switch (action.kind) {
    case 'base':
      return { what: '/v2/', methods: { GET: versionCheck } };
    case 'catalog':
      return { what: 'the catalog', methods: { GET: listCatalog } };
    case 'token':
      return { what: 'the token realm', methods: { GET: issueToken } };
    case 'manifest': {
      const ref = action.reference;
      return {
        what: 'manifests',
        methods: {
          GET: namedRead(action.name, (c) => getManifest(c, ref, false)),
          HEAD: namedRead(action.name, (c) => getManifest(c, ref, true)),
          PUT: named(action.name, (c) => putManifest(c, ref)),
          DELETE: named(action.name, (c) => deleteManifest(c, ref)),
        },
      };
    }
    case 'blob': {
      const digest = action.digest;
      return {
        what: 'blobs',
        methods: {
          GET: namedRead(action.name, (c) => getBlob(c, digest, false)),
          HEAD: namedRead(action.name, (c) => getBlob(c, digest, true)),
          DELETE: named(action.name, (c) => deleteBlob(c, digest)),
        },
      };
    }
    case 'blob-contents':
      return { what: 'layer contents', methods: { GET: namedRead(action.name, (c) => layerContents(c, action.digest)) } };
    case 'upload-start':
      return { what: 'blob uploads', methods: { POST: named(action.name, startUpload) } };
    case 'upload': {
      const id = action.session;
      return {
        what: 'upload sessions',
        methods: {
          GET: named(action.name, (c) => uploadStatus(c, id)),
          PATCH: named(action.name, (c) => patchUpload(c, id)),
          PUT: named(action.name, (c) => commitUpload(c, id)),
          DELETE: named(action.name, (c) => cancelUpload(c, id)),
        },
      };
    }
    case 'tags':
      return { what: 'tag lists', methods: { GET: namedRead(action.name, listTags) } };
    case 'referrers':
      return { what: 'referrers', methods: { GET: namedRead(action.name, (c) => listReferrers(c, action.digest)) } };
  }
}

async function dispatch(deps: OciDeps, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { action, query } = parseOciUrl(request.raw.url ?? '/v2/');
  const route = routeOf(action);
  const handler = handlerFor(route.methods, request.method);
  if (!handler) {
    throw new OciError('UNSUPPORTED', `${request.method} is not supported on ${route.what}`, { Allow: allowOf([route.methods]) });
  }
  // The registry a mirror request is for (mirror.ts); the realm and the catalog are this
  // endpoint's own, whichever registry a client is after. A registry that is not served here is
  // refused before any credential is looked at (`named` resolves the name again, cheaply).
  const namespace = action.kind === 'token' || action.kind === 'catalog' ? NO_NAMESPACE : namespaceOf(query, deps.mirrors.aliases);
  if (namespace.kind !== 'none') {
    if (action.kind === 'base') checkMirrored(deps.mirrors, namespace);
    else if ('name' in action) resolveTarget(deps, namespace, action.name);
  }
  // The realm reads its own (Basic) credentials; everywhere else a bearer token is verified first.
  const credentials: Credentials = action.kind === 'token' ? { kind: 'none' } : await readCredentials(request, deps.tokens, deps.originOf);
  await handler({ deps, query, request, reply, credentials, namespace });
}

export async function registerOciRoutes(app: FastifyInstance, deps: OciDeps): Promise<void> {
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (request, reply) => {
      reply.header(API_VERSION_HEADER, 'registry/2.0');
      dropMalformedContentType(request);
    });
    scope.setErrorHandler(answerOciError);
    const handler = (request: FastifyRequest, reply: FastifyReply) => dispatch(deps, request, reply);
    for (const url of ['/v2', '/v2/', '/v2/*']) scope.all(url, handler);
  });
}
