/**
 * A credential read from the config (inline, `_env` or `_file`). The value is reachable only
 * through `reveal()`; every way an object is usually printed (JSON, string, util.inspect, pino)
 * yields a redaction marker, so a Secret that ends up in a log line or a response leaks nothing.
 */
const REDACTED = '[redacted]';

export class Secret {
  readonly #value: string;
  /** Where the value came from, for messages: `inline`, `env:NAME` or `file:/path`. */
  readonly source: string;

  constructor(value: string, source: string) {
    this.#value = value;
    this.source = source;
  }

  reveal(): string {
    return this.#value;
  }

  toJSON(): string {
    return REDACTED;
  }

  toString(): string {
    return REDACTED;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return REDACTED;
  }
}
