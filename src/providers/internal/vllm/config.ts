/**
 * `configs/vllm_actors.yaml`: parsed with `yaml` (keeping line numbers) and decoded with a schema, so a bad file
 * fails with the field and the line that are wrong. A missing file is the single-actor default.
 */
import { Either, ParseResult, Schema } from "effect"
import { LineCounter, parseDocument } from "yaml"

/** How an actor is served: `vllm serve` (OpenAI-compatible paths) or the legacy demo server's `POST /generate`. */
export const Api = Schema.Literal("openai", "generate")
export type Api = typeof Api.Type

const HttpUrl = Schema.String.pipe(
  Schema.filter((url) => {
    try {
      const parsed = new URL(url)
      return parsed.protocol === "http:" || parsed.protocol === "https:" || `not an http(s) URL: ${JSON.stringify(url)}`
    } catch {
      return `not a URL: ${JSON.stringify(url)}`
    }
  })
)

/** One actor, as written in the file (snake_case). */
export const ActorEntry = Schema.Struct({
  name: Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, {
    message: () => "an actor name is letters, digits, '_', '.' and '-'"
  })),
  base_url: HttpUrl,
  /** The served model name; detected from `GET /v1/models` when absent (api `openai`). */
  model: Schema.optional(Schema.String),
  tensor_parallel_size: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 1 }),
  gpu_id: Schema.optionalWith(Schema.Int.pipe(Schema.nonNegative()), { default: () => 0 }),
  api: Schema.optional(Api),
  /** At most this many requests in flight to the actor. */
  max_in_flight: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
export type ActorEntry = typeof ActorEntry.Type

/** The whole file. */
export const PoolFile = Schema.Struct({
  actors: Schema.Array(ActorEntry).pipe(
    Schema.minItems(1, { message: () => "at least one actor is needed" }),
    Schema.filter((actors) => {
      const seen = new Set<string>()
      for (let i = 0; i < actors.length; i++) {
        const name = actors[i]!.name
        if (seen.has(name)) return { path: [i, "name"], message: `the actor name ${JSON.stringify(name)} is used twice` }
        seen.add(name)
      }
      return true
    })
  ),
  timeout_sec: Schema.optionalWith(Schema.Number.pipe(Schema.positive()), { default: () => 60 }),
  max_tokens: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 512 }),
  /** Attempts per call, the first included. */
  max_attempts: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { default: () => 3 })
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

const decode = Schema.decodeUnknownEither(PoolFile, { onExcessProperty: "error" })

/** Parses and decodes the text of a pool file. */
export const parse = (text: string): Either.Either<PoolFile, Problem> => {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, { lineCounter })
  const syntax = doc.errors[0]
  if (syntax !== undefined) {
    const pos = syntax.linePos?.[0]
    return Either.left({
      message: `not valid YAML: ${syntax.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
      ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
    })
  }
  const decoded = decode(doc.toJS() ?? {})
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  const issue = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)[0]!
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
  return Either.left({
    message: issue.message,
    ...(field !== "" ? { field } : {}),
    ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
  })
}
