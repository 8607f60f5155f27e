/**
 * Parsing of what models write, shared by every architecture: JSON in or out of code fences, scores, `FINAL:`
 * lines, XML-ish tags, and the answer normalizer used for voting and accuracy. Tolerant of how models write,
 * strict in what it returns: each function says when it found nothing instead of guessing.
 */
import { Result, Schema } from "effect"
import { describeIssue } from "./decode.js"

const fencePattern = /```[a-zA-Z0-9_-]*[ \t]*\r?\n?([\s\S]*?)```/g

/** The texts inside ``` code fences, in order (an unclosed last fence runs to the end). */
export const codeFences = (text: string): Array<string> => {
  const out: Array<string> = []
  for (const match of text.matchAll(fencePattern)) out.push(match[1]!)
  const opened = (text.match(/```/g) ?? []).length
  if (opened % 2 === 1) {
    const last = text.lastIndexOf("```")
    out.push(text.slice(last + 3).replace(/^[a-zA-Z0-9_-]*[ \t]*\r?\n?/, ""))
  }
  return out
}

/** The first balanced `{…}` or `[…]` starting at `start`, strings and escapes respected. */
const balancedAt = (text: string, start: number): string | undefined => {
  const open = text[start]
  const close = open === "{" ? "}" : "]"
  let depth = 0
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === "\"") inString = false
      continue
    }
    if (c === "\"") inString = true
    else if (c === open || (c === "{" || c === "[")) depth++
    else if (c === close || c === "}" || c === "]") {
      depth--
      if (depth === 0) return text.slice(start, i + 1)
    }
  }
  return undefined
}

const tryParse = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (error) {
    return Result.fail(error instanceof Error ? error.message : String(error))
  }
}

/**
 * The JSON value a model wrote: the whole text, else the contents of a code fence, else the first balanced
 * object or array in the text. `Left` says why nothing parsed.
 */
export const extractJson = (text: string, options?: { readonly expect?: "object" | "array" }): Result.Result<unknown, string> => {
  const wanted = (value: unknown): boolean =>
    options?.expect === "object"
      ? value !== null && typeof value === "object" && !Array.isArray(value)
      : options?.expect === "array"
      ? Array.isArray(value)
      : value !== null && typeof value === "object"
  const candidates = [text.trim(), ...codeFences(text).map((fence) => fence.trim())]
  for (const candidate of candidates) {
    const parsed = tryParse(candidate)
    if (Result.isSuccess(parsed) && wanted(parsed.success)) return parsed
  }
  for (const source of candidates) {
    for (let i = 0; i < source.length; i++) {
      const c = source[i]
      if ((c === "{" && options?.expect !== "array") || (c === "[" && options?.expect !== "object")) {
        const slice = balancedAt(source, i)
        if (slice === undefined) continue
        const parsed = tryParse(slice)
        if (Result.isSuccess(parsed) && wanted(parsed.success)) return parsed
      }
    }
  }
  const what = options?.expect === "array" ? "a JSON array" : options?.expect === "object" ? "a JSON object" : "JSON"
  return Result.fail(`no ${what} found in: ${preview(text)}`)
}

/** `extractJson` then a schema decode; a failure names what was wrong. */
export const decodeJson = <A, I>(
  schema: Schema.Codec<A, I>,
  text: string,
  options?: { readonly expect?: "object" | "array" }
): Result.Result<A, string> =>
  Result.flatMap(extractJson(text, options), (value) =>
    Result.mapError(
      Schema.decodeUnknownResult(schema)(value),
      (error) => describeIssue(error.issue, value)
    ))

const scorePattern = /\bscore\b\s*(?:is|of)?\s*[:=]?\s*(-?\d+(?:\.\d+)?)(\s*%|\s*\/\s*(\d+(?:\.\d+)?))?/i
const numberPattern = /(-?\d+(?:\.\d+)?)(\s*%|\s*\/\s*(\d+(?:\.\d+)?))?/

const scaled = (match: RegExpExecArray): number => {
  const value = Number(match[1])
  if (match[2]?.trim() === "%") return value / 100
  if (match[3] !== undefined) return value / Number(match[3])
  return value
}

/** Clamps a score to [0, 1]. */
export const clamp01 = (n: number): number => (Number.isNaN(n) ? 0 : Math.min(1, Math.max(0, n)))

/**
 * A score in [0, 1] from a model's text: `score: 0.42`, `score=0.4`, `Score: 8/10`, `score 85%`, else (when
 * `fallbackToAnyNumber`) the first number in the text with a decimal point, `n/m` or `%`. `undefined` when
 * there is none. Clamped.
 */
