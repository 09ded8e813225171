/**
 * The default shape's answer to a neutral failure as an `HttpError`: `JSON_ANSWERS` looked up.
 *
 * @deprecated oci/handlers/answers.ts (`ociAnswerOf`) still starts from it; the OCI conversion of issue 24
 * gives `/v2/` a table of its own (`NeutralAnswers<OciAnswer>`) and this file goes.
 */
import type { HttpError } from '../http/errors.js';
import { answerNeutral } from './answers.js';
import { JSON_ANSWERS } from './json-answers.js';

export function neutralAnswer(err: unknown): HttpError | undefined {
  return answerNeutral(JSON_ANSWERS, err);
}
