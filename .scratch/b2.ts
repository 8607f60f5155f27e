import { JsonSchema, SchemaRepresentation } from "effect"
const time = (label: string, schema: any) => {
  const t = performance.now()
  try { SchemaRepresentation.fromJsonSchemaDocument(JsonSchema.fromSchemaDraft2020_12(schema), { patterns: "ignore" }) } catch (e) { console.log("err", String(e).slice(0, 80)) }
  console.log(label, (performance.now() - t).toFixed(1), "ms")
}
const wide = (k: number, n: number) => {
  const defs: any = {}
  for (let i = 0; i < k; i++) defs[`d${i}`] = { allOf: Array.from({ length: n }, () => ({ $ref: `#/$defs/d${i + 1}` })) }
  defs[`d${k}`] = { type: "object", properties: { z: { type: "string" } } }
  return { $ref: "#/$defs/d0", $defs: defs }
}
time("wide16 k3", wide(3, 16))
time("wide4 k6", wide(6, 4))
time("wide2 k12", wide(12, 2))
time("allOf16x200", { allOf: Array.from({ length: 16 }, (_, j) => ({ type: "object", properties: Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`p${j}_${i}`, { type: "string" }])) })) })
time("props1000", { type: "object", properties: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`p${i}`, { type: "object", properties: { a: { type: "string" }, b: { type: "number" } } }])) })
time("props5000", { type: "object", properties: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`p${i}`, { type: "object", properties: { a: { type: "string" }, b: { type: "number" } } }])) })
const anyOfWide = (k: number, n: number) => {
  const defs: any = {}
  for (let i = 0; i < k; i++) defs[`d${i}`] = { anyOf: Array.from({ length: n }, () => ({ $ref: `#/$defs/d${i + 1}` })) }
  defs[`d${k}`] = { type: "object", properties: { z: { type: "string" } } }
  return { $ref: "#/$defs/d0", $defs: defs }
}
time("anyOf16 k3", anyOfWide(3, 16))
time("anyOf2 k12", anyOfWide(12, 2))
