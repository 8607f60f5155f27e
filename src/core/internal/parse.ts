/**
 * Parsing of what models write, shared by every architecture: JSON in or out of code fences, scores, `FINAL:`
 * lines, XML-ish tags, list items, and the answer normalizer used for voting and accuracy. Tolerant of how models
 * write, strict in what it returns: each function says when it found nothing instead of guessing.
 *
 * Every function here runs in time linear in what it reads, and reads at most a documented number of characters
 * (the `max…` constants below), because it runs synchronously on the event loop: a model reply built to make a
 * backtracking regex or a restart-at-every-position scan blow up would otherwise freeze the process, and no
 * timeout or wall-clock budget could fire while it did. Hence the rules the code below keeps:
 * - no regex with nested or adjacent unbounded quantifiers over the same characters (`\s*(?:is)?\s*[:=]?\s*`
 *   is cubic in a run of blanks); the few regexes left are anchored or have one quantifier per character class
 *   between literals, and the rest are hand-written scanners that move forward only;
 * - no scan restarted at every candidate position (finding "the first balanced `{…}`" by trying each `{` is
 *   quadratic): one pass finds the candidates, and the work spent on them is budgeted;
 * - no JSON nested deeper than `maxJsonDepth` is returned: `JSON.parse` copes, but `JSON.stringify` and every
 *   recursive walk after it (events, trajectories, schema messages) overflow the stack on a 100k-deep array.
 */
import { Effect, Result, Schema } from "effect"
import { describeIssue } from "./decode.js"
import { parseJsonText } from "./json.js"

// ---------------------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------------------

/**
 * JSON and tags are looked for in the first 1 MiB of a reply. They are what a model writes as its whole answer
 * (a critique, a plan, an action with a file's content, ToolVote's program of up to 50,000 characters), so the
 * start of the reply is the meaningful part; beyond 1 MiB a reply is runaway output, not a structured answer.
 */
export const maxJsonChars = 1024 * 1024

/** JSON nested deeper than this is not returned (see the module comment); models write a few levels. */
export const maxJsonDepth = 100

/**
 * Scores, list items and lessons are read from the first 64 KiB of a reply, `FINAL:` answers and the last line
 * from its first or last 64 KiB: a verdict, a plan or an answer line is short and sits at the start (where the
 * prompts ask for it) or, for the last answer, at the end.
 */
export const maxLineScanChars = 64 * 1024

/**
 * Answers longer than this are compared as written (trimmed), not normalized: normalizing is for short answers
 * (numbers, expressions, a word), and a 64 KiB answer is not one.
 */
export const maxAnswerChars = 64 * 1024

/** A reply longer than this makes the run yield to the event loop before reading it (see `yieldBeforeReading`). */
export const yieldAboveChars = 64 * 1024

/**
 * Yields to the event loop (a macrotask: timers run) before a long reply is read; nothing for a short one. A
 * fiber otherwise yields only every couple of thousand operations, and when each operation handles a reply of a
 * megabyte (parsing it, filling it into the next prompt, recording it) that is hundreds of milliseconds in which no
 * timer, `Effect.timeout` or wall-clock budget can fire. The architectures call this where they read a reply.
 */
export const yieldBeforeReading = (text: string): Effect.Effect<void> => (text.length > yieldAboveChars ? Effect.yieldNow : Effect.void)

// The work spent parsing candidate slices of one text, in characters handed to `JSON.parse`: with nested
// candidates (`{ {…} {…} }`) each character can be in several, so the attempts are bounded, not the candidates.
// Each attempt counts at least `minAttemptChars`: at most 4,096 attempts, a few milliseconds of failed parses.
const parseBudgetChars = 4 * maxJsonChars
const minAttemptChars = 1024
// Fences tried as a whole by `extractJson`: a structured answer is in the first one or two, not the 100,000th.
const maxFences = 64
// Blanks and markup allowed between a label and its number (`score :  **0.8**`), and between a number and its scale.
const maxGap = 32

