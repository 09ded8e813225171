/**
 * A configuration problem a person can fix: `where` names the key (and index), `fix` says how.
 * `index` is the name of the `[[index]]` the problem is in, when it is in one, as data: a program
 * that writes configs (the operator) refuses that index and serves the others without reading
 * the message.
 */
export class ConfigError extends Error {
  constructor(
    readonly where: string,
    readonly problem: string,
    readonly fix?: string,
    readonly index?: string,
  ) {
    super(`config: ${where}: ${problem}${fix ? ` (fix: ${fix})` : ''}`);
    this.name = 'ConfigError';
  }

  /** The same problem, marked as being in index `name` (a mark already there is kept). */
  inIndex(name: string): ConfigError {
    return this.index !== undefined ? this : new ConfigError(this.where, this.problem, this.fix, name);
  }
}
