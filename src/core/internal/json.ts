import { Result } from "effect"
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

/**
 * Whether two JSON values (as `JSON.parse` makes them) are equal whatever their key order — what comparing their
 * `canonicalJson` texts answers, without writing either text, except where the texts lose something: a number too
 * large for a double (`1e400`, written `null` by `JSON.stringify`) is not equal to `null` here, and an own
 * `__proto__` key counts.
 */
export const jsonEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false
    return true
  }
  if (Array.isArray(b)) return false
  const left = a as Record<string, unknown>
  const right = b as Record<string, unknown>
  let count = 0
  for (const key in left) {
    if (!Object.prototype.hasOwnProperty.call(left, key)) continue
    if (!Object.prototype.hasOwnProperty.call(right, key) || !jsonEqual(left[key], right[key])) return false
    count++
  }
  for (const key in right) if (Object.prototype.hasOwnProperty.call(right, key)) count--
  return count === 0
}

/**
 * JSON text as a value, or `JSON.parse`'s message: unbounded, for text whose size the caller has capped already (a
 * server's body); model text goes through `parse.ts`'s `parseJson`, which bounds size and depth first.
 */
export const parseJsonText = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}