const head = (text: string, max: number): string => (text.length > max ? text.slice(0, max) : text)
const tail = (text: string, max: number): string => (text.length > max ? text.slice(text.length - max) : text)

// ---------------------------------------------------------------------------------------------------------
// Code fences and JSON
// ---------------------------------------------------------------------------------------------------------

const isWordChar = (c: number): boolean =>
  (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 // 0-9 A-Z a-z _
const isLangChar = (c: number): boolean => isWordChar(c) || c === 45 // and -
const isBlank = (c: number): boolean => c === 32 || c === 9 // space, tab
const isSpace = (c: number): boolean => c === 32 || c === 9 || c === 10 || c === 13 || c === 12 || c === 11 || c === 160
const isDigit = (c: number): boolean => c >= 48 && c <= 57

/**
 * The texts inside ``` code fences, in order (an unclosed last fence runs to the end), at most `limit` of them. A
 * fence's language tag and the blanks and line break after it are not part of its text. Reads the first
 * `maxJsonChars` characters.
 */
export const codeFences = (text: string, limit: number = Number.POSITIVE_INFINITY): Array<string> => {
  const scanned = head(text, maxJsonChars)
  const out: Array<string> = []
  let open = scanned.indexOf("```")
  while (open !== -1 && out.length < limit) {
    let start = open + 3
    while (start < scanned.length && isLangChar(scanned.charCodeAt(start))) start++
    while (start < scanned.length && isBlank(scanned.charCodeAt(start))) start++
    if (scanned.charCodeAt(start) === 13) start++
    if (scanned.charCodeAt(start) === 10) start++
    const close = scanned.indexOf("```", start)
    if (close === -1) {
      out.push(scanned.slice(start))
      break
    }
    out.push(scanned.slice(start, close))
    open = scanned.indexOf("```", close + 3)
  }
  return out
}

/**
 * Whether JSON text nests at most `max` levels of `{`/`[` (strings respected). One pass; the caller parses after.
 */
export const jsonDepthWithin = (text: string, max: number = maxJsonDepth): boolean => {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 123 || c === 91) {
      if (++depth > max) return false
    } else if (c === 125 || c === 93) depth--
  }
  return true
}

/**
 * Whether a JSON value already parsed (a request body's field typed `unknown`) nests at most `max` levels, walked
 * without recursion: `JSON.parse` of a body copes with any depth, but the schema decoders, messages and
 * `JSON.stringify` that then walk the value recursively overflow the stack (a 10,000-deep array is 20 KB).
 */
export const valueDepthWithin = (value: unknown, max: number = maxJsonDepth): boolean => {
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (node === null || typeof node !== "object") continue
    if (depth >= max) return false
    for (const child of Array.isArray(node) ? node : Object.values(node)) stack.push([child, depth + 1])
  }
  return true
}

/** An outside JSON value of any shape, refused (naming the limit) when it nests deeper than `maxJsonDepth` levels. */
export const BoundedJson = Schema.Unknown.check(
  Schema.makeFilter((value: unknown) => valueDepthWithin(value) || `nests deeper than ${maxJsonDepth} levels`)
)

const tryParse = parseJsonText

/**
 * JSON text as a value, bounded: text longer than `maxJsonChars` or nested deeper than `maxJsonDepth` is refused
 * (with the reason) before `JSON.parse` sees it.
 */
export const parseJson = (text: string): Result.Result<unknown, string> => {
  if (text.length > maxJsonChars) return Result.fail(`the JSON is longer than ${maxJsonChars} characters`)
  if (!jsonDepthWithin(text)) return Result.fail(`the JSON nests deeper than ${maxJsonDepth} levels`)
  return tryParse(text)
}

// Whether a bracketed span can be JSON at all, from its first character after blanks: `[1]`, `{"a"…}` can,
// `[x]`, `{not json}` cannot. Spares `JSON.parse` (and its exception) for the brackets of prose.
const canStartJson = (text: string, start: number): boolean => {
  let j = start + 1
  while (j < text.length && isSpace(text.charCodeAt(j))) j++
  const c = text.charCodeAt(j)
  if (text.charCodeAt(start) === 123) return c === 34 || c === 125 // " }
  return c === 34 || c === 123 || c === 91 || c === 93 || c === 45 || isDigit(c) || c === 116 || c === 102 || c === 110 // " { [ ] - 0-9 t f n
}

