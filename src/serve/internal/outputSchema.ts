/**
 * Structured output asked for over HTTP (`POST /runs`' `output`, OpenAI's `response_format`): a JSON Schema, imported
 * as the Effect schema a run decodes its answer with (`Agent.stream`'s `output`) by effect's own importer.
 *
 * The schema comes from a client, and importing is synchronous work that grows with what `$ref` and `allOf` make of
 * it (a 2 KB schema of `allOf` pairs pointing at each other took minutes and held the event loop, every other
 * request with it): a walk first bounds it — nodes reached through references, branches, depth, enum sizes — and
 * refuses a reference that comes back to itself without a value in between.
 */
import { JsonSchema, Result, type Schema, SchemaRepresentation } from "effect"

// Draft-07 documents (zod-to-json-schema, older tools) keep their definitions under `definitions`; the importer
// resolves only `#/$defs/…` once a document is read as draft 2020-12, so those are read as draft-07.
const isDraft07 = (schema: Readonly<Record<string, unknown>>): boolean =>
  (typeof schema.$schema === "string" && /draft-0[4-7]/.test(schema.$schema)) ||
  (schema.definitions !== undefined && schema.$defs === undefined)

/** What a client's schema may be, at most. */
export const limits = {
  /** Nodes visited with every `$ref` expanded where it is used (a reference inside its own definition, once). */
  nodes: 5_000,
  /** Nesting of objects and arrays (a schema level is about two), counting expanded references. */
  depth: 40,
  /** Branches of one `allOf` / `anyOf` / `oneOf`. */
  branches: 16,
  /** Values of one `enum`. */
  enumValues: 500
} as const

const short = (path: string): string => (path.length > 120 ? `${path.slice(0, 57)}…${path.slice(-60)}` : path)

const structural = new Set(["properties", "patternProperties", "additionalProperties", "items", "prefixItems", "contains", "unevaluatedProperties", "unevaluatedItems", "propertyNames", "dependentSchemas"])

/** Why `schema` is too large or loops, or `undefined`. */
export const boundsProblem = (schema: unknown): string | undefined => {
  const root = schema as Readonly<Record<string, unknown>>
  let nodes = 0
  const resolve = (ref: string): unknown => {
    const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref)
    if (match === null) return undefined
    const defs = root[match[1]!]
    return defs !== null && typeof defs === "object" ? (defs as Record<string, unknown>)[decodeURIComponent(match[2]!).replace(/~1/g, "/").replace(/~0/g, "~")] : undefined
  }
  // `open`: the references being expanded on this path; `bare`: those reached with no value keyword in between.
  const walk = (node: unknown, at: string, depth: number, open: ReadonlySet<string>, bare: ReadonlySet<string>): string | undefined => {
    if (node === null || typeof node !== "object") return undefined
    if (++nodes > limits.nodes) return `more than ${limits.nodes} objects and arrays once its references are followed`
    if (depth > limits.depth) return `nested deeper than ${limits.depth} at ${short(at)}`
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const problem = walk(node[i], `${at}/${i}`, depth + 1, open, bare)
        if (problem !== undefined) return problem
      }
      return undefined
    }
    const record = node as Readonly<Record<string, unknown>>
    if (typeof record.$ref === "string") {
      const ref = record.$ref
      if (bare.has(ref)) return `the reference ${JSON.stringify(ref.slice(0, 100))} comes back to itself at ${short(at)}`
      // A reference inside its own definition through a property or item is a recursive type: expanded once.
      if (!open.has(ref)) {
        const problem = walk(resolve(ref), `${at}/$ref`, depth + 1, new Set([...open, ref]), new Set([...bare, ref]))
        if (problem !== undefined) return problem
      }
    }
    for (const key of ["allOf", "anyOf", "oneOf"]) {
      const branches = record[key]
      if (Array.isArray(branches) && branches.length > limits.branches) return `${short(at)}/${key} has ${branches.length} branches, more than ${limits.branches}`
    }
    if (Array.isArray(record.enum) && record.enum.length > limits.enumValues) return `${short(at)}/enum has ${record.enum.length} values, more than ${limits.enumValues}`
    for (const [key, value] of Object.entries(record)) {
      if (key === "$ref" || key === "$defs" || key === "definitions" || key === "enum" || key === "const" || key === "examples" || key === "default") continue
      const problem = walk(value, `${at}/${key}`, depth + 1, open, structural.has(key) ? new Set() : bare)
      if (problem !== undefined) return problem
    }
    return undefined
  }
  return walk(schema, "#", 0, new Set(), new Set())
}

// The facade checks a schema and `Runs.start` imports it: the same object, imported once.
const imported = new WeakMap<object, Result.Result<Schema.Codec<unknown, unknown>, string>>()

/**
 * The schema an answer is decoded with, or one line saying why `schema` cannot be one (an unsupported keyword or
 * reference, with where it is). `pattern` keywords are ignored: a regular expression from a request, run on the
 * server against a model's text, could hang it (catastrophic backtracking).
 */
export const fromJsonSchema = (
  schema: Readonly<Record<string, unknown>>
): Result.Result<Schema.Codec<unknown, unknown>, string> => {
  const known = imported.get(schema)
  if (known !== undefined) return known
  const result = importBounded(schema)
  imported.set(schema, result)
  return result
}

const importBounded = (schema: Readonly<Record<string, unknown>>): Result.Result<Schema.Codec<unknown, unknown>, string> => {
  const problem = boundsProblem(schema)
  if (problem !== undefined) return Result.fail(problem)
  try {
    const raw = schema as JsonSchema.JsonSchema
    const document = isDraft07(schema) ? JsonSchema.fromSchemaDraft07(raw) : JsonSchema.fromSchemaDraft2020_12(raw)
    // A JSON Schema describes JSON values, which are what they decode to: no services, `unknown` both ways.
    return Result.succeed(
      SchemaRepresentation.fromJsonSchemaDocument(document, { patterns: "ignore" }) as unknown as Schema.Codec<unknown, unknown>
    )
  } catch (error) {
    return Result.fail((error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, " "))
  }
}
