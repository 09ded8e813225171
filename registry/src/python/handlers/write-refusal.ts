/** A refused Python write (access/auth.ts), logged and answered with the spec's status. */
import type { FastifyRequest } from 'fastify';
import { BASIC_CHALLENGE, isCredentialsDenial, noteWriteDenial, type WriteDenial, type WriteRefusal } from '../../access/auth.js';
import type { IndexConfig } from '../../config/types.js';
import { HttpError } from '../../http/errors.js';

const STATUS: Record<WriteDenial, number> = {
  'read-only': 405,
  'uploads-disabled': 403,
  'missing-credentials': 401,
  'wrong-credentials': 401,
  'expired-credentials': 401,
  'insufficient-scope': 403,
};

/** The error that answers `refusal` of a write through `index`, after its security log line. */
export function refusedWrite(request: FastifyRequest, clientAddress: (r: FastifyRequest) => string, index: IndexConfig, refusal: WriteRefusal): HttpError {
  noteWriteDenial(request, clientAddress, index, refusal);
  const headers: Record<string, string> = isCredentialsDenial(refusal.reason) ? { 'www-authenticate': BASIC_CHALLENGE } : {};
  // (`Allow` is set by the dispatcher, which knows the path's routes.)
  return new HttpError(STATUS[refusal.reason], refusal.message, headers);
}
