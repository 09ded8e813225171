/**
 * The CRDs (crds/*.yaml, what the API server enforces) and operator/src/resources/types.ts (what
 * the operator reads and writes) say the same thing: the same fields, the same required ones, the
 * same enums and basic types, in spec and status. Both are written by hand; this suite is what
 * ties them, and it is shown to fail when either side drifts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/paths.js';
import { differences, typeChecker, type SchemaNode } from '../support/schema-vs-types.js';

const TYPES = join(REPO, 'operator', 'src', 'resources', 'types.ts');
/** Kubernetes' own fields: the CRD constrains `metadata.name` only, the type is ObjectMeta. */
const KUBERNETES_FIELDS = new Set(['.apiVersion', '.kind', '.metadata']);

interface Crd {
  spec: { names: { kind: string }; versions: { name: string; schema: { openAPIV3Schema: SchemaNode } }[] };
}

function schemaOf(file: string): { kind: string; schema: SchemaNode } {
  const crd = load(readFileSync(join(REPO, 'crds', file), 'utf8')) as Crd;
  const [version] = crd.spec.versions;
  if (!version || crd.spec.versions.length !== 1) throw new Error(`${file}: expected one version`);
  return { kind: crd.spec.names.kind, schema: version.schema.openAPIV3Schema };
}

const CRDS = ['packageindex.yaml', 'packageregistry.yaml'];

function drift(types: ReturnType<typeof typeChecker>, crd: { kind: string; schema: SchemaNode }): string[] {
  return differences(crd.schema, types.exported(crd.kind), types.checker, '', KUBERNETES_FIELDS);
}

describe('crds/*.yaml and resources/types.ts', () => {
  const types = typeChecker(TYPES);

  it.each(CRDS)('%s agrees with its type', (file) => {
    const crd = schemaOf(file);
    expect(drift(types, crd)).toEqual([]);
  });

  it('finds a schema that drifted: a field renamed, an enum value added, a field made required, a type changed', () => {
    const crd = schemaOf('packageindex.yaml');
    const spec = crd.schema.properties?.spec;
    const props = spec?.properties;
    if (!spec || !props?.volatile || !props.ecosystem?.enum || !props.upstreamConcurrency) throw new Error('the schema changed shape; adjust this test');
    props.isVolatile = props.volatile;
    delete props.volatile;
    props.ecosystem.enum = [...props.ecosystem.enum, 'npm'];
    spec.required = [...(spec.required ?? []), 'registry'];
    props.upstreamConcurrency = { type: 'string' };
    expect(drift(types, crd).sort()).toEqual(
      [
        '.spec.ecosystem: the schema\'s enum is [npm, oci, python], the type\'s values are [oci, python]',
        '.spec.isVolatile: in the schema, not in the type',
        '.spec.registry: required in the schema, optional in the type',
        '.spec.upstreamConcurrency: the schema says any string, the type is number',
        '.spec.volatile: in the type, not in the schema',
      ].sort(),
    );
  });

  it('finds a type that drifted: a status field added, a field typed wrongly (a size no longer int-or-string), an enum narrowed', () => {
    const text = readFileSync(TYPES, 'utf8');
    const edits: Array<[string, string]> = [
      ['  servingPods?: number;\n', '  servingPods?: number;\n  lastError?: string;\n'],
      ['  volatile?: boolean;\n', '  volatile?: string;\n'],
      ['  quotaBytes?: ByteSize;\n', '  quotaBytes?: number;\n'],
      ["imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';", "imagePullPolicy?: 'Always' | 'IfNotPresent';"],
    ];
    let edited = text;
    for (const [from, to] of edits) {
      if (!edited.includes(from)) throw new Error(`types.ts no longer has ${JSON.stringify(from)}; adjust this test`);
      edited = edited.replace(from, to);
    }
    const drifted = typeChecker(TYPES, edited);
    expect(drift(drifted, schemaOf('packageindex.yaml'))).toEqual([
      '.spec.volatile: the schema says boolean, the type is string',
      '.spec.quotaBytes: the schema says integer or string, the type is number',
      '.status.lastError: in the type, not in the schema',
    ]);
    expect(drift(drifted, schemaOf('packageregistry.yaml'))).toEqual([
      '.spec.imagePullPolicy: the schema\'s enum is [Always, IfNotPresent, Never], the type\'s values are [Always, IfNotPresent]',
    ]);
  });
});