/**
 * The first balanced `{…}`/`[…]` span of `text` that `keep` lets through and `accept` takes, in order of where
 * spans start, found in one pass: closing brackets of either kind match either opening (JSON.parse judges them), spans that nest more than
 * `maxJsonDepth` levels are skipped (the ones inside them are not), and quotes count only inside brackets — outside
 * they are prose (`it's "fine": {…}`), and a stray one must not hide the JSON after it. Spans are offered a
 * top-level group at a time (all of a group's spans start before the next group's), sorted by start, so a match
 * in the first group ends the scan. Only the innermost `maxJsonDepth + 1` open brackets are remembered (a ring):
 * an outer one is already too deep to be offered.
 */
const firstSpan = <A>(
  text: string,
  keep: (start: number) => boolean,
  accept: (start: number, end: number) => A | undefined
): A | undefined => {
  const size = maxJsonDepth + 1
  const starts = new Int32Array(size)
  // The deepest the stack has been (its length) since the entry was pushed: a span nests `peak - index` levels.
  const peaks = new Int32Array(size)
  let depth = 0
  let inString = false
  let group: Array<readonly [number, number]> = []
  const offer = (): A | undefined => {
    if (group.length > 1) group.sort((a, b) => a[0] - b[0])
    for (const [start, end] of group) {
      const accepted = accept(start, end)
      if (accepted !== undefined) return accepted
    }
    group = []
    return undefined
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
      continue
    }
    if (c === 34) {
      if (depth > 0) inString = true
    } else if (c === 123 || c === 91) {
      const slot = depth % size
      starts[slot] = i
      peaks[slot] = depth + 1
      depth++
    } else if ((c === 125 || c === 93) && depth > 0) {
      depth--
      const slot = depth % size
      const deepest = peaks[slot]!
      // An entry overwritten in the ring holds a peak at least `size` deeper: rejected here, as it should be.
      if (deepest - depth <= maxJsonDepth && keep(starts[slot]!)) group.push([starts[slot]!, i + 1])
      if (depth > 0) {
        const parent = (depth - 1) % size
        if (peaks[parent]! < deepest) peaks[parent] = deepest
      } else {
        const found = offer()
        if (found !== undefined) return found
      }
    }
  }
  return offer()
}

/**
 * The first JSON value of `text` that `take` accepts — the whole text, else a code fence's contents (of the first
 * 64), else a balanced object or array in the text (the earliest start first, so an outer object wins over the
 * ones inside it) — or why there is none: the first reason `take` gave for a value that parsed, else that no JSON
 * parsed. Reads the first `maxJsonChars` characters, offers nothing nested deeper than `maxJsonDepth`, and spends
 * at most a fixed budget on candidate slices (the first few thousand that can be JSON): linear in the text.
 */
const findJson = <A>(
  text: string,
  expect: "object" | "array" | undefined,
  take: (value: unknown) => Result.Result<A, string>
): Result.Result<A, string> => {
  const wanted = (value: unknown): boolean =>
    expect === "object"
      ? value !== null && typeof value === "object" && !Array.isArray(value)
      : expect === "array"
      ? Array.isArray(value)
      : value !== null && typeof value === "object"
  let refused: string | undefined
  const attempt = (json: string): Result.Result<A, string> | undefined => {
    const parsed = tryParse(json)
    if (Result.isFailure(parsed) || !wanted(parsed.success)) return undefined
    const taken = take(parsed.success)
    if (Result.isSuccess(taken)) return taken
    refused ??= taken.failure
    return undefined
  }
  const scanned = head(text, maxJsonChars)
  for (const candidate of [scanned.trim(), ...codeFences(scanned, maxFences).map((fence) => fence.trim())]) {
    if (candidate === "" || !jsonDepthWithin(candidate)) continue
    const taken = attempt(candidate)
    if (taken !== undefined) return taken
  }
  let budget = parseBudgetChars
  const opens = expect === "array" ? 91 : expect === "object" ? 123 : undefined
  const keep = (start: number) => (opens === undefined || scanned.charCodeAt(start) === opens) && canStartJson(scanned, start)
  const found = firstSpan(scanned, keep, (start, end) => {
    if (budget < 0) return undefined
    // A floor per attempt: many small candidates cost their calls (and exceptions), not just their characters.
    budget -= Math.max(end - start, minAttemptChars)
    return attempt(scanned.slice(start, end))
  })
  if (found !== undefined) return found
  if (refused !== undefined) return Result.fail(refused)
  const what = expect === "array" ? "JSON array" : expect === "object" ? "JSON object" : "JSON"
  const cut = text.length > maxJsonChars ? ` (only the first ${maxJsonChars} characters are read)` : ""
  return Result.fail(`no ${what} found${cut} in: ${preview(text)}`)
}

