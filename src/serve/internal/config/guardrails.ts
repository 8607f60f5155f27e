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
 *     - judge: { criteria: "The answer gives no medical advice.", model: small }   # a model of models:
 *     - polite                                      # a guardrail of the file's guardrails:
 *   tool:
 *     - redact: {}
 *   onOutputTrip: repair                          # or fail (the default)
 *   onToolTrip: error                             # or fail
 * ```
 *
 * Each entry names exactly one built-in, or a guardrail of the file's `guardrails:` (guardrails by name, which a
 * run's request may name too). A judge asks the `model` it names (one of `models:`) or declares (a model block, as an
 * agent's `model`), else the agent's own model. The output's schema (`Guardrail.schema`) has no entry here: a file
 * holds no schemas; a run asks for structured output instead.
 */
import { Effect, Schema } from "effect"
import * as Guardrail from "../../../core/Guardrail.js"
import { ModelChoice } from "./models.js"
import { Pattern } from "../../../core/internal/pattern.js"


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
  /** The model that judges: a model of `models:` by name, or one written out; else the agent's. */
  model: Schema.optional(ModelChoice),
  name: Schema.optional(Name)
})

const builtIns = ["maxLength", "redact", "judge"] as const

/** One built-in guardrail by name, with its options. */
export const BuiltIn = Schema.Struct({
  maxLength: Schema.optional(MaxLength),
  redact: Schema.optional(Redact),
  judge: Schema.optional(Judge)
}).check(Schema.makeFilter((spec: Readonly<Record<string, unknown>>) => {
  const given = builtIns.filter((name) => spec[name] !== undefined)
  return given.length === 1 || `needs exactly one of ${builtIns.join(", ")}${given.length > 1 ? ` (it has ${given.join(", ")})` : " (it has none)"}`
}))
export type BuiltIn = typeof BuiltIn.Type

/** The name of a guardrail of the file's `guardrails:`. */
export const GuardrailName = Schema.String.check(Schema.makeFilter((name: string) => /^[A-Za-z0-9_.-]+$/.test(name), {
  expected: "the name of a guardrail of guardrails: (letters, digits, _ . -), or a built-in with its options"
}))

/** One guardrail of a list: a built-in with its options, or the name of one of the file's `guardrails:`. */
export const Spec = Schema.Union([GuardrailName, BuiltIn])
export type Spec = typeof Spec.Type

/** The file's `guardrails:`: built-ins by name, for agents' lists and runs' requests to name. */
export const Named = Schema.Record(GuardrailName, BuiltIn)
export type Named = typeof Named.Type

/**
 * Guardrails by kind and what a trip does, with `List` for each kind's list: one shape for `valet.yaml`'s agents and a
 * request's own (`runGuardrails`), each with its own list of what may be given.
 */
export const settingsOf = <L extends Schema.Top>(List: L) =>
  Schema.Struct({
    input: Schema.optional(List),
    output: Schema.optional(List),
    tool: Schema.optional(List),
    onOutputTrip: Schema.optional(Schema.Literals(["fail", "repair"])),
    onToolTrip: Schema.optional(Schema.Literals(["error", "fail"]))
  })

/** An agent's guardrails by kind, and what a trip does. */
export const Settings = settingsOf(Schema.Array(Spec))
export type Settings = typeof Settings.Type

/**
 * A built-in guardrail of the file; `judgeModel` is the judge's model when its spec names or declares one (a `Model`
 * layer the caller built from the file), else it judges on the run's model.
 */
export const buildBuiltIn = (
  spec: BuiltIn,
  judgeModel?: Guardrail.JudgeOptions["model"],
  /** The guardrail's name when its options give none: a guardrail of `guardrails:` is called by its key. */
  defaultName?: string
): Guardrail.Guardrail => {
  const named = <O extends { readonly name?: string | undefined }>(options: O): O =>
    options.name === undefined && defaultName !== undefined ? { ...options, name: defaultName } : options
  if (spec.maxLength !== undefined) return Guardrail.maxLength(named(spec.maxLength))
  if (spec.redact !== undefined) {
    const { patterns, ...rest } = spec.redact
    return Guardrail.redact(named({ ...rest, ...(patterns !== undefined ? { patterns: { ...patterns } } : {}) }))
  }
  // The check above leaves exactly one: the judge.
  const { model: _, ...judge } = spec.judge!
  return Guardrail.judge(named({ ...judge, ...(judgeModel !== undefined ? { model: judgeModel } : {}) }))
}

/**
 * The guardrails the settings name, each entry made by `one` (given its place in the list, for errors): a built-in
 * built, or a name looked up.
 */
export const make = <E, R>(
  settings: Settings,
  one: (spec: Spec, path: ReadonlyArray<string | number>) => Effect.Effect<Guardrail.Guardrail, E, R>
): Effect.Effect<Guardrail.Guardrails, E, R> =>
  Effect.gen(function*() {
    const list = (kind: "input" | "output" | "tool") => {
      const specs = settings[kind]
      return specs === undefined
        ? Effect.succeed(undefined)
        : Effect.forEach(specs, (spec, i) => one(spec, [kind, i]))
    }
    const input = yield* list("input")
    const output = yield* list("output")
    const tool = yield* list("tool")
    return {
      ...(input !== undefined ? { input } : {}),
      ...(output !== undefined ? { output } : {}),
      ...(tool !== undefined ? { tool } : {}),
      ...(settings.onOutputTrip !== undefined ? { onOutputTrip: settings.onOutputTrip } : {}),
      ...(settings.onToolTrip !== undefined ? { onToolTrip: settings.onToolTrip } : {})
    }
  })
