/**
 * `configs/vllm_actors.yaml`: parsed with `yaml` (keeping line numbers) and decoded with a schema, so a bad file
 * fails with the field and the line that are wrong. A missing file is the single-actor default.
 */
import { Effect, Result, Schema, SchemaIssue } from "effect"
import { LineCounter, parseDocument } from "yaml"

/** How an actor is served: `vllm serve` (OpenAI-compatible paths) or the legacy demo server's `POST /generate`. */
export const Api = Schema.Literals(["openai", "generate"])
export type Api = typeof Api.Type

const HttpUrl = Schema.String.check(Schema.makeFilter((url: string) => {
  try {
    const parsed = new URL(url)
    return parsed.protocol === "http:" || parsed.protocol === "https:" || `not an http(s) URL: ${JSON.stringify(url)}`
  } catch {
    return `not a URL: ${JSON.stringify(url)}`
  }
}))

const ActorName = Schema.String.check(Schema.makeFilter((name: string) =>
  /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name) || "an actor name is letters, digits, '_', '.' and '-'"
))

/** A whole number > 0. */
const PositiveInt = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isInteger(n) && n > 0, { expected: "an integer > 0" })
)

/** A whole number >= 0. */
const NonNegativeInt = Schema.Number.check(
  Schema.makeFilter((n: number) => Number.isInteger(n) && n >= 0, { expected: "an integer >= 0" })
)

const Positive = Schema.Number.check(Schema.makeFilter((n: number) => n > 0, { expected: "a number > 0" }))

/** A key that may be left out, and then decodes to `value`. */
const orDefault = <S extends Schema.Codec<number, number>>(schema: S, value: number) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(value)))

/** One actor, as written in the file (snake_case). */
export const ActorEntry = Schema.Struct({
  name: ActorName,
  base_url: HttpUrl,
  /** The served model name; detected from `GET /v1/models` when absent (api `openai`). */
  model: Schema.optional(Schema.String),
  tensor_parallel_size: orDefault(PositiveInt, 1),
  gpu_id: orDefault(NonNegativeInt, 0),
  api: Schema.optional(Api),
  /** At most this many requests in flight to the actor. */
  max_in_flight: Schema.optional(PositiveInt)
})
export type ActorEntry = typeof ActorEntry.Type

/** The whole file. */
export const PoolFile = Schema.Struct({
  actors: Schema.Array(ActorEntry).check(
    Schema.makeFilter((actors: ReadonlyArray<ActorEntry>) => actors.length >= 1 || "at least one actor is needed"),
    Schema.makeFilter((actors: ReadonlyArray<ActorEntry>) => {
      const seen = new Set<string>()
      for (let i = 0; i < actors.length; i++) {
        const name = actors[i]!.name
        if (seen.has(name)) return { path: [i, "name"], issue: `the actor name ${JSON.stringify(name)} is used twice` }
        seen.add(name)
      }
      return true
    })
  ),
  timeout_sec: orDefault(Positive, 60),
  max_tokens: orDefault(PositiveInt, 512),
  /** Attempts per call, the first included. */
  max_attempts: orDefault(PositiveInt, 3)
})
export type PoolFile = typeof PoolFile.Type

/** The pool when there is no file: one actor `default` at `http://127.0.0.1:8000`. */
export const defaultPool: PoolFile = {
  actors: [{ name: "default", base_url: "http://127.0.0.1:8000", tensor_parallel_size: 1, gpu_id: 0 }],
  timeout_sec: 60,
  max_tokens: 512,
  max_attempts: 3
}

/** Why a file was refused: what, which field (`actors[1].base_url`) and where (1-based line and column). */
export interface Problem {
  readonly message: string
  readonly field?: string
  readonly line?: number
  readonly column?: number
}

const fieldName = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`),
    ""
  )

const decode = Schema.decodeUnknownResult(PoolFile, { onExcessProperty: "error" })

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

/** The first issue of a failed decode: its message and the path of the field it is about. */
const firstIssue = (issue: SchemaIssue.Issue): { readonly message: string; readonly path: ReadonlyArray<PropertyKey> } => {
  const first = formatter(issue).issues[0]
  if (first === undefined) return { message: String(issue), path: [] }
  const path = (first.path ?? []).map((segment) => (typeof segment === "object" && segment !== null ? segment.key : segment))
  return { message: messageOf(first.message), path }
}

const article: Record<string, string> = { string: "a string", number: "a number", boolean: "a boolean", object: "a map", array: "a list" }

/** A schema message as the rule a person reads: "Expected number" → "must be a number". */
const messageOf = (message: string): string => {
  if (message === "Missing key") return "is required"
  if (message === "Expected no excess property" || message.startsWith("Unexpected key")) return "is not a known key"
  if (!message.startsWith("Expected ")) return message
  const members = message.slice("Expected ".length).split(" | ").filter((member) => member !== "undefined")
  return `must be ${members.map((member) => article[member] ?? member).join(" or ")}`
}

/** The value at `path` of `input`, as it is shown in a message (JSON, cut short). */
const shown = (input: unknown, path: ReadonlyArray<PropertyKey>): string | undefined => {
  let current: unknown = input
  for (const key of path) {
    if (current === null || typeof current !== "object" || !(key in current)) return undefined
    current = (current as Record<PropertyKey, unknown>)[key]
  }
  const text = JSON.stringify(current) ?? String(current)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

/** Parses and decodes the text of a pool file. */
export const parse = (text: string): Result.Result<PoolFile, Problem> => {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter })
  const syntax = doc.errors[0]
  if (syntax !== undefined) {
    const pos = syntax.linePos?.[0]
    return Result.fail({
      message: `not valid YAML: ${syntax.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
      ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
    })
  }
  const input: unknown = doc.toJS() ?? {}
  const decoded = decode(input)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  const issue = firstIssue(decoded.failure.issue)
  const value = issue.message.startsWith("must be ") ? shown(input, issue.path) : undefined
  // The node of the field, else of the nearest enclosing one that exists (a missing key: its map).
  let path: ReadonlyArray<PropertyKey> = issue.path
  let node: unknown = undefined
  for (;;) {
    node = path.length === 0 ? doc.contents : doc.getIn(path as Array<unknown>, true)
    if (node !== undefined || path.length === 0) break
    path = path.slice(0, -1)
  }
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range
  const pos = range !== undefined ? lineCounter.linePos(range[0]) : undefined
  const field = fieldName(issue.path)
  return Result.fail({
    message: value !== undefined ? `${issue.message}, got ${value}` : issue.message,
    ...(field !== "" ? { field } : {}),
    ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
  })
}
