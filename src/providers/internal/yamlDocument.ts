/**
 * A YAML file read for decoding: parsed with `yaml` keeping line numbers, so that a schema failure, or any later
 * check of the decoded value, can name the field (`agents.helper.architecture`) and its line and column. Shared by
 * the vLLM pool file and `valet.yaml`.
 */
import { Result, Schema, SchemaIssue } from "effect"
import { type Document, LineCounter, parseDocument } from "yaml"

/** Why a file was refused: what, which field (`actors[1].base_url`) and where (1-based line and column). */
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

/** Parses YAML text; a syntax error is a `Problem` with its line. An empty file is `{}`. */
export const parse = (text: string): Result.Result<Parsed, Problem> => {
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
  return Result.succeed({
    value: doc.toJS() ?? {},
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
  const text = JSON.stringify(current) ?? String(current)
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