export const parseScore = (text: string, options?: { readonly fallbackToAnyNumber?: boolean }): number | undefined => {
  const labelled = scorePattern.exec(text)
  if (labelled !== null) return clamp01(scaled(labelled))
  if (options?.fallbackToAnyNumber === true) {
    const pattern = new RegExp(numberPattern.source, "g")
    for (const match of text.matchAll(pattern)) {
      if (match[1]!.includes(".") || match[2] !== undefined) return clamp01(scaled(match as RegExpExecArray))
    }
  }
  return undefined
}

const finalPattern = /FINAL\s*:[ \t]*(.*)/gi

/**
 * The answer after `FINAL:` (case-insensitive), on the first or last line that has a non-empty one; `undefined`
 * when there is none.
 */
export const finalAnswer = (text: string, occurrence: "first" | "last" = "first"): string | undefined => {
  let found: string | undefined
  for (const match of text.matchAll(finalPattern)) {
    const answer = match[1]!.trim()
    if (answer === "") continue
    if (occurrence === "first") return answer
    found = answer
  }
  return found
}

/** The last line with something on it, trimmed; `undefined` for blank text. */
export const lastNonEmptyLine = (text: string): string | undefined => {
  const lines = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== "")
  return lines.at(-1)
}

// A bullet (`-`, `*`, `•`, `+`), a number (`1.`, `2)`, `(3)`, `4:`) or `Step 5:` at the start of a line. A number
// needs a space after it, so `1.5 cups` keeps its number.
const itemMarker = /^(?:[-*•+]\s+|\(\d+\)\s*|\d+[.):]\s+|step\s+\d+\s*[:.)-]\s*)/i

/**
 * The items of a list a model wrote as lines: one per non-empty line, bullets and numbering removed. When some
 * lines are bulleted or numbered, only those are items (a preamble such as `Here is the plan:` is not one). Code
 * fence lines are skipped.
 */
export const listItems = (text: string): Array<string> => {
  const lines = text.split(/\r?\n/).map((line) => line.trim()).filter((line) => line !== "" && !line.startsWith("```"))
  const marked = lines.filter((line) => itemMarker.test(line))
  return (marked.length > 0 ? marked : lines).map((line) => line.replace(itemMarker, "").trim()).filter((line) => line !== "")
}

/**
 * The contents of `<tag>…</tag>` (first occurrence). A block whose closing tag is missing at the very end of the
 * text is accepted (servers strip stop strings such as `</action>`). `undefined` when the tag does not open.
 */
export const extractTag = (text: string, tag: string): string | undefined => {
  const open = `<${tag}>`
  const start = text.indexOf(open)
  if (start === -1) return undefined
  const from = start + open.length
  const end = text.indexOf(`</${tag}>`, from)
  if (end !== -1) return text.slice(from, end).trim()
  // No closing tag: accept it only when no other tag opens after it, i.e. the block runs to the end.
  const rest = text.slice(from)
  return /<[a-zA-Z_][\w-]*>/.test(rest) ? undefined : rest.trim()
}

/**
 * Normalizes an answer for voting and accuracy: whitespace collapsed, surrounding `$` and `\boxed{…}` removed, a
 * trailing period dropped, numbers canonical (`42.0` = `42`, `1,000` = `1000`).
 */
export const normalizeAnswer = (answer: string): string => {
  let text = answer.trim().replace(/\s+/g, " ")
  for (let changed = true; changed;) {
    changed = false
    const before = text
    if (text.startsWith("$") && text.endsWith("$") && text.length >= 2) text = text.replace(/^\$+|\$+$/g, "").trim()
    const boxed = /^\\boxed\s*\{([\s\S]*)\}$/.exec(text)
    if (boxed !== null) text = boxed[1]!.trim()
    if (/^\\\(([\s\S]*)\\\)$/.test(text)) text = text.slice(2, -2).trim()
    // One sentence-ending period ("42." → "42"); an ellipsis stays.
    if (/[^.]\.$/.test(text)) text = text.slice(0, -1).trim()
    changed = text !== before
  }
  const numeric = text.replace(/,(?=\d{3}\b)/g, "")
  if (/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(numeric)) {
    const n = Number(numeric)
    if (Number.isFinite(n)) return String(n)
  }
  return text
}

/** The start of a text, for error messages. */
export const preview = (text: string, max = 200): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? JSON.stringify(flat) : `${JSON.stringify(flat.slice(0, max))}…`
}
