/**
 * A client's JSON Schema (`POST /runs`' `output`, OpenAI's `response_format`) is bounded before it is imported: a
 * small schema whose references multiply (each `allOf` pair pointing at the next) took minutes to import and held
 * the event loop; a reference that comes back to itself ended a run with a stack overflow after its model call.
 * No time is asserted: on the unbounded importer the first case outlasts the test's own timeout.
 */
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as OutputSchema from "../../../src/serve/internal/outputSchema.js"

/** `d0 = allOf[d1, d1]`, `d1 = allOf[d2, d2]`, …: 1.7 KB that expands to 2^depth objects. */
const pairs = (depth: number) => {
  const defs: Record<string, unknown> = {}
  for (let i = 0; i < depth; i++) defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  defs[`d${depth}`] = { type: "object", properties: { z: { type: "string" } } }
  return { $ref: "#/$defs/d0", $defs: defs }
}

const failure = (schema: Record<string, unknown>): string => {
  const result = OutputSchema.fromJsonSchema(schema)
  return Result.isFailure(result) ? result.failure : "imported"
}

describe("OutputSchema: a client's schema is bounded before it is imported", () => {
  it("references that multiply, wide or deep nesting, long enums and self-references are refused, each naming why", () => {
    expect(failure(pairs(12))).toBe("more than 5000 objects and arrays once its references are followed")
    expect(failure(pairs(24))).toMatch(/^nested deeper than 40 at #\/\$ref\/allOf\/0/)
    expect(failure({ allOf: Array.from({ length: 17 }, () => ({ type: "object" })) })).toBe("#/allOf has 17 branches, more than 16")
    expect(failure({ enum: Array.from({ length: 501 }, (_, i) => i) })).toBe("#/enum has 501 values, more than 500")
    let deep: Record<string, unknown> = { type: "string" }
    for (let i = 0; i < 100_000; i++) deep = { type: "array", items: deep }
    expect(failure(deep)).toMatch(/^nested deeper than 40 at #\/items\/items/)
    expect(failure({ $ref: "#/$defs/a", $defs: { a: { $ref: "#/$defs/a" } } })).toBe(`the reference "#/$defs/a" comes back to itself at #/$ref`)
    expect(failure({ $ref: "#/definitions/a", definitions: { a: { anyOf: [{ $ref: "#/definitions/b" }] }, b: { allOf: [{ $ref: "#/definitions/a" }] } } }))
      .toBe(`the reference "#/definitions/a" comes back to itself at #/$ref/anyOf/0/$ref/allOf/0`)
  })

  it("schemas of the usual kinds import: nested objects, a recursive type through a property, a thousand properties, a few references", () => {
    const ok = [
      pairs(6),
      { type: "object", properties: { name: { type: "string" }, tags: { type: "array", items: { type: "string" } } }, required: ["name"] },
      { $ref: "#/$defs/node", $defs: { node: { type: "object", properties: { value: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/node" } } } } } },
      { type: "object", properties: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`p${i}`, { type: "object", properties: { a: { type: "string" } } }])) }
    ]
    for (const schema of ok) expect(failure(schema)).toBe("imported")
  })
})
