/**
 * JSON text with object keys sorted at every depth, so that equal values give equal text (for request hashes
 * and for recognising a repeated tool call whatever the key order the model chose).
 */
export const canonicalJson = (value: unknown): string => JSON.stringify(isCanonical(value) ? value : sortKeys(value)) ?? "null"

/** Whether keys are already sorted at every depth and no value is `undefined` (the usual case): no copy needed. */
const isCanonical = (value: unknown): boolean => {
  if (Array.isArray(value)) return value.every(isCanonical)
  if (value !== null && typeof value === "object") {
    const prototype = Object.getPrototypeOf(value)
    if (prototype !== Object.prototype && prototype !== null) return false
    let previous: string | undefined
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue
      const item = (value as Record<string, unknown>)[key]
      if ((previous !== undefined && previous >= key) || item === undefined || !isCanonical(item)) return false
      previous = key
    }
  }
  return true
}

const sortKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {}
    for (const key of Object.keys(value).sort()) {
      const item = (value as Record<string, unknown>)[key]
      if (item !== undefined) out[key] = sortKeys(item)
    }
    return out
  }
  return value
}

/** The canonical form of a tool call's argument text; text that is not JSON stays as it is, trimmed. */
export const canonicalArguments = (text: string): string => {
  const trimmed = text.trim()
  if (trimmed === "") return "{}"
  try {
    return canonicalJson(JSON.parse(trimmed))
  } catch {
    return trimmed
  }
}
