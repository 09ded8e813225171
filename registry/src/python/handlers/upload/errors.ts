/**
 * How the upload path refuses a request. Every refusal is an `HttpError`, except a policy denial
 * (`PolicyDenialError`), which Python's table (../answers.ts) answers with the spec's denial
 * object; both reach the client through Python's error handler.
 */
import { badArtifact } from '../../model/errors.js';

/** A malformed upload: 400 with a message that says what is wrong (as for any bad artifact). */
export const badUpload = badArtifact;

// The denial object and its error are shared by every policy check (src/policy/).
export { PolicyDenialError, type PolicyDenial } from '../../../policy/denial.js';

const MAX_REASON = 300;

/**
 * The message as an HTTP reason phrase: `twine` prints the reason phrase, not the body, so the
 * person at the terminal sees why. A reason phrase is one line of visible ASCII, and we keep it
 * short.
 */
export function reasonPhraseOf(message: string): string {
  let text = message.replace(/\s+/g, ' ').replace(/[^\x20-\x7e]/g, '?').trim();
  if (text.length > MAX_REASON) text = `${text.slice(0, MAX_REASON - 3)}...`;
  return text === '' ? 'Bad Request' : text;
}