/**
 * The JSON value a model wrote: the whole text, else the contents of a code fence (of the first 64), else the
 * first balanced object or array in the text that parses (the earliest start first, so an outer object wins over
 * the ones inside it). `expect` narrows what counts (an object or an array; default either). Reads the first
 * `maxJsonChars` characters, returns nothing nested deeper than `maxJsonDepth`, and spends at most a fixed budget
 * on candidate slices (the first few thousand that can be JSON), so its time is linear in the text. `Left` says
 * why nothing parsed.
 */
export const extractJson = (text: string, options?: { readonly expect?: "object" | "array" }): Result.Result<unknown, string> =>
  findJson(text, options?.expect, Result.succeed)

/**
 * The first JSON value in the text (found as `extractJson` finds them) that decodes with `schema`: a citation
 * `[1]` before a plan's list does not hide the list. When values parse but none decodes, the failure names what
 * was wrong with the first; otherwise it says no JSON was found.
 */
export const decodeJson = <A, I>(
  schema: Schema.Codec<A, I>,
  text: string,
  options?: { readonly expect?: "object" | "array" }
): Result.Result<A, string> => {
  const decode = Schema.decodeUnknownResult(schema)
  return findJson(text, options?.expect, (value) => Result.mapError(decode(value), (error) => describeIssue(error.issue, value)))
}

// ---------------------------------------------------------------------------------------------------------
// Scores
// ---------------------------------------------------------------------------------------------------------

/** A number as written at `i`: `-`? digits with an optional `.digits`, or `.digits`; `end` is just after it. */
const readNumber = (text: string, i: number): { readonly value: number; readonly end: number; readonly decimal: boolean } | undefined => {
  let j = i
  if (text.charCodeAt(j) === 45) j++ // -
  const digitsStart = j
  while (isDigit(text.charCodeAt(j))) j++
  let decimal = false
  if (text.charCodeAt(j) === 46 && isDigit(text.charCodeAt(j + 1))) { // . digit
    decimal = true
    j++
    while (isDigit(text.charCodeAt(j))) j++
  }
  if (j === digitsStart) return undefined
  return { value: Number(text.slice(i, j)), end: j, decimal }
}

/** Skips up to `maxGap` characters that `skip` accepts. */
const skipGap = (text: string, i: number, skip: (c: number) => boolean): number => {
  const limit = Math.min(text.length, i + maxGap)
  while (i < limit && skip(text.charCodeAt(i))) i++
  return i
}

// Literal words, no quantifier: linear. Global, so `lastIndex` sets where a search starts.
const wordPatterns = new Map(["score", "final"].map((word) => [word, new RegExp(word, "gi")]))

/**
 * Where `word` (`score` or `final`) next occurs from `from`, case-insensitively; -1 when it does not. Not
 * `text.toLowerCase().indexOf(…)`: lowering can change a text's length (`İ` becomes two code units), and the
 * positions found must be the text's own.
 */
const indexOfWord = (text: string, word: "score" | "final", from: number): number => {
  const pattern = wordPatterns.get(word)!
  pattern.lastIndex = from
  return pattern.exec(text)?.index ?? -1
}

