/**
 * A YAML file read for decoding: parsed with `yaml` keeping line numbers, so that a schema failure, or any later
 * check of the decoded value, can name the field (`agents.helper.architecture`) and its line and column. Shared by
 * the vLLM pool file and `valet.yaml`.
 *
 * Files come from outside, so reading and parsing are bounded: `readFile` refuses a file larger than its cap before
 * reading it (and never reads past the cap, for a device or a file that grows), and `parse` refuses aliases that
 * expand without end (a "billion laughs" file) — both as a `Problem`, never a thrown error or an exhausted heap.
 */
import { Effect, FileSystem, Result, Schema, SchemaIssue, Stream } from "effect"
import { type Document, LineCounter, parseDocument } from "yaml"

/** Why a file was refused: what, which field (`actors[1].base_url`) and where (1-based line and column). */
/**
 * A configuration file (a `valet.yaml`, a vLLM pool file) that cannot be read or is not valid: one line naming the
 * file, and where known the line and column, the key and what is wrong with it
 * (`valet.yaml:4:17: server.port must be an integer 0-65535, got 99999`).
 */
export class ConfigFileError extends Schema.TaggedError<ConfigFileError>()("ConfigFileError", {
  path: Schema.String,
  detail: Schema.String,
  field: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Number),
  column: Schema.optional(Schema.Number)
}) {
  override get message(): string {
    const where = this.line !== undefined ? `${this.path}:${this.line}:${this.column ?? 1}` : this.path
    return `${where}: ${this.field !== undefined ? `${this.field} ` : ""}${this.detail}`
  }
}

export interface Problem {
  readonly message: string
  readonly field?: string
  readonly line?: number
  readonly column?: number
}

/** A parsed file: its plain value, and the position of any field in it. */
export interface Parsed {
  readonly value: unknown
  /** The problem `message` about the field at `path` (or the nearest enclosing field the file has). */
  readonly problemAt: (path: ReadonlyArray<PropertyKey>, message: string) => Problem
}

/** `["a", "b", 1]` as `a.b[1]`. */
export const fieldName = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>(
    (out, key) => (typeof key === "number" ? `${out}[${key}]` : out === "" ? String(key) : `${out}.${String(key)}`),
    ""
  )

const locate = (doc: Document, lineCounter: LineCounter, path: ReadonlyArray<PropertyKey>) => {
  // The node of the field, else of the nearest enclosing one that exists (a missing key: its map).
  let at = path
  let node: unknown = undefined
  for (;;) {
    node = at.length === 0 ? doc.contents : doc.getIn(at as Array<unknown>, true)
    if (node !== undefined || at.length === 0) break
    at = at.slice(0, -1)
  }
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range
  return range !== undefined ? lineCounter.linePos(range[0]) : undefined
}

/**
 * How many times aliases may be expanded in all, an alias inside an anchor counting as many times as that anchor is
 * used (`yaml`'s `maxAliasCount`, and its default): one anchor used by 99 agents passes; nine levels of nine
 * aliases each (a "billion laughs" file, 9^9 expansions) fail at the second level.
 */
export const maxAliasCount = 100

