import { JSONSchema, type Schema } from "effect"

type Json = Record<string, unknown>

/**
 * The JSON schema of a tool's parameters, as models read best: `JSONSchema.make` names reusable schemas (`Int`,
 * user identifiers) in `$defs` and points at them with `$ref`; small and local models follow inline schemas more
 * reliably, so every non-recursive reference is inlined. Recursive definitions stay in `$defs`.
 */
export const parametersSchema = <A, I>(schema: Schema.Schema<A, I>): Json => {
  const { $defs, $schema: _ignored, ...root } = JSONSchema.make(schema) as unknown as Json & { $defs?: Record<string, Json> }
  if ($defs === undefined) return root
  const kept = new Set<string>()
  const inline = (node: unknown, path: ReadonlyArray<string>): unknown => {
    if (Array.isArray(node)) return node.map((item) => inline(item, path))
    if (node === null || typeof node !== "object") return node
    const object = node as Json
    const ref = object.$ref
    if (typeof ref === "string" && ref.startsWith("#/$defs/")) {
      const name = ref.slice("#/$defs/".length)
      const target = $defs[name]
      if (target !== undefined && !path.includes(name)) {
        const { $ref: _ref, ...rest } = object
        return { ...(inline(target, [...path, name]) as Json), ...rest }
      }
      kept.add(name)
      return object
    }
    const out: Json = {}
    for (const [key, value] of Object.entries(object)) out[key] = inline(value, path)
    return out
  }
  const inlined = inline(root, []) as Json
  if (kept.size === 0) return inlined
  const defs: Record<string, unknown> = {}
  for (const name of kept) defs[name] = inline($defs[name], [name])
  return { ...inlined, $defs: defs }
}