/** Whether `word` (lower case) is at `i`, case-insensitively, not followed by a letter or digit. */
const wordAt = (text: string, i: number, word: string): boolean =>
  text.slice(i, i + word.length).toLowerCase() === word && !isWordChar(text.charCodeAt(i + word.length))

/**
 * The scale after a number at `i`: `%`, `/ y`, `out of y`, `(out of y)`. `denominator` is undefined when there is
 * none; `end` is after what was read.
 */
const readScale = (text: string, i: number): { readonly denominator: number | undefined; readonly end: number } => {
  let j = skipGap(text, i, isBlank)
  const c = text.charCodeAt(j)
  if (c === 37) return { denominator: 100, end: j + 1 } // %
  if (c === 47) { // /
    const denominator = readNumber(text, skipGap(text, j + 1, isBlank))
    if (denominator !== undefined && text.charCodeAt(skipGap(text, j + 1, isBlank)) !== 45) {
      return { denominator: denominator.value, end: denominator.end }
    }
    return { denominator: undefined, end: i }
  }
  const parenthesized = c === 40 // (
  if (parenthesized) j = skipGap(text, j + 1, isBlank)
  if (wordAt(text, j, "out")) {
    j = skipGap(text, j + 3, isBlank)
    if (wordAt(text, j, "of")) {
      j = skipGap(text, j + 2, isBlank)
      const denominator = text.charCodeAt(j) === 45 ? undefined : readNumber(text, j)
      if (denominator !== undefined) {
        let end = denominator.end
        if (parenthesized) {
          const close = skipGap(text, end, isBlank)
          if (text.charCodeAt(close) === 41) end = close + 1
        }
        return { denominator: denominator.value, end }
      }
    }
  }
  return { denominator: undefined, end: i }
}

/** A score as written at `i` (a number and its scale), checked: a value in [0, 1], or why not. */
const scoreAt = (text: string, i: number): { readonly score: Result.Result<number, string>; readonly decimal: boolean; readonly scaled: boolean; readonly end: number } | undefined => {
  const number = readNumber(text, i)
  if (number === undefined) return undefined
  const scale = readScale(text, number.end)
  const written = text.slice(i, scale.end).replace(/\s+/g, " ")
  const value = scale.denominator === undefined ? number.value : number.value / scale.denominator
  const score = scale.denominator === 0
    ? Result.fail(`the score ${cutShort(written)} divides by zero`)
    : !Number.isFinite(value) || value < 0 || value > 1
    ? Result.fail(
      scale.denominator === undefined
        ? `the score ${cutShort(written)} is outside [0, 1] and has no scale (write it as 0.7, 7/10 or 70%)`
        : `the score ${cutShort(written)} is outside [0, 1]`
    )
    : Result.succeed(value)
  return { score, decimal: number.decimal, scaled: scale.denominator !== undefined, end: scale.end }
}

const cutShort = (text: string): string => (text.length <= 40 ? text : `${text.slice(0, 39)}…`)

// Between `score` and its number: blanks, markdown emphasis and quotes (`**Score:** 0.8`, `"score": 0.8`).
const isLabelFiller = (c: number): boolean => isSpace(c) || c === 42 || c === 95 || c === 34 || c === 39 // * _ " '

/**
 * A score in [0, 1] from a model's text: the first `score` label followed by a number — `score: 0.42`,
 * `score=0.4`, `Score is 0.9`, `**Score:** 0.8`, `final_score: 1` — read with its scale: `8/10`, `7 out of 10`,
 * `4 (out of 5)`, `85%`. With `fallbackToAnyNumber`, when no label has a number, the first number in the text
 * that has a decimal point or a scale (`I'd say 0.65`, `7/10`) — `Step 3 of 4` has neither.
 *
 * `Left` says why there is no score: none found, or the one found is not a score — a value outside [0, 1] with
 * no scale (`score: 7`), a fraction above 1 or over zero (`score: 5/0`). Never clamped: a model that wrote
 * `score: 7` meant some other scale, and reading it as 1 would approve whatever it judged. Reads the first
 * `maxLineScanChars` characters, in linear time.
 */
