/**
 * The error model (docs/development.md, "Errors"): every neutral kind has its answer in each
 * table, and the build fails on a table that misses one; the answers are the statuses, headers
 * and bodies clients always got; the one handler factory serves the default shape and another
 * one (OCI-like; the real one, oci/handlers/answers.ts, is driven by the OCI suites); and the
 * lint refuses telling errors apart by name.
 */
import { join } from 'node:path';
import { ESLint } from 'eslint';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerNeutral, type NeutralAnswers } from '../../registry/src/ecosystem/answers.js';
import { errorHandler } from '../../registry/src/ecosystem/error-handler.js';
import { JSON_ANSWERS, jsonErrors } from '../../registry/src/ecosystem/json-answers.js';
import { NEUTRAL_KINDS, UPSTREAM_FAILURE_KINDS, type NeutralKind, type UpstreamFailureKind } from '../../registry/src/errors/neutral.js';
import { HttpError } from '../../registry/src/http/errors.js';
import { SlotsBusyError } from '../../registry/src/limits/slots.js';
import { OCI_ANSWERS } from '../../registry/src/oci/handlers/answers.js';
import { ERROR_STATUS } from '../../registry/src/oci/model/errors.js';
import type { PolicyDenial } from '../../registry/src/policy/denial.js';
import { PolicyDenialError } from '../../registry/src/policy/denial.js';
import { PYTHON_ANSWERS } from '../../registry/src/python/handlers/answers.js';
import { CachedBytesLostError, NotFoundError } from '../../registry/src/roles/errors.js';
import { UpstreamError } from '../../registry/src/roles/upstream-error.js';
import { ScratchBusyError, ScratchTooLargeError } from '../../registry/src/storage/scratch-budget.js';
import { StoreUnavailableError } from '../../registry/src/storage/types.js';
import { REPO } from '../support/paths.js';

const DENIAL: PolicyDenial = { action: 'serve', project: 'evil-pkg', rule: 'deny-projects', field: 'project', reason: 'project "evil-pkg" is denied on this index' };

/** One error of every kind, as the core raises them. */
function errorOf(kind: NeutralKind): Error {
  switch (kind) {
    case 'slots_busy':
      return new SlotsBusyError('the upstream is busy: no upstream fetch slot freed in time', 7);
    case 'store_unavailable':
      return new StoreUnavailableError('object store http://127.0.0.1:9000 failed while reading: ECONNREFUSED');
    case 'cached_bytes_lost':
      return new CachedBytesLostError();
    case 'policy_denied':
      return new PolicyDenialError(DENIAL);
    case 'not_found':
      return new NotFoundError('demo-1.0-py3-none-any.whl has no .dist-info/METADATA');
    case 'scratch_too_large':
      return new ScratchTooLargeError(3 * 1024 ** 3, 2 * 1024 ** 3);
    case 'scratch_busy':
      return new ScratchBusyError(1024 ** 3, 512 * 1024 ** 2, 2 * 1024 ** 3, 10);
    default:
      return new UpstreamError(kind as UpstreamFailureKind, 'https://upstream.example/simple/demo/', `failed (${kind})`, kind === 'status' ? { status: 503 } : {});
  }
}

