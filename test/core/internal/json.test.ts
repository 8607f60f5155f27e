import { describe, expect, it } from "@effect/vitest"
import { canonicalJson, jsonEqual } from "../../../src/core/internal/json.js"

/**
 * Random JSON values from a seeded generator: numbers below `numbers`, strings `s0`..`s<strings - 1>`, null, true,
 * arrays and objects over `keys`, at most 4 deep. Few distinct leaves make equal values common.
 */
const randomValues = (seed: number, options: { readonly numbers: number; readonly strings: number; readonly keys: ReadonlyArray<string> }) => {
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
  const value = (depth: number): unknown => {
    const kind = Math.floor(random() * (depth > 2 ? 3 : 5))
    if (kind === 0) return Math.floor(random() * options.numbers)
    if (kind === 1) return `s${Math.floor(random() * options.strings)}`
    if (kind === 2) return random() < 0.5 ? null : true
    if (kind === 3) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1))
    const keys = options.keys.filter(() => random() < 0.6)
    return Object.fromEntries(keys.map((key) => [key, value(depth + 1)]))
  }
  return { random, value: () => value(0) }
}

/** The same value with every object's keys in reverse order. */
const reordered = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(reordered)
  if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reordered(x)]))
  return v
}

describe("json", () => {
  it("canonicalJson sorts keys at every depth and drops undefined values; sorted input is written as it is", () => {
    expect(canonicalJson({ b: 1, a: { d: [{ z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[{"y":2,"z":1}]},"b":1}')
    expect(canonicalJson({ a: 1, b: [1, "x", null] })).toBe('{"a":1,"b":[1,"x",null]}')
    // Integer-like keys: objects list them first whatever the order, so sorted text is the same either way.
    expect(canonicalJson({ "9": 1, "10": 2, a: 3 })).toBe('{"9":1,"10":2,"a":3}')
    expect(canonicalJson(undefined)).toBe("null")
  })

  it("canonicalJson of a value equals canonicalJson of any key order of it (random values)", () => {
    const { value } = randomValues(7, { numbers: 100, strings: 10, keys: ["b", "a", "c", "10", "2", "aa"] })
    const sortedCopy = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(sortedCopy)
      if (v !== null && typeof v === "object") {
        return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortedCopy((v as Record<string, unknown>)[k])]))
      }
      return v
    }
    for (let i = 0; i < 300; i++) {
      const v = value()
      expect(canonicalJson(reordered(v))).toBe(canonicalJson(v))
      expect(canonicalJson(v)).toBe(JSON.stringify(sortedCopy(v)))
    }
  })

  it("jsonEqual answers what comparing canonicalJson texts answers (random pairs, reordered copies)", () => {
    const { random, value } = randomValues(11, { numbers: 3, strings: 2, keys: ["b", "a", "10", "2"] })
    let equalPairs = 0
    for (let i = 0; i < 2000; i++) {
      const a = value()
      const b = random() < 0.3 ? reordered(a) : value()
      const expected = canonicalJson(a) === canonicalJson(b)
      if (expected) equalPairs++
      expect(jsonEqual(a, b)).toBe(expected)
      expect(jsonEqual(b, a)).toBe(expected)
    }
    // Both answers occur, so the check above can fail either way.
    expect(equalPairs).toBeGreaterThan(300)
    expect(equalPairs).toBeLessThan(1700)
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false)
    expect(jsonEqual([1, 2], { 0: 1, 1: 2 })).toBe(false)
    expect(jsonEqual(-0, 0)).toBe(true)
  })
})