export const parseScore = (text: string, options?: { readonly fallbackToAnyNumber?: boolean }): Result.Result<number, string> => {
  const scanned = head(text, maxLineScanChars)
  let at = indexOfWord(scanned, "score", 0)
  while (at !== -1) {
    const before = at === 0 ? 32 : scanned.charCodeAt(at - 1)
    // `final_score` counts; `underscore` and `scores` do not.
    if ((!isWordChar(before) || before === 95) && !isWordChar(scanned.charCodeAt(at + 5))) {
      let j = skipGap(scanned, at + 5, isLabelFiller)
      if (wordAt(scanned, j, "is") || wordAt(scanned, j, "of")) j = skipGap(scanned, j + 2, isSpace)
      const sign = scanned.charCodeAt(j)
      if (sign === 58 || sign === 61) j = skipGap(scanned, j + 1, isLabelFiller) // : =
      const found = scoreAt(scanned, j)
      if (found !== undefined) return found.score
    }
    at = indexOfWord(scanned, "score", at + 5)
  }
  if (options?.fallbackToAnyNumber === true) {
    for (let i = 0; i < scanned.length; i++) {
      const c = scanned.charCodeAt(i)
      const startsNumber = isDigit(c) || (c === 45 && isDigit(scanned.charCodeAt(i + 1)))
      // A number starts here only if it is not the middle of another (`12`, `1.5`, `v2`).
      if (!startsNumber || (i > 0 && (isWordChar(scanned.charCodeAt(i - 1)) || scanned.charCodeAt(i - 1) === 46))) continue
      const found = scoreAt(scanned, i)
      if (found === undefined) continue
      if (found.decimal || found.scaled) return found.score
      i = found.end - 1
    }
  }
  return Result.fail(`no score found in: ${preview(text)}`)
}

/**
 * A score a model gave as a JSON value, checked: a number in [0, 1], or a string holding one with its scale
 * (`"0.7"`, `"7/10"`, `"70%"`). `Left` names `what` and why (missing, not a number, outside [0, 1]).
 */
export const unitScore = (value: unknown, what: string): Result.Result<number, string> => {
  if (value === undefined || value === null) return Result.fail(`the ${what} is missing`)
  if (typeof value === "number") {
    return Number.isFinite(value) && value >= 0 && value <= 1
      ? Result.succeed(value)
      : Result.fail(`the ${what} ${value} is outside [0, 1]`)
  }
  if (typeof value === "string") {
    const trimmed = head(value, maxGap * 4).trim()
    const found = scoreAt(trimmed, 0)
    if (found !== undefined && found.end === trimmed.length) {
      return Result.mapError(found.score, (reason) => `the ${what}: ${reason.replace(/^the score /, "")}`)
    }
  }
  return Result.fail(`the ${what} ${preview(typeof value === "string" ? value : JSON.stringify(value) ?? "", 40)} is not a number`)
}

// ---------------------------------------------------------------------------------------------------------
// Lines, answers, lists, tags
// ---------------------------------------------------------------------------------------------------------

/**
 * The answer after `FINAL:` (case-insensitive, blanks allowed before the colon) to the end of its line, on the
 * first or last line that has a non-empty one; `undefined` when there is none. Reads the first (for `first`) or
 * last (for `last`) `maxLineScanChars` characters.
 */
export const finalAnswer = (text: string, occurrence: "first" | "last" = "first"): string | undefined => {
  const scanned = occurrence === "first" ? head(text, maxLineScanChars) : tail(text, maxLineScanChars)
  let found: string | undefined
  let at = indexOfWord(scanned, "final", 0)
  while (at !== -1) {
    let j = at + 5
    while (j < scanned.length && isSpace(scanned.charCodeAt(j))) j++
    if (scanned.charCodeAt(j) === 58) { // :
      let lineEnd = scanned.indexOf("\n", j)
      if (lineEnd === -1) lineEnd = scanned.length
      const answer = scanned.slice(j + 1, lineEnd).trim()
      if (answer !== "") {
        if (occurrence === "first") return answer
        found = answer
      }
      // Another `FINAL:` on the same line is part of this answer, as a line-wise reading would have it.
      at = indexOfWord(scanned, "final", lineEnd)
    } else {
      // Blanks (line breaks too) were skipped up to `j`; no `final` starts inside them.
      at = indexOfWord(scanned, "final", Math.max(j, at + 5))
    }
  }
  return found
}

