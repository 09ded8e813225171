/**
 * How the model refuses an artifact it cannot read (a filename, core metadata): a 400 that says
 * what is wrong, whoever met it — an upload, or a cached wheel's metadata read by range.
 */
import { HttpError } from '../../http/errors.js';

export function badArtifact(message: string): HttpError {
  return new HttpError(400, message);
}
