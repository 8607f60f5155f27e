/**
 * The guardrails a run's request may ask for (`POST /runs`, `POST /runs/stream`, a thread turn: `guardrails`): by
 * name, only those the server declares (`valet.yaml`'s `guardrails:`, `Runs`' `guardrails` option), and the built-ins
 * whose options are bounded data — `maxLength`, `redact` (its own PII kinds, no patterns: a client's regular
 * expression is code this server would run) and `schema` (a JSON Schema, imported bounded, as `output` is). Never a
 * model, a URL or a pattern from the request: a judge is the server's to declare.
 *
 * ```json
 * { "agent": "support", "input": "…", "guardrails": { "input": ["no_pii"], "output": [{ "maxLength": { "maxChars": 2000 } }] } }
 * ```
 *
 * The body's schema bounds it (names, list lengths, limits); a name the server does not declare is refused
 * (`InvalidRunRequest`, 400) naming it and its place, after the body is parsed.
 */
import { Result, Schema } from "effect"
import * as Guardrail from "../../core/Guardrail.js"
import * as Model from "../../core/Model.js"
import { settingsOf } from "./config/guardrails.js"
import * as OutputSchema from "./outputSchema.js"

/** The most guardrails of one kind a request may ask for. */
export const maxPerKind = 16

/** The largest `maxChars` a request may give (10 million characters). */
export const maxCharsLimit = 10_000_000

/** A guardrail's name: what a request names, and what a built-in it asks for may be called. */
const Name = Schema.String.check(Schema.makeFilter((name: string) => /^[A-Za-z0-9_.-]{1,64}$/.test(name), {
  expected: "a guardrail's name (1-64 letters, digits, _ . -)"
}))

const MaxLength = Schema.Struct({
  maxChars: Schema.Number.check(Schema.makeFilter((n: number) => Number.isSafeInteger(n) && n >= 1 && n <= maxCharsLimit, {
    expected: `an integer 1-${maxCharsLimit}`
  })),
  name: Schema.optional(Name)
})

const Redact = Schema.Struct({
  pii: Schema.optional(Schema.Array(Schema.Literals(["email", "card", "key"])).check(Schema.isMaxLength(3))),
  mode: Schema.optional(Schema.Literals(["redact", "trip"])),
  // Said, rather than dropped: a client that sends patterns learns they are not taken.
  patterns: Schema.optional(Schema.Unknown.check(Schema.makeFilter(() =>
    "are not taken from a request (a regular expression is code the server would run): declare the redactor in the server's guardrails and name it"
  ))),
  name: Schema.optional(Name)
})

const SchemaCheck = Schema.Struct({
  /** A JSON Schema (draft 2020-12, or draft-07) the text must match, imported as `output` is. */
  schema: Model.JsonObject,
  name: Schema.optional(Name)
})

const builtIns = ["maxLength", "redact", "schema"] as const

/** A built-in a request asks for: exactly one of `maxLength`, `redact`, `schema`, with its options. */
const BuiltIn = Schema.Struct({
  maxLength: Schema.optional(MaxLength),
  redact: Schema.optional(Redact),
  schema: Schema.optional(SchemaCheck),
  // Said, rather than dropped: a judge calls a model, which a request never names.
  judge: Schema.optional(Schema.Unknown.check(Schema.makeFilter(() =>
    "is not taken from a request (it calls a model): declare the judge in the server's guardrails and name it"
  )))
}).check(Schema.makeFilter((spec: Readonly<Record<string, unknown>>) => {
  const given = builtIns.filter((name) => spec[name] !== undefined)
  return given.length === 1 ||
    `needs exactly one of ${builtIns.join(", ")}${given.length > 1 ? ` (it has ${given.join(", ")})` : " (it has none)"}, or the name of a guardrail of the server's`
}))

/** One guardrail of a request: a name the server declares, or a bounded built-in. */
export const Spec = Schema.Union([Name, BuiltIn])
export type Spec = typeof Spec.Type

const List = Schema.Array(Spec).check(Schema.isMaxLength(maxPerKind))

/**
 * A run's guardrails, as its request gives them: checked after the agent's own (`Agent.run`'s `guardrails`). Its
 * `onOutputTrip` / `onToolTrip` may only be `"fail"` (stricter than the agent's; `resolve` refuses the laxer ones).
 */
export const Request = settingsOf(List)
export type Request = typeof Request.Type

const builtIn = (spec: typeof BuiltIn.Type, at: string): Result.Result<Guardrail.Guardrail, string> => {
  if (spec.maxLength !== undefined) return Result.succeed(Guardrail.maxLength(spec.maxLength))
  if (spec.redact !== undefined) {
    const { patterns: _, ...options } = spec.redact
    return Result.succeed(Guardrail.redact(options))
  }
  // The check above leaves exactly one: the schema.
  const { name, schema } = spec.schema!
  const codec = OutputSchema.fromJsonSchema(schema)
  return Result.isFailure(codec)
    ? Result.fail(`${at}.schema.schema: not a JSON Schema valet can check with: ${codec.failure}`)
    : Result.succeed(Guardrail.schema(codec.success, name !== undefined ? { name } : {}))
}

/**
 * The guardrails a request asks for, its names looked up in `named` (the server's); the first name the server does
 * not declare, or schema it cannot import, is the failure, naming its place (`guardrails.input[0]`).
 */
export const resolve = (
  request: Request,
  named: ReadonlyMap<string, Guardrail.Guardrail>
): Result.Result<Guardrail.Guardrails, string> => {
  const result: {
    input?: ReadonlyArray<Guardrail.Guardrail>
    output?: ReadonlyArray<Guardrail.Guardrail>
    tool?: ReadonlyArray<Guardrail.Guardrail>
    onOutputTrip?: "fail" | "repair"
    onToolTrip?: "error" | "fail"
  } = {}
  for (const kind of ["input", "output", "tool"] as const) {
    const specs = request[kind]
    if (specs === undefined) continue
    const list: Array<Guardrail.Guardrail> = []
    for (const [i, spec] of specs.entries()) {
      const at = `guardrails.${kind}[${i}]`
      if (typeof spec === "string") {
        const guardrail = named.get(spec)
        if (guardrail === undefined) {
          const known = [...named.keys()]
          return Result.fail(
            `${at}: no guardrail named ${JSON.stringify(spec)} on this server (${known.length > 0 ? `it declares ${known.join(", ")}` : "it declares none"}; or give maxLength, redact or schema)`
          )
        }
        list.push(guardrail)
      } else {
        const built = builtIn(spec, at)
        if (Result.isFailure(built)) return Result.fail(built.failure)
        list.push(built.success)
      }
    }
    result[kind] = list
  }
  // Only ever stricter: a laxer policy from a client would undo the server's (an agent that fails a run on a tool trip
  // would let the model read the refusal and try again; one that fails on an output trip would repair instead).
  for (const [key, lax] of [["onOutputTrip", "repair"], ["onToolTrip", "error"]] as const) {
    if (request[key] === lax) {
      return Result.fail(`guardrails.${key}: a request may only ask for "fail" (a stricter policy), not ${JSON.stringify(lax)}: the agent's own policy stands otherwise`)
    }
  }
  if (request.onOutputTrip !== undefined) result.onOutputTrip = request.onOutputTrip
  if (request.onToolTrip !== undefined) result.onToolTrip = request.onToolTrip
  return Result.succeed(result)
}
