/**
 * The error handler of the server's own routes (`/+status`, `/+api`, the UI, ...) and of the
 * index namespace where no ecosystem answers: the handler factory (ecosystem/error-handler.ts)
 * with the default shape and its table (ecosystem/json-answers.ts). An ecosystem answers under
 * its index routes with its own (`Ecosystem.answerError`); `/v2/` has its own (oci/handlers/routes.ts).
 */
import { errorHandler } from '../ecosystem/error-handler.js';
import { JSON_ANSWERS, jsonErrors } from '../ecosystem/json-answers.js';

export const answerError = errorHandler(jsonErrors(JSON_ANSWERS));
