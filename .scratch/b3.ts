import { JsonSchema, SchemaRepresentation } from "effect"
import { boundsProblem } from "../src/serve/internal/outputSchema.ts"
const time = (label: string, schema: any) => {
  const t = performance.now()
  try { SchemaRepresentation.fromJsonSchemaDocument(JsonSchema.fromSchemaDraft2020_12(schema), { patterns: "ignore" }) } catch (e) { console.log("err", String(e).slice(0, 80)) }
  console.log(label, (performance.now() - t).toFixed(1), "ms", boundsProblem(schema))
}
for (const [n, p] of [[16, 300], [16, 600], [32, 300], [8, 1200]]) {
  time(`allOf${n}x${p}`, { allOf: Array.from({ length: n }, (_, j) => ({ type: "object", properties: Object.fromEntries(Array.from({ length: p }, (_, i) => [`p${j}_${i}`, { type: "string" }])) })) })
}
// same props repeated across branches
time(`allOf16x600same`, { allOf: Array.from({ length: 16 }, (_, j) => ({ type: "object", properties: Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`p${i}`, { type: "string" }])) })) })
// nested allOf of allOf inline
const nest = (d: number): any => d === 0 ? { type: "object", properties: { a: { type: "string" } } } : { allOf: Array.from({ length: 8 }, () => nest(d - 1)) }
time("nest8^4", nest(4))