/** The last line with something on it, trimmed; `undefined` for blank text. Reads the last `maxLineScanChars`. */
export const lastNonEmptyLine = (text: string): string | undefined => {
  const scanned = tail(text, maxLineScanChars)
  let end = scanned.length
  while (end > 0) {
    const start = scanned.lastIndexOf("\n", end - 1)
    const line = scanned.slice(start + 1, end).trim()
    if (line !== "") return line
    end = start === -1 ? 0 : start
  }
  return undefined
}

// A bullet (`-`, `*`, `•`, `+`), a number (`1.`, `2)`, `(3)`, `4:`) or `Step 5:` at the start of a line. A number
// needs a space after it, so `1.5 cups` keeps its number. Linear: anchored, and no two quantifiers share a class
// without a literal between them.
const itemMarker = /^(?:[-*•+]\s+|\(\d+\)\s*|\d+[.):]\s+|step\s+\d+\s*[:.)-]\s*)/i

/**
 * The items of a list a model wrote as lines: one per non-empty line, bullets and numbering removed. When some
 * lines are bulleted or numbered, only those are items (a preamble such as `Here is the plan:` is not one). Code
 * fence lines are skipped. Reads the first `maxLineScanChars` characters.
 */
export const listItems = (text: string): Array<string> => {
  const lines = head(text, maxLineScanChars).split("\n").map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("```"))
  const marked = lines.filter((line) => itemMarker.test(line))
  return (marked.length > 0 ? marked : lines).map((line) => line.replace(itemMarker, "").trim()).filter((line) => line !== "")
}

/**
 * The items of a numbered or bulleted list with their continuation lines folded in (`1. Use a\n   bigger pan` is
 * one item); lines before the first item are a preamble and dropped. No item at all: `undefined`. Code fence lines
 * are skipped. Reads the first `maxLineScanChars` characters.
 */
export const foldedListItems = (text: string): Array<string> | undefined => {
  const items: Array<string> = []
  for (const raw of head(text, maxLineScanChars).split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("```")) continue
    if (itemMarker.test(line)) items.push(line.replace(itemMarker, "").trim())
    else if (items.length > 0) items[items.length - 1] = `${items[items.length - 1]} ${line}`.trim()
  }
  const kept = items.filter((item) => item !== "")
  return kept.length > 0 ? kept : undefined
}

const opensAnyTag = (text: string): boolean => {
  let at = text.indexOf("<")
  while (at !== -1) {
    let j = at + 1
    const first = text.charCodeAt(j)
    if ((first >= 65 && first <= 90) || (first >= 97 && first <= 122) || first === 95) {
      j++
      while (j < text.length && isLangChar(text.charCodeAt(j))) j++
      if (text.charCodeAt(j) === 62) return true // >
    }
    at = text.indexOf("<", j)
  }
  return false
}

/**
 * The contents of `<tag>…</tag>` (first occurrence), trimmed. A block whose closing tag is missing at the very end
 * of the text is accepted (servers strip stop strings such as `</action>`) when no other tag opens after it.
 * `undefined` when the tag does not open. Reads the first `maxJsonChars` characters (tags wrap JSON).
 */
export const extractTag = (text: string, tag: string): string | undefined => {
  const scanned = head(text, maxJsonChars)
  const open = `<${tag}>`
  const start = scanned.indexOf(open)
  if (start === -1) return undefined
  const from = start + open.length
  const end = scanned.indexOf(`</${tag}>`, from)
  if (end !== -1) return scanned.slice(from, end).trim()
  const rest = scanned.slice(from)
  return opensAnyTag(rest) ? undefined : rest.trim()
}

