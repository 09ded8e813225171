/** A configuration problem a person can fix: `where` names the key (and index), `fix` says how. */
export class ConfigError extends Error {
  constructor(
    readonly where: string,
    readonly problem: string,
    readonly fix?: string,
  ) {
    super(`config: ${where}: ${problem}${fix ? ` (fix: ${fix})` : ''}`);
    this.name = 'ConfigError';
  }
}