describe('the tables of the neutral kinds', () => {
  it('answer every kind, in the default shape and in Python', () => {
    for (const table of [JSON_ANSWERS, PYTHON_ANSWERS] as NeutralAnswers<{ status: number }>[]) {
      expect(Object.keys(table).sort()).toEqual([...NEUTRAL_KINDS].sort());
      for (const kind of NEUTRAL_KINDS) expect(answerNeutral(table, errorOf(kind))?.status).toBeGreaterThanOrEqual(400);
    }
  });

  it('do not compile without an answer for every kind', () => {
    const { gone: _gone, ...withoutGone } = JSON_ANSWERS;
    // @ts-expect-error -- `gone` has no answer: a table must answer every neutral kind.
    const partial: NeutralAnswers<HttpError> = withoutGone;
    expect(Object.keys(partial)).not.toContain('gone');
  });

  it('answer as clients were always answered', () => {
    const answer = (kind: NeutralKind) => answerNeutral(JSON_ANSWERS, errorOf(kind))!;
    for (const kind of UPSTREAM_FAILURE_KINDS) {
      const expected = kind === 'gone' ? 404 : 502;
      expect(answer(kind), kind).toMatchObject({ status: expected, message: errorOf(kind).message, headers: {} });
    }
    expect(answer('slots_busy')).toMatchObject({ status: 429, headers: { 'Retry-After': '7' } });
    // The store's endpoint and error code stay in the server's log.
    expect(answer('store_unavailable')).toMatchObject({ status: 503, message: 'the storage backend is not answering; retry later', headers: { 'Retry-After': '5' } });
    expect(answer('cached_bytes_lost').status).toBe(502);
    expect(answer('policy_denied')).toMatchObject({ status: 403, body: DENIAL });
    expect(answer('not_found')).toMatchObject({ status: 404, message: 'demo-1.0-py3-none-any.whl has no .dist-info/METADATA' });
    // The scratch budget: too large for the whole limit (no retry helps), or busy now (retry).
    expect(answer('scratch_too_large')).toMatchObject({ status: 413, message: expect.stringContaining('more than its whole limit of 2.0 GiB') });
    expect(answer('scratch_busy')).toMatchObject({ status: 503, headers: { 'Retry-After': '10' }, message: expect.stringContaining('retry in 10 s') });
    expect(answerNeutral(PYTHON_ANSWERS, errorOf('scratch_too_large'))).toMatchObject({ status: 413, reasonPhrase: expect.stringContaining('scratch_limit') });
    // Python's differs only by the denial's reason in the status line (pip and twine print it).
    expect(answerNeutral(PYTHON_ANSWERS, errorOf('policy_denied'))).toMatchObject({ status: 403, body: DENIAL, reasonPhrase: DENIAL.reason });
    for (const kind of NEUTRAL_KINDS.filter((k) => k !== 'policy_denied')) {
      const { status, message, headers } = answer(kind);
      expect(answerNeutral(PYTHON_ANSWERS, errorOf(kind)), kind).toMatchObject({ status, message, headers });
    }
  });

  it('answer every kind on /v2/ in the distribution-spec codes it always answered', () => {
    expect(Object.keys(OCI_ANSWERS).sort()).toEqual([...NEUTRAL_KINDS].sort());
    const answer = (kind: NeutralKind) => answerNeutral(OCI_ANSWERS, errorOf(kind))!;
    for (const kind of UPSTREAM_FAILURE_KINDS) {
      const expected = kind === 'gone' ? { status: 404, code: 'NOT_FOUND' } : { status: 502, code: 'UNKNOWN' };
      expect(answer(kind), kind).toMatchObject({ ...expected, message: errorOf(kind).message, headers: {} });
    }
    expect(answer('slots_busy')).toMatchObject({ status: 429, code: 'TOOMANYREQUESTS', headers: { 'Retry-After': '7' } });
    expect(answer('store_unavailable')).toMatchObject({ status: 503, code: 'UNAVAILABLE', message: 'the storage backend is not answering; retry later', headers: { 'Retry-After': '5' } });
    expect(answer('cached_bytes_lost')).toMatchObject({ status: 502, code: 'UNKNOWN' });
    expect(answer('policy_denied')).toMatchObject({ status: 403, code: 'DENIED', message: DENIAL.reason, detail: DENIAL });
    expect(answer('not_found')).toMatchObject({ status: 404, code: 'NOT_FOUND', message: 'demo-1.0-py3-none-any.whl has no .dist-info/METADATA' });
    expect(answer('scratch_too_large')).toMatchObject({ status: 413, code: 'SIZE_INVALID' });
    expect(answer('scratch_busy')).toMatchObject({ status: 503, code: 'UNAVAILABLE', headers: { 'Retry-After': '10' } });
    // Every status is the one the spec's table binds to the code, where the spec has the code.
    for (const kind of NEUTRAL_KINDS) {
      const { status, code } = answer(kind);
      if (code in ERROR_STATUS) expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], kind).toBe(status);
    }
  });

  it('leave everything else to the handler', () => {
    expect(answerNeutral(JSON_ANSWERS, new Error('boom'))).toBeUndefined();
    expect(answerNeutral(JSON_ANSWERS, new HttpError(400, 'bad'))).toBeUndefined();
    expect(answerNeutral(JSON_ANSWERS, 'not an error')).toBeUndefined();
  });
});

