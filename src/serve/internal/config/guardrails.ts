/**
 * The `guardrails:` of an agent in `valet.yaml` (DESIGN §16): the built-in guardrails by name, with their options.
 *
 * ```yaml
 * guardrails:
 *   input:
 *     - maxLength: { maxChars: 8000 }
 *     - redact: { mode: trip }                     # a prompt holding PII is refused
 *   output:
 *     - redact: { pii: [email, card], patterns: { ticket: "TCK-\\d+" } }
 *     - judge: { criteria: "The answer gives no medical advice." }
 *   tool:
 *     - redact: {}
 *   onOutputTrip: repair                          # or fail (the default)
 *   onToolTrip: error                             # or fail
 * ```
 *
 * Each entry names exactly one built-in. A judge asks the agent's own model. The output's schema (`Guardrail.schema`)
 * has no entry here: a file holds no schemas; a run asks for structured output instead.
 */
import { Schema } from "effect"
import * as Guardrail from "../../../core/Guardrail.js"
import { Pattern } from "./pattern.js"


const Name = Schema.String.check(Schema.makeFilter((name: string) => /^[A-Za-z0-9_.-]+$/.test(name) || "must be a name (letters, digits, _ . -)"))

const MaxLength = Schema.Struct({
  maxChars: Schema.Number.check(Schema.makeFilter((n: number) => Number.isSafeInteger(n) && n >= 1, { expected: "an integer >= 1" })),
  name: Schema.optional(Name)
})

const Redact = Schema.Struct({
  pii: Schema.optional(Schema.Array(Schema.Literals(["email", "card", "key"]))),
  patterns: Schema.optional(Schema.Record(Schema.String, Pattern)),
  mode: Schema.optional(Schema.Literals(["redact", "trip"])),
  name: Schema.optional(Name)
})

const Judge = Schema.Struct({
  criteria: Schema.String.check(Schema.isMinLength(1, { expected: "the rule, in words" })),
  name: Schema.optional(Name)
})

const builtIns = ["maxLength", "redact", "judge"] as const

/** One guardrail: exactly one built-in by name, with its options. */
export const Spec = Schema.Struct({
  maxLength: Schema.optional(MaxLength),
  redact: Schema.optional(Redact),
  judge: Schema.optional(Judge)
}).check(Schema.makeFilter((spec: Readonly<Record<string, unknown>>) => {
  const given = builtIns.filter((name) => spec[name] !== undefined)
  return given.length === 1 || `needs exactly one of ${builtIns.join(", ")}${given.length > 1 ? ` (it has ${given.join(", ")})` : " (it has none)"}`
}))
export type Spec = typeof Spec.Type

const List = Schema.Array(Spec)

/** An agent's guardrails by kind, and what a trip does. */
export const Settings = Schema.Struct({
  input: Schema.optional(List),
  output: Schema.optional(List),
  tool: Schema.optional(List),
  onOutputTrip: Schema.optional(Schema.Literals(["fail", "repair"])),
  onToolTrip: Schema.optional(Schema.Literals(["error", "fail"]))
})
export type Settings = typeof Settings.Type

const build = (spec: Spec): Guardrail.Guardrail => {
  if (spec.maxLength !== undefined) return Guardrail.maxLength(spec.maxLength)
  if (spec.redact !== undefined) {
    const { patterns, ...rest } = spec.redact
    return Guardrail.redact({ ...rest, ...(patterns !== undefined ? { patterns: { ...patterns } } : {}) })
  }
  // The check above leaves exactly one: the judge.
  return Guardrail.judge(spec.judge!)
}

/** The guardrails the settings name. */
export const make = (settings: Settings): Guardrail.Guardrails => ({
  ...(settings.input !== undefined ? { input: settings.input.map(build) } : {}),
  ...(settings.output !== undefined ? { output: settings.output.map(build) } : {}),
  ...(settings.tool !== undefined ? { tool: settings.tool.map(build) } : {}),
  ...(settings.onOutputTrip !== undefined ? { onOutputTrip: settings.onOutputTrip } : {}),
  ...(settings.onToolTrip !== undefined ? { onToolTrip: settings.onToolTrip } : {})
})
