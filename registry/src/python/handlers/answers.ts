/**
 * Python's one table of the neutral failures: the server's default JSON answers
 * (ecosystem/json-answers.ts: 502 for an upstream that failed with nothing to serve, 404 for
 * what the upstream or the read layer found gone, 429, 503, the denial object as 403), with a
 * policy denial's reason also in the status line, since pip and twine print the reason phrase,
 * not the body. The read layer throws typed errors; this table alone picks their status.
 */
import type { NeutralAnswers } from '../../ecosystem/answers.js';
import { errorHandler } from '../../ecosystem/error-handler.js';
import { JSON_ANSWERS, jsonErrors, type JsonAnswer } from '../../ecosystem/json-answers.js';
import { reasonPhraseOf } from './upload/errors.js';

export const PYTHON_ANSWERS: NeutralAnswers<JsonAnswer> = {
  ...JSON_ANSWERS,
  policy_denied: (err) => ({ status: 403, message: err.message, headers: {}, body: err.denial, reasonPhrase: reasonPhraseOf(err.message) }),
  scratch_too_large: (err) => withReason(JSON_ANSWERS.scratch_too_large(err)),
  scratch_busy: (err) => withReason(JSON_ANSWERS.scratch_busy(err)),
};

/** The default answer with its message also in the status line. */
function withReason(answer: JsonAnswer): JsonAnswer {
  return { status: answer.status, message: answer.message, headers: answer.headers, reasonPhrase: reasonPhraseOf(answer.message) };
}

/** The error handler of every request under a Python index's route. */
export const answerPythonError = errorHandler(jsonErrors(PYTHON_ANSWERS));