describe('the error-handler factory', () => {
  let app: FastifyInstance;
  /** The requests the step before an answer ran for (every error answer: OCI settles an unread body there). */
  const refusedBeforeBody: string[] = [];

  /** Each route throws what its path names. */
  const failures: Record<string, () => unknown> = {
    http: () => new HttpError(409, 'already there', { 'X-Why': 'conflict' }),
    busy: () => errorOf('slots_busy'),
    denied: () => errorOf('policy_denied'),
    gone: () => errorOf('gone'),
    bug: () => new Error('a secret detail of the bug'),
    fastify: () => Object.assign(new Error('Body cannot be empty when content-type is set'), { statusCode: 400 }),
  };

  beforeAll(async () => {
    app = Fastify({ logger: false });
    app.setErrorHandler(errorHandler(jsonErrors(PYTHON_ANSWERS)));
    // A shape like OCI's: its own error body, its own unanswered codes, a step before refusals.
    await app.register(async (scope) => {
      scope.setErrorHandler(
        errorHandler<{ status: number; code: string; message: string }>({
          own: () => undefined,
          neutral: Object.fromEntries(NEUTRAL_KINDS.map((k) => [k, (err: Error) => ({ status: k === 'slots_busy' ? 429 : 502, code: k === 'slots_busy' ? 'TOOMANYREQUESTS' : 'UNKNOWN', message: err.message })])) as unknown as NeutralAnswers<{ status: number; code: string; message: string }>,
          send: (reply, a) => reply.code(a.status).type('application/json').send(JSON.stringify({ errors: [{ code: a.code, message: a.message }] })),
          unanswered: (status, message) => JSON.stringify({ errors: [{ code: status >= 500 ? 'INTERNAL_ERROR' : 'REQUEST_INVALID', message }] }),
          beforeAnswer: async (request) => {
            refusedBeforeBody.push(request.url);
          },
          logLine: 'OCI request failed',
        }),
      );
      scope.get('/v2/:what', async (request) => {
        throw failures[(request.params as { what: string }).what]!();
      });
    });
    app.get('/:what', async (request) => {
      throw failures[(request.params as { what: string }).what]!();
    });
  });

  afterAll(async () => {
    await app?.close();
  });

  it('answers in the default shape, with the table of the neutral kinds', async () => {
    const http = await app.inject({ url: '/http' });
    expect(http.statusCode).toBe(409);
    expect(http.headers['x-why']).toBe('conflict');
    expect(http.json()).toEqual({ statusCode: 409, error: 'Conflict', message: 'already there' });

    const busy = await app.inject({ url: '/busy' });
    expect(busy.statusCode).toBe(429);
    expect(busy.headers['retry-after']).toBe('7');

    const denied = await app.inject({ url: '/denied' });
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toEqual(DENIAL);
    expect(denied.statusMessage).toBe(DENIAL.reason);

    expect((await app.inject({ url: '/gone' })).statusCode).toBe(404);

    const bug = await app.inject({ url: '/bug' });
    expect(bug.statusCode).toBe(500);
    expect(bug.json().message).toMatch(/^internal error \(request id .+\)$/);
    expect(bug.body).not.toContain('secret detail');

    const fastify = await app.inject({ url: '/fastify' });
    expect(fastify.statusCode).toBe(400);
    expect(fastify.json()).toEqual({ statusCode: 400, error: 'Bad Request', message: 'Body cannot be empty when content-type is set' });
  });

  it('answers in another shape with its own table, body and step before a refusal', async () => {
    const busy = await app.inject({ url: '/v2/busy' });
    expect(busy.statusCode).toBe(429);
    expect(busy.json()).toEqual({ errors: [{ code: 'TOOMANYREQUESTS', message: errorOf('slots_busy').message }] });
    const bug = await app.inject({ url: '/v2/bug' });
    expect(bug.statusCode).toBe(500);
    expect(bug.json().errors[0].code).toBe('INTERNAL_ERROR');
    const fastify = await app.inject({ url: '/v2/fastify' });
    expect(fastify.json()).toEqual({ errors: [{ code: 'REQUEST_INVALID', message: 'Body cannot be empty when content-type is set' }] });
    // The step ran before each answer, a table's or not.
    expect(refusedBeforeBody).toEqual(['/v2/busy', '/v2/bug', '/v2/fastify']);
  });
});

describe('telling errors apart', () => {
  let eslint: ESLint;
  beforeAll(() => {
    eslint = new ESLint({ cwd: REPO });
  });

  async function problems(file: string, text: string): Promise<string[]> {
    const [result] = await eslint.lintText(text, { filePath: join(REPO, 'registry', 'src', file) });
    return (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-syntax' || m.fatal).map((m) => m.message);
  }

  it('by name is refused in registry/src, either way round', async () => {
    const text = [
      'export const a = (err: Error): boolean => err.name === "UpstreamError";',
      'export const b = (err: Error): boolean => "TokenError" !== err.name;',
      'export const c = (err: Error): boolean => err.name == "SomeFailure";',
      '',
    ].join('\n');
    const found = await problems('roles/probe.ts', text);
    expect(found).toHaveLength(3);
    for (const message of found) expect(message).toContain('not by name');
  });

  it('by class and kind, and names that are not error names, are fine', async () => {
    const text = [
      'import { UpstreamError } from "./upstream-error.js";',
      'export const a = (err: unknown): boolean => err instanceof UpstreamError && err.kind === "refused";',
      'export const b = (index: { name: string }): boolean => index.name === "pypi";',
      '',
    ].join('\n');
    expect(await problems('roles/probe.ts', text)).toEqual([]);
  });
});