// A plain decimal number: sign, digits with an optional fraction (or only a fraction), optional exponent. Anchored
// at both ends with one way to match each character, so it is linear (unlike `\d+\.?\d*`, quadratic on digits
// followed by anything else).
const plainNumber = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?$/i
const thousands = /,(?=\d{3}(?!\d))/g

/** One layer of wrapping removed: `$…$`, `\boxed{…}`, `\(…\)`, a final period. The same text when there is none. */
const unwrapOnce = (text: string): string => {
  if (text.length >= 2 && text.startsWith("$") && text.endsWith("$")) {
    let start = 0
    let end = text.length
    while (start < end && text.charCodeAt(start) === 36) start++
    while (end > start && text.charCodeAt(end - 1) === 36) end--
    return text.slice(start, end).trim()
  }
  if (text.startsWith("\\boxed") && text.endsWith("}")) {
    let j = 6
    while (j < text.length && isSpace(text.charCodeAt(j))) j++
    if (text.charCodeAt(j) === 123 && j < text.length - 1) return text.slice(j + 1, -1).trim()
  }
  if (text.length >= 4 && text.startsWith("\\(") && text.endsWith("\\)")) return text.slice(2, -2).trim()
  // One sentence-ending period ("42." → "42"); an ellipsis stays.
  if (text.length >= 2 && text.endsWith(".") && text.charCodeAt(text.length - 2) !== 46) return text.slice(0, -1).trim()
  return text
}

// Wrappers removed at most: `$\boxed{42}.$` is three; each layer is a pass over the text, so they are bounded.
const maxUnwraps = 8

/**
 * Normalizes an answer for voting and accuracy: whitespace collapsed, surrounding `$` and `\boxed{…}` and `\(…\)`
 * removed (up to 8 layers), a trailing period dropped, numbers canonical (`42.0` = `42`, `1,000` = `1000`).
 * An answer longer than `maxAnswerChars` is only trimmed. Linear time.
 */
export const normalizeAnswer = (answer: string): string => {
  const trimmed = answer.trim()
  if (trimmed.length > maxAnswerChars) return trimmed
  let text = trimmed.replace(/\s+/g, " ")
  for (let i = 0; i < maxUnwraps; i++) {
    const next = unwrapOnce(text)
    if (next === text) break
    text = next
  }
  const numeric = text.replace(thousands, "")
  if (plainNumber.test(numeric)) {
    const n = Number(numeric)
    if (Number.isFinite(n)) return String(n)
  }
  return text
}

/** The start of a text with whitespace collapsed, for error messages and events. Reads a bounded prefix. */
export const preview = (text: string, max = 200): string => {
  // Collapsing whitespace can only shorten: a prefix of 4× the limit always holds enough.
  const flat = head(text, max * 4 + 8).replace(/\s+/g, " ").trim()
  return flat.length <= max && text.length <= max * 4 + 8 ? JSON.stringify(flat) : `${JSON.stringify(flat.slice(0, max))}…`
}

/** The parsers of `Architecture.parse`. */
export const toolkit = {
  /** JSON in model text (fences and prose around it tolerated, size and depth bounded), decoded with a schema. */
  json: decodeJson,
  /** The JSON value in model text, not decoded. */
  jsonValue: extractJson,
  /** A score: `score: 0.8`, `85%`, `7/10`, a bare number in [0, 1]. */
  score: parseScore,
  /** A value as a score in [0, 1], or why not. */
  unitScore,
  /** The answer of a `FINAL: <answer>` line. */
  finalAnswer,
  /** The last line with text. */
  lastNonEmptyLine,
  /** The items of a numbered or bulleted list. */
  listItems,
  /** List items with their continuation lines folded in, or `undefined` when there is no list. */
  foldedListItems,
  /** The text inside `<tag>…</tag>` (a closing tag missing at the very end tolerated). */
  tag: extractTag,
  /** An answer normalized for voting: whitespace, `$`, `\boxed{}`, canonical numbers. */
  normalizeAnswer,
  /** The start of a text, for messages. */
  preview
} as const
