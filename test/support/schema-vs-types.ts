/**
 * Compares an OpenAPI v3 schema (a CRD's `openAPIV3Schema`) with a TypeScript type read by the
 * compiler: field names both ways, required fields against non-optional properties, enums against
 * unions of string literals, and the basic types (string, integer or number, boolean, array,
 * object; an object that keeps unknown fields against a type with an index signature). What a
 * type cannot say (patterns, lengths, CEL rules, descriptions) is not compared. A field marked
 * `x-kubernetes-int-or-string` (no type of its own) matches `number | string`.
 */
import ts from 'typescript';

/** The part of a JSON schema this compares, with its YAML spelling. */
export interface SchemaNode {
  type?: string;
  properties?: Record<string, SchemaNode>;
  required?: string[];
  items?: SchemaNode;
  enum?: unknown[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
}

/** A program of one file, optionally with `text` instead of what is on disk (to prove a test fails). */
export function typeChecker(file: string, text?: string): { checker: ts.TypeChecker; exported(name: string): ts.Type } {
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts'],
    types: [],
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  if (text !== undefined) {
    const read = host.getSourceFile.bind(host);
    host.getSourceFile = (name, version, ...rest) => (name === file ? ts.createSourceFile(name, text, version) : read(name, version, ...rest));
  }
  const program = ts.createProgram([file], options, host);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  const module = source && checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`${file} is not a module`);
  const exports = checker.getExportsOfModule(module);
  return {
    checker,
    exported(name) {
      const symbol = exports.find((s) => s.name === name);
      if (!symbol) throw new Error(`${file} exports no ${name}`);
      return checker.getDeclaredTypeOfSymbol(symbol);
    },
  };
}

/**
 * Where `schema` and `type` disagree, one line each, naming the field (`path`). Fields whose path
 * is in `ignore` are left out on both sides (what Kubernetes itself defines, like `metadata`).
 */
export function differences(schema: SchemaNode, type: ts.Type, checker: ts.TypeChecker, path = '', ignore: ReadonlySet<string> = new Set()): string[] {
  const t = checker.getNonNullableType(type);
  const shown = checker.typeToString(t);
  const at = path || '(root)';
  const literals = t.isUnion() ? t.types : [t];
  if (schema['x-kubernetes-int-or-string']) {
    const numberAndString = literals.length === 2 && literals.some((m) => m.flags & ts.TypeFlags.Number) && literals.some((m) => m.flags & ts.TypeFlags.String);
    return numberAndString ? [] : [`${at}: the schema says integer or string, the type is ${shown}`];
  }
  switch (schema.type) {
    case 'string': {
      if (schema.enum) {
        const values = literals.map((m) => (m.isStringLiteral() ? m.value : undefined));
        if (values.includes(undefined)) return [`${at}: the schema has enum [${schema.enum.join(', ')}], the type is ${shown}`];
        const want = [...schema.enum].map(String).sort();
        const got = (values as string[]).sort();
        return want.join('|') === got.join('|') ? [] : [`${at}: the schema's enum is [${want.join(', ')}], the type's values are [${got.join(', ')}]`];
      }
      return t.flags & ts.TypeFlags.String ? [] : [`${at}: the schema says any string, the type is ${shown}`];
    }
    case 'integer':
    case 'number':
      return t.flags & ts.TypeFlags.Number ? [] : [`${at}: the schema says ${schema.type}, the type is ${shown}`];
    case 'boolean':
      return t.flags & ts.TypeFlags.Boolean ? [] : [`${at}: the schema says boolean, the type is ${shown}`];
    case 'array': {
      if (!checker.isArrayType(t)) return [`${at}: the schema says array, the type is ${shown}`];
      const [element] = checker.getTypeArguments(t as ts.TypeReference);
      if (!schema.items || !element) return [`${at}: an array without items`];
      return differences(schema.items, element, checker, `${path}[]`, ignore);
    }
    case 'object':
      return objectDifferences(schema, t, checker, path, ignore);
    default:
      return [`${at}: the schema's type ${String(schema.type)} is not one this comparison knows`];
  }
}

function objectDifferences(schema: SchemaNode, t: ts.Type, checker: ts.TypeChecker, path: string, ignore: ReadonlySet<string>): string[] {
  const at = path || '(root)';
  const shown = checker.typeToString(t);
  if (!(t.flags & ts.TypeFlags.Object)) return [`${at}: the schema says object, the type is ${shown}`];
  if (schema['x-kubernetes-preserve-unknown-fields'] && !schema.properties) {
    return checker.getIndexInfosOfType(t).length > 0 && checker.getPropertiesOfType(t).length === 0 ? [] : [`${at}: the schema keeps any field, the type is ${shown} (use a Record)`];
  }
  const props = new Map(checker.getPropertiesOfType(t).map((p) => [p.name, p]));
  const fields = schema.properties ?? {};
  const required = new Set(schema.required ?? []);
  const out: string[] = [];
  for (const name of new Set([...Object.keys(fields), ...props.keys()])) {
    const child = `${path}.${name}`;
    if (ignore.has(child)) continue;
    const field = fields[name];
    const prop = props.get(name);
    if (!field) {
      out.push(`${child}: in the type, not in the schema`);
      continue;
    }
    if (!prop) {
      out.push(`${child}: in the schema, not in the type`);
      continue;
    }
    const optional = (prop.flags & ts.SymbolFlags.Optional) !== 0;
    if (required.has(name) && optional) out.push(`${child}: required in the schema, optional in the type`);
    if (!required.has(name) && !optional) out.push(`${child}: optional in the schema, required in the type`);
    out.push(...differences(field, checker.getTypeOfSymbol(prop), checker, child, ignore));
  }
  return out;
}
