/**
 * Decoding of options and outside input into one readable line: a failure becomes `InvalidOptions` (or any error
 * the caller builds from `formatIssue`) that names the module, the field, the rule and the value:
 * `SelfRefine: maxRounds must be an integer >= 1, got 0`. Unknown keys are refused, so a typo such as `maxRound`
 * is not silently ignored. Imports nothing of valet but `AgentError`, so every core module can use it.
 */
import { Cause, Duration, Effect, Exit, Option, References, Schema, SchemaIssue } from "effect"
import { InvalidOptions } from "../AgentError.js"

/** A whole number ≥ `min` (one rule, so the message says both halves: `an integer >= 1`). */
export const IntAtLeast = (min: number) =>
  Schema.Number.check(
    Schema.makeFilter((n: number) => Number.isInteger(n) && n >= min, { expected: `an integer >= ${min}` })
  )

/** A `Duration.Input`: milliseconds, `"5 seconds"`, a `Duration`, `Duration.infinity`. */
export const DurationInput = Schema.declare(
  (u: unknown): u is Duration.Input => {
    try {
      return Option.isSome(Duration.fromInput(u as Duration.Input))
    } catch {
      return false
    }
  },
  { expected: "a duration (milliseconds, \"5 seconds\", a Duration)" }
)

/**
 * A span of time as JSON or YAML carry it: milliseconds, or a duration's text (`"30 seconds"`, `"2 minutes"`): the
 * `Duration.Input`s that are data (the schema has a JSON Schema; `DurationInput`, a declared type, has none).
 */
export const WireDuration = Schema.Union([
  Schema.Number.check(Schema.isGreaterThanOrEqualTo(0)),
  Schema.String.check(Schema.makeFilter((text: string) => Option.isSome(Duration.fromInput(text as Duration.Input)), {
    expected: `a duration such as "30 seconds"`
  }))
])

/** An http(s) URL. */
export const HttpUrl = Schema.String.check(Schema.makeFilter((url: string) => {
  try {
    const parsed = new URL(url)
    return parsed.protocol === "http:" || parsed.protocol === "https:" || `is not an http(s) URL: ${JSON.stringify(url)}`
  } catch {
    return `is not a URL: ${JSON.stringify(url)}`
  }
}))

/** A number in [0, 1]. */
export const UnitInterval = Schema.Number.check(
  Schema.makeFilter((n: number) => n >= 0 && n <= 1, { expected: "a number between 0 and 1" })
)

const article: Record<string, string> = {
  string: "a string",
  number: "a number",
  boolean: "a boolean",
  object: "an object",
  array: "an array",
  function: "a function",
  bigint: "a bigint",
  symbol: "a symbol",
  null: "null",
  undefined: "undefined"
}

/** `["a", "b", 1]` as `a.b[1]`. */
const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (text, key) => typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`,
    ""
  )

/** The value at `path` of `input`, as it would be shown to a person. */
const valueAt = (input: unknown, path: ReadonlyArray<PropertyKey>): { readonly found: boolean; readonly value: unknown } => {
  let current: unknown = input
  for (const key of path) {
    if (current === null || typeof current !== "object" || !(key in current)) return { found: false, value: undefined }
    current = (current as Record<PropertyKey, unknown>)[key]
  }
  return { found: true, value: current }
}

/** A value shown in a message: JSON where it is data, a word where it is not, cut short. */
export const showValue = (value: unknown): string => {
  if (typeof value === "function") return "a function"
  if (value === undefined) return "undefined"
  if (typeof value === "bigint") return `${value}n`
  // JSON would show these as null.
  if (typeof value === "number" && !Number.isFinite(value)) return String(value)
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    // A value nested too deep for JSON is too deep for `String` as well (arrays join their items recursively).
    try {
      text = String(value)
    } catch {
      text = "a value nested too deep to show"
    }
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text
}

/** "Expected string | undefined" as "must be a string". */
const rule = (message: string): string => {
  if (message === "Missing key") return "is required"
  if (message === "Expected no excess property") return "is not a known option"
  const expected = message.startsWith("Expected ") ? message.slice("Expected ".length) : undefined
  if (expected === undefined) return message
  const members = expected.split(" | ").filter((member) => member !== "undefined")
  return `must be ${members.map((member) => article[member] ?? member).join(" or ")}`
}

/**
 * One line per schema issue of `input`, prefixed with `module`: `SelfRefine: maxRounds must be an integer >= 1,
 * got 0`. Several issues are joined with `; `.
 */
export const formatIssue = (module: string, issue: SchemaIssue.Issue, input: unknown): string =>
  `${module}: ${describeIssue(issue, input)}`

/** `formatIssue` without the module: `maxRounds must be an integer >= 1, got 0`. */
export const describeIssue = (issue: SchemaIssue.Issue, input: unknown): string => {
  const issues = SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues
  const lines = issues.map((item) => {
    const path = (item.path ?? []).map((segment) =>
      typeof segment === "object" && segment !== null ? segment.key : segment
    )
    const where = pathText(path)
    const text = rule(item.message)
    const at = valueAt(input, path)
    const got = text === "is required" || text === "is not a known option" || !at.found ? "" : `, got ${showValue(at.value)}`
    return where === "" ? `${text}${got}` : `${where} ${text}${got}`
  })
  return lines.join("; ")
}

/** `formatIssue` for the `SchemaError` a decode failed with. */
export const formatSchemaError = (module: string, error: Schema.SchemaError, input: unknown): string =>
  formatIssue(module, error.issue, input)

/** Decodes `options` with `schema`; a failure is `InvalidOptions` for `module`, naming the offending field. */
export const decode = <S extends Schema.Codec<unknown, unknown, never, never>>(
  module: string,
  schema: S,
  options: unknown
): Effect.Effect<S["Type"], InvalidOptions> =>
  Effect.suspend(() => {
    const exit = Schema.decodeUnknownExit(schema, { onExcessProperty: "error" })(options)
    if (Exit.isSuccess(exit)) return Effect.succeed(exit.value)
    const error = Cause.findErrorOption(exit.cause)
    return Effect.fail(
      new InvalidOptions({
        module,
        message: error._tag === "Some" ? formatSchemaError(module, error.value, options) : `${module}: ${Cause.pretty(exit.cause)}`
      })
    )
  })

/**
 * Runs a constructor's check synchronously: the value, or the `InvalidOptions` thrown. The `makeUnsafe` of every
 * options constructor is this over its `make`, so an architecture can be a module-level value.
 */
export const runUnsafe = <A>(effect: Effect.Effect<A, InvalidOptions>): A => {
  // Its own runtime, so its notes (a deprecated option, said once) go to stderr: stdout may be a protocol's.
  const exit = Effect.runSyncExit(Effect.provideService(effect, References.LogToStderr, true))
  if (Exit.isSuccess(exit)) return exit.value
  const error = Cause.findErrorOption(exit.cause)
  throw error._tag === "Some" ? error.value : Cause.squash(exit.cause)
}

/**
 * `schema`, optional in the options (absent or `undefined`), decoded to `value` when not given: so that
 * `{ maxRounds: settings.maxRounds }` works under `exactOptionalPropertyTypes`.
 */
export const withDefault = <S extends Schema.Constraint>(value: S["Type"]) => (schema: S) =>
  Schema.withDecodingDefaultType<S>(Effect.succeed(value))(schema)

/** A function passed as an option (checked by `typeof` only: its signature is the caller's promise). */
export const FunctionSchema = <F>(what: string) =>
  Schema.declare((u: unknown): u is F => typeof u === "function", { expected: `a function (${what})` })