/** Parses YAML text; a syntax error is a `Problem` with its line. An empty file is `{}`. */
export const parse = (text: string): Result.Result<Parsed, Problem> => {
  const lineCounter = new LineCounter()
  let doc: Document
  let value: unknown
  try {
    doc = parseDocument(text, { lineCounter })
    const syntax = doc.errors[0]
    if (syntax !== undefined) {
      const pos = syntax.linePos?.[0]
      return Result.fail({
        message: `not valid YAML: ${syntax.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
        ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
      })
    }
    value = doc.toJS({ maxAliasCount }) ?? {}
  } catch (error) {
    // `yaml` throws (a ReferenceError) when aliases expand past `maxAliasCount`; anything else it throws is
    // refused the same way, as a problem of the file.
    const message = error instanceof Error ? error.message : String(error)
    return Result.fail({
      message: /alias count/i.test(message)
        ? `refused: its aliases (*name) expand more than ${maxAliasCount} times in all (a "billion laughs" file expands them billions of times)`
        : `not valid YAML: ${message.split("\n")[0]}`
    })
  }
  return Result.succeed({
    value,
    problemAt: (path, message) => {
      const pos = locate(doc, lineCounter, path)
      const field = fieldName(path)
      return {
        message,
        ...(field !== "" ? { field } : {}),
        ...(pos !== undefined ? { line: pos.line, column: pos.col } : {})
      }
    }
  })
}

/**
 * The text of the file at `path`, refused as a `Problem` when it is not there, is not a file, or holds more than
 * `maxBytes`: the size is looked at before reading, and at most `maxBytes + 1` bytes are ever read (a device such
 * as `/dev/zero` says size 0 and never ends).
 */
export const readFile = (
  path: string,
  limit: {
    readonly maxBytes: number
    /** What the file is, for the message: `a valet.yaml`. */
    readonly what: string
  }
): Effect.Effect<string, Problem, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const unreadable = (error: { readonly message: string; readonly reason?: { readonly _tag: string } }): Problem => ({
      message: error.reason?._tag === "NotFound" ? "no such file" : `cannot read the file: ${error.message}`
    })
    const info = yield* fs.stat(path).pipe(Effect.mapError(unreadable))
    if (info.type === "Directory") return yield* Effect.fail<Problem>({ message: "is a directory, not a file" })
    const { maxBytes, what } = limit
    const tooLarge = (size: string): Problem => ({
      message: `is ${size}, more than the ${formatBytes(maxBytes)} (${maxBytes} bytes) ${what} may hold`
    })
    if (info.size > BigInt(maxBytes)) return yield* Effect.fail(tooLarge(`${info.size} bytes`))
    const chunks: Array<Uint8Array> = []
    let read = 0
    yield* fs.stream(path, { bytesToRead: maxBytes + 1 }).pipe(
      Stream.runForEach((chunk) =>
        Effect.sync(() => {
          chunks.push(chunk)
          read += chunk.length
        })
      ),
      Effect.mapError(unreadable)
    )
    if (read > maxBytes) return yield* Effect.fail(tooLarge(`more than ${maxBytes} bytes`))
    return new TextDecoder().decode(Buffer.concat(chunks, read))
  })

const formatBytes = (bytes: number): string =>
  bytes >= 1024 * 1024 ? `${+(bytes / 1024 / 1024).toFixed(1)} MiB` : bytes >= 1024 ? `${+(bytes / 1024).toFixed(1)} KiB` : `${bytes} bytes`

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

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
  // JSON has no Infinity or NaN (YAML's .inf, .nan): shown as JavaScript writes them, not as null.
  const text = typeof current === "number" && !Number.isFinite(current) ? String(current) : JSON.stringify(current) ?? String(current)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

/** Decodes a parsed file with `schema` (unknown keys refused); the first issue is the problem. */
export const decode = <S extends Schema.Codec<unknown, unknown, never, never>>(
  schema: S,
  parsed: Parsed
): Result.Result<S["Type"], Problem> => {
  const decoded = Schema.decodeUnknownResult(schema, { onExcessProperty: "error" })(parsed.value)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  const first = formatter(decoded.failure.issue).issues[0]
  if (first === undefined) return Result.fail({ message: String(decoded.failure.issue) })
  const path = (first.path ?? []).map((segment) => (typeof segment === "object" && segment !== null ? segment.key : segment))
  const message = messageOf(first.message)
  const value = message.startsWith("must be ") ? shown(parsed.value, path) : undefined
  return Result.fail(parsed.problemAt(path, value !== undefined ? `${message}, got ${value}` : message))
}

/** `parse` then `decode`. */
export const parseAndDecode = <S extends Schema.Codec<unknown, unknown, never, never>>(
  schema: S,
  text: string
): Result.Result<S["Type"], Problem> => Result.flatMap(parse(text), (parsed) => decode(schema, parsed))
