import { describe, expect, it } from 'vitest';
import { allowOf, handlerFor, selectRoute, type Methods } from '../../registry/src/http/route-table.js';

/** The neutral route mechanism both ecosystems dispatch through (http/route-table.ts). */
describe('route table', () => {
  const get = () => 'get';
  const put = () => 'put';
  const del = () => 'delete';

  it('answers HEAD with GET unless HEAD has its own handler, and nothing for unknown methods', () => {
    const methods: Methods<() => string> = { GET: get, PUT: put };
    expect(handlerFor(methods, 'HEAD')).toBe(get);
    expect(handlerFor({ GET: get, HEAD: del }, 'HEAD')).toBe(del);
    expect(handlerFor(methods, 'DELETE')).toBeUndefined();
    expect(handlerFor(methods, 'OPTIONS')).toBeUndefined();
    expect(handlerFor(methods, 'constructor')).toBeUndefined();
  });

  it('lists every method of every matching route in one order, HEAD wherever GET is', () => {
    expect(allowOf([{ DELETE: del, PATCH: put, PUT: put, GET: get }])).toBe('GET, HEAD, PUT, PATCH, DELETE');
    expect(allowOf([{ PUT: put }, { DELETE: del, GET: get }])).toBe('GET, HEAD, PUT, DELETE');
    expect(allowOf([{ PUT: put }, { DELETE: del, GET: get }], ['GET'])).toBe('GET, HEAD');
    expect(allowOf([{ PUT: put }], ['GET'])).toBe('');
  });

  it('picks the first matching route with the method, else 405 with what all matching routes take, else 404', () => {
    const routes = [
      { name: 'page', path: 'a', methods: { GET: get } },
      { name: 'yank', path: 'a', methods: { PUT: put } },
      { name: 'other', path: 'b', methods: { DELETE: del } },
    ];
    const on = (path: string, method: string) => selectRoute(routes, (r) => (r.path === path ? [path] : null), method);
    expect(on('a', 'PUT')).toMatchObject({ kind: 'handler', route: { name: 'yank' }, params: ['a'], handler: put });
    expect(on('a', 'HEAD')).toMatchObject({ kind: 'handler', route: { name: 'page' }, handler: get });
    expect(on('a', 'POST')).toMatchObject({ kind: 'not-allowed', allow: 'GET, HEAD, PUT' });
    expect(on('c', 'GET')).toEqual({ kind: 'not-found' });
  });
});
