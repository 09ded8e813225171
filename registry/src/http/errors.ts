/**
 * The error thrown where the HTTP answer is decided on the spot (a bad request path, a route not
 * found, a refusal), and the default error body. The core's neutral failures have no status of
 * their own (errors/neutral.ts): each surface answers them in its table (ecosystem/json-answers.ts
 * for this body shape).
 */

/** An error with an HTTP status and a message meant for the person behind the client. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Extra headers for the response, e.g. `WWW-Authenticate` or `Retry-After`. */
    readonly headers: Record<string, string> = {},
    /** A JSON body to send instead of the default error body (e.g. a policy denial object). */
    readonly body?: object,
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  416: 'Range Not Satisfiable',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

export function reasonPhrase(status: number): string {
  return REASONS[status] ?? 'Error';
}

/** The default error body for non-OCI routes: the shape fastify itself uses. */
export function errorBody(status: number, message: string): { statusCode: number; error: string; message: string } {
  return { statusCode: status, error: reasonPhrase(status), message };
}
