import { Schema } from "effect"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => u !== null && typeof u === "object" && !Array.isArray(u)

const nonFiniteNumbers = ["Infinity", "-Infinity", "NaN"]

/**
 * Effect's JSON Schema is that of the JSON *codec*, which a model does not need: a number may also be one of the
 * strings `"Infinity"`, `"-Infinity"`, `"NaN"`; an optional field may be `null`; an integer carries the bounds of a
 * safe integer. Models read plain schemas best, so these become `number`, the field's own schema and `integer`.
 */
const simplify = (node: unknown, optional: boolean): unknown => {
  if (Array.isArray(node)) return node.map((item) => simplify(item, false))
  if (!isObject(node)) return node
  const out: Json = {}
  for (const [key, value] of Object.entries(node)) out[key] = simplify(value, false)
  if (isObject(out.properties)) {
    const required = new Set(Array.isArray(out.required) ? out.required : [])
    const properties: Json = {}
    for (const [name, value] of Object.entries(node.properties as Json)) properties[name] = simplify(value, !required.has(name))
    out.properties = properties
  }
  const anyOf = out.anyOf
  if (Array.isArray(anyOf)) {
    const kept = anyOf.filter((member) =>
      !(isObject(member) && member.type === "string" && Array.isArray(member.enum) &&
        member.enum.every((value) => nonFiniteNumbers.includes(value as string))) &&
      !(optional && isObject(member) && member.type === "null" && Object.keys(member).length === 1)
    )
    if (kept.length !== anyOf.length) {
      const { anyOf: _anyOf, ...rest } = out
      return kept.length === 1 ? { ...(kept[0] as Json), ...rest } : { ...rest, anyOf: kept }
    }
  }
  if (out.type === "integer" && out.minimum === Number.MIN_SAFE_INTEGER && out.maximum === Number.MAX_SAFE_INTEGER) {
    delete out.minimum
    delete out.maximum
  }
  return out
}

/**
 * The JSON schema of a tool's parameters, as models read best: plain types (see `simplify`), and every
 * non-recursive reference inlined (small and local models follow inline schemas more reliably than `$ref`s).
 * Recursive definitions stay in `$defs`.
 */
export const parametersSchema = (schema: Schema.Top): Json => {
  // `additionalProperties: false`, as OpenAI's strict tool mode asks (decoding still ignores extra keys).
  const document = Schema.toJsonSchemaDocument(schema, { onExcessProperty: "error" })
  const root = simplify(document.schema, false) as Json
  const $defs = simplify(document.definitions, false) as Record<string, Json>
  if (Object.keys($defs).length === 0) return root
  const kept = new Set<string>()
  const inline = (node: unknown, path: ReadonlyArray<string>): unknown => {
    if (Array.isArray(node)) return node.map((item) => inline(item, path))
    if (!isObject(node)) return node
    const ref = node.$ref
    if (typeof ref === "string" && ref.startsWith("#/$defs/")) {
      const name = ref.slice("#/$defs/".length)
      const target = $defs[name]
      if (target !== undefined && !path.includes(name)) {
        const { $ref: _ref, ...rest } = node
        return { ...(inline(target, [...path, name]) as Json), ...rest }
      }
      kept.add(name)
      return node
    }
    const out: Json = {}
    for (const [key, value] of Object.entries(node)) out[key] = inline(value, path)
    return out
  }
  const inlined = inline(root, []) as Json
  if (kept.size === 0) return inlined
  const defs: Record<string, unknown> = {}
  for (const name of kept) defs[name] = inline($defs[name], [name])
  return { ...inlined, $defs: defs }
}
