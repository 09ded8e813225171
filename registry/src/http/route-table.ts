/**
 * The neutral half of every ecosystem's route table: which handler a method reaches, HEAD
 * answered wherever GET is, and the `Allow` of a 405 naming every method the path takes. Each
 * ecosystem keeps its own routes (path grammar, parameters) and its own 405 error shape.
 */

/** The methods routes declare, in the order `Allow` lists them. */
const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type Method = (typeof METHOD_ORDER)[number];
export type Methods<H> = Partial<Record<Method, H>>;

/** The handler `method` reaches in `methods`: its own, or GET's for a HEAD without one. */
export function handlerFor<H>(methods: Methods<H>, method: string): H | undefined {
  const own = (METHOD_ORDER as readonly string[]).includes(method) ? methods[method as Method] : undefined;
  return own ?? (method === 'HEAD' ? methods.GET : undefined);
}

/**
 * The `Allow` value of a path that the routes declaring `tables` match: every method any of them
 * takes (of `only`, when given), HEAD wherever GET is. Empty when none: "disabled by
 * configuration" (RFC 9110 §10.2.1).
 */
export function allowOf<H>(tables: ReadonlyArray<Methods<H>>, only: readonly Method[] = METHOD_ORDER): string {
  const declared = new Set(tables.flatMap((t) => Object.keys(t)));
  if (declared.has('GET')) declared.add('HEAD');
  return METHOD_ORDER.filter((m) => declared.has(m) && (only.includes(m) || (m === 'HEAD' && only.includes('GET')))).join(', ');
}

type HandlerOf<R extends { methods: Methods<unknown> }> = NonNullable<R['methods'][Method]>;

/** What a request reaches in a table where several routes may match one path. */
export type Selection<R extends { methods: Methods<unknown> }, P> =
  | { kind: 'handler'; route: R; params: P; handler: HandlerOf<R> }
  | { kind: 'not-allowed'; matched: R[]; allow: string }
  | { kind: 'not-found' };

/**
 * The first route, in table order, that matches the path (`match` gives its parameters, or null)
 * and has a handler for `method`; else `not-allowed` with every route the path matched, else
 * `not-found`.
 */
export function selectRoute<R extends { methods: Methods<unknown> }, P>(
  routes: readonly R[],
  match: (route: R) => P | null,
  method: string,
): Selection<R, P> {
  const matched: R[] = [];
  for (const route of routes) {
    const params = match(route);
    if (params === null) continue;
    const handler = handlerFor(route.methods, method) as HandlerOf<R> | undefined;
    if (handler !== undefined) return { kind: 'handler', route, params, handler };
    matched.push(route);
  }
  if (matched.length === 0) return { kind: 'not-found' };
  return { kind: 'not-allowed', matched, allow: allowOf(matched.map((r) => r.methods)) };
}
