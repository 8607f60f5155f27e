import { Schema, SchemaAST as AST } from "effect"

/**
 * Models write `"3"` where a schema says number, `"true"` for a boolean, and sometimes a JSON string where an
 * object is expected. `coerce` rewrites such values along the *encoded* side of a schema (callers pass
 * `SchemaAST.toEncoded(schema.ast)`) so that a strict decode can then succeed. It is only used after a strict decode failed, so well-formed arguments never pay.
 */
export const coerce = (ast: AST.AST, value: unknown): unknown => {
  switch (ast._tag) {
    case "Suspend":
      return coerce(ast.thunk(), value)
    case "Number":
      return toNumber(value)
    case "Boolean":
      return toBoolean(value)
    case "Literal": {
      if (typeof ast.literal === "number") return toNumber(value)
      if (typeof ast.literal === "boolean") return toBoolean(value)
      return value
    }
    case "Objects": {
      const parsed = parseJsonText(value, "object")
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return parsed
      const record = parsed as Record<string, unknown>
      const out: Record<string, unknown> = { ...record }
      const known = new Set<PropertyKey>()
      for (const property of ast.propertySignatures) {
        known.add(property.name)
        if (typeof property.name === "string" && property.name in record) {
          out[property.name] = coerce(property.type, record[property.name])
        }
      }
      for (const signature of ast.indexSignatures) {
        for (const key of Object.keys(record)) {
          if (!known.has(key)) out[key] = coerce(signature.type, record[key])
        }
      }
      return out
    }
    case "Arrays": {
      const parsed = parseJsonText(value, "array")
      if (!Array.isArray(parsed)) return parsed
      return parsed.map((item, i) => {
        const element = ast.elements[i]
        if (element !== undefined) return coerce(element, item)
        const rest = ast.rest[0]
        return rest !== undefined ? coerce(rest, item) : item
      })
    }
    case "Union": {
      for (const member of ast.types) {
        const candidate = coerce(member, value)
        if (Schema.is(Schema.make(member))(candidate)) return candidate
      }
      return value
    }
    default:
      return value
  }
}

const toNumber = (value: unknown): unknown => {
  if (typeof value !== "string") return value
  const trimmed = value.trim()
  if (trimmed === "") return value
  const n = Number(trimmed)
  return Number.isNaN(n) ? value : n
}

const toBoolean = (value: unknown): unknown => {
  if (value === "true") return true
  if (value === "false") return false
  return value
}

const parseJsonText = (value: unknown, expected: "object" | "array"): unknown => {
  if (typeof value !== "string") return value
  const trimmed = value.trim()
  if (!(expected === "object" ? trimmed.startsWith("{") : trimmed.startsWith("["))) return value
  try {
    return JSON.parse(trimmed)
  } catch {
    return value
  }
}
