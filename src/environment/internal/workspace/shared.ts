/**
 * What both workspace layers share, so they answer alike (one conformance suite runs against both): the path checks
 * (the sandbox's own, `checkRelativePath`), the numbering of `read`, the rules of `edit`, glob matching and the line
 * search of `grep`.
 */
import { posix } from "node:path"
import { checkRelativePath, PathRefused } from "../sandbox/workspace.js"
import type { Edit, GlobOptions, GrepOptions, Lines, Match, ReadOptions } from "./types.js"
import { WorkspaceError } from "./types.js"

/** Lines `read` gives when no `limit` is asked. */
export const defaultReadLimit = 2_000
/** A line longer than this is cut in `read`'s answer. */
export const maxLineChars = 2_000
/** A `grep` match's text is cut at this length. */
export const maxMatchChars = 500
/** Paths `glob` and matches `grep` answer when no `limit` is asked. */
export const defaultFindLimit = 1_000
/** Files larger than this are not read (`too_large`) nor searched. */
export const maxFileBytes = 10 * 1024 * 1024

const refusedError = (refused: PathRefused): WorkspaceError =>
  new WorkspaceError({ reason: refused.reason === "unsafe_task_id" ? "invalid_path" : refused.reason, path: refused.path, message: refused.message })

/** A file's path, checked and normalized (`a/./b` → `a/b`), or why it is refused. */
export const checkFile = (path: string): string | WorkspaceError => {
  const checked = checkRelativePath(path)
  return checked instanceof PathRefused ? refusedError(checked) : checked
}

/** A directory's path, where `""` and `"."` (and an omitted one) are the root, answered as `""`. */
export const checkDirectory = (path: string | undefined): string | WorkspaceError => {
  if (path === undefined || path === "" || path === "." || path === "./") return ""
  const checked = checkRelativePath(path)
  if (checked instanceof PathRefused) {
    // `a/..`-free paths that name the root (`./.`) are the root, not a refusal.
    return checked.reason === "invalid_path" && !path.includes("\0") ? "" : refusedError(checked)
  }
  return checked
}

/** The path of `name` inside `directory` (`""` is the root). */
export const join = (directory: string, name: string): string => (directory === "" ? name : `${directory}/${name}`)

/** Whether `path` is `directory` or inside it. */
export const isWithin = (path: string, directory: string): boolean =>
  directory === "" || path === directory || path.startsWith(`${directory}/`)

/** An error. */
export const fail = (reason: WorkspaceError["reason"], path: string, message: string, occurrences?: number): WorkspaceError =>
  new WorkspaceError({ reason, path, message, ...(occurrences !== undefined ? { occurrences } : {}) })

const positive = (value: number | undefined, name: string, fallback: number, path: string): number | WorkspaceError => {
  if (value === undefined) return fallback
  if (!Number.isInteger(value) || value < 1) return fail("invalid_argument", path, `${name} must be an integer >= 1, got ${value}`)
  return value
}

/** The lines of a text, without the empty string after a last newline. */
export const linesOf = (text: string): Array<string> => {
  if (text === "") return []
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  return lines.map((line) => (line.endsWith("\r") ? line.slice(0, -1) : line))
}

/** `read`'s answer from a file's text. */
export const numbered = (path: string, text: string, options: ReadOptions | undefined): Lines | WorkspaceError => {
  const offset = positive(options?.offset, "offset", 1, path)
  if (offset instanceof WorkspaceError) return offset
  const limit = positive(options?.limit, "limit", defaultReadLimit, path)
  if (limit instanceof WorkspaceError) return limit
  const lines = linesOf(text)
  if (lines.length === 0) return { path, content: "", startLine: 0, endLine: 0, totalLines: 0 }
  if (offset > lines.length) {
    return fail("invalid_argument", path, `offset ${offset} is past the end of ${path}, which has ${lines.length} line${lines.length === 1 ? "" : "s"}`)
  }
  const shown = lines.slice(offset - 1, offset - 1 + limit)
  const content = shown.map((line, i) => {
    const cut = line.length > maxLineChars ? `${line.slice(0, maxLineChars)}… [${line.length - maxLineChars} more characters]` : line
    return `${String(offset + i).padStart(6)}\t${cut}`
  }).join("\n")
  return { path, content, startLine: offset, endLine: offset + shown.length - 1, totalLines: lines.length }
}

const count = (text: string, search: string): number => {
  let found = 0
  for (let at = text.indexOf(search); at !== -1; at = text.indexOf(search, at + search.length)) found++
  return found
}

/** `edit` on a file's text: the new text and how many replacements, or why it is refused. */
export const applyEdit = (path: string, text: string, edit: Edit): { readonly text: string; readonly replacements: number } | WorkspaceError => {
  if (edit.oldString === "") return fail("invalid_argument", path, `the string to replace in ${path} is empty: give the exact text to replace (write_file writes a whole file)`)
  if (edit.oldString === edit.newString) return fail("invalid_argument", path, `the string to replace in ${path} and its replacement are the same: nothing would change`)
  const occurrences = count(text, edit.oldString)
  if (occurrences === 0) {
    return fail("string_not_found", path, `the string to replace was not found in ${path} (it must match exactly, whitespace and indentation included): ${preview(edit.oldString)}`, 0)
  }
  if (occurrences > 1 && edit.replaceAll !== true) {
    return fail(
      "string_not_unique",
      path,
      `the string to replace occurs ${occurrences} times in ${path}: give more surrounding text to make it unique, or replace all of them: ${preview(edit.oldString)}`,
      occurrences
    )
  }
  // split/join: `replace` would read `$&` and the like in the new string as patterns.
  return { text: text.split(edit.oldString).join(edit.newString), replacements: occurrences }
}

const preview = (text: string): string => JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text)

/** A glob pattern, checked: relative, no `..`, no NUL. Answers the pattern or why it is refused. */
export const checkPattern = (pattern: string): string | WorkspaceError => {
  if (pattern === "" || pattern.includes("\0")) return fail("invalid_argument", pattern, `the glob pattern ${JSON.stringify(pattern)} is empty or contains a NUL byte`)
  if (pattern.startsWith("/")) return fail("absolute_path", pattern, `the glob pattern ${JSON.stringify(pattern)} is absolute: give a pattern relative to the workspace, like "src/**/*.py"`)
  if (pattern.split("/").includes("..")) return fail("parent_path", pattern, `the glob pattern ${JSON.stringify(pattern)} contains '..': it could leave the workspace`)
  const costly = costlyGlob(pattern)
  if (costly !== undefined) return fail("invalid_argument", pattern, `the glob pattern ${JSON.stringify(pattern.length > 200 ? `${pattern.slice(0, 200)}…` : pattern)} ${costly}`)
  return pattern.startsWith("./") ? pattern.slice(2) : pattern
}

/** The longest glob pattern taken. */
export const maxPatternChars = 1_000
/** The most `*` wildcards in one segment of a pattern (`**` alone is a segment of its own). */
export const maxStarsPerSegment = 2
/** The most patterns a pattern's braces may expand to. */
export const maxBraceAlternatives = 64

/**
 * Why a glob pattern would cost too much to match, or undefined. The matcher (`path.matchesGlob`, minimatch) runs
 * synchronously on the event loop: an extglob `*(a|a)c` against a 29-character name took 22 s, three `*` of one
 * segment against a 200-character name 0.6 s (four: 22 s), a brace range `{1..100000}` did not end in 20 s, two brace
 * groups of 120 alternatives took 2 s per path. A model writes these patterns (and a file it read may ask it to), and
 * one call held every other run of the process.
 */
const costlyGlob = (pattern: string): string | undefined => {
  if (pattern.length > maxPatternChars) return `is longer than ${maxPatternChars} characters`
  if (/[?*+@!]\(/.test(pattern)) return "uses an extglob (?( *( +( @( !( ): give a plain glob (* ? ** [abc] {a,b})"
  let alternatives = 1
  let depth = 0
  let commas = 0
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === "\\") i++
    else if (c === "{") {
      if (depth > 0) return "nests braces: give one level of {a,b}"
      depth = 1
      commas = 0
    } else if (c === "}" && depth > 0) {
      depth = 0
      alternatives *= commas + 1
      if (alternatives > maxBraceAlternatives) return `expands to more than ${maxBraceAlternatives} patterns`
    } else if (c === "," && depth > 0) commas++
    else if (c === "." && depth > 0 && pattern[i + 1] === ".") return "has a brace range ({1..9}): list the alternatives ({1,2,3})"
  }
  for (const segment of pattern.split("/")) {
    if (segment === "**") continue
    const stars = segment.match(/\*+/g)?.length ?? 0
    if (stars > maxStarsPerSegment) return `has ${stars} * wildcards in the segment ${JSON.stringify(segment)}: at most ${maxStarsPerSegment} per segment`
  }
  return undefined
}

/** Whether a file's path (relative to the directory searched) matches a checked pattern. */
export const matches = (relative: string, pattern: string): boolean => posix.matchesGlob(relative, pattern)

/** The files of `paths` (in order) under `directory` whose path from it matches the pattern, as `glob` answers. */
export const globOf = (
  paths: Iterable<string>,
  directory: string,
  pattern: string,
  options: GlobOptions | undefined
): { readonly paths: ReadonlyArray<string>; readonly truncated: boolean } | WorkspaceError => {
  const limit = positive(options?.limit, "limit", defaultFindLimit, pattern)
  if (limit instanceof WorkspaceError) return limit
  const found: Array<string> = []
  for (const path of paths) {
    if (!isWithin(path, directory) || path === directory) continue
    if (!matches(directory === "" ? path : path.slice(directory.length + 1), pattern)) continue
    if (found.length === limit) return { paths: found, truncated: true }
    found.push(path)
  }
  return { paths: found, truncated: false }
}

/** `grep`'s options checked: the limit and a matcher for one line. */
export const grepMatcher = (text: string, options: GrepOptions | undefined): { readonly limit: number; readonly test: (line: string) => boolean; readonly glob: string | undefined } | WorkspaceError => {
  if (text === "") return fail("invalid_argument", text, "the text to search for is empty")
  const limit = positive(options?.limit, "limit", defaultFindLimit, text)
  if (limit instanceof WorkspaceError) return limit
  const glob = options?.glob === undefined ? undefined : checkPattern(options.glob)
  if (glob instanceof WorkspaceError) return glob
  if (options?.ignoreCase === true) {
    const lower = text.toLowerCase()
    return { limit, glob, test: (line) => line.toLowerCase().includes(lower) }
  }
  return { limit, glob, test: (line) => line.includes(text) }
}

/** Whether a text looks binary (a NUL byte in its first 8 KiB): `grep` skips such files. */
export const isBinary = (text: string): boolean => text.slice(0, 8192).includes("\0")

/** The matching lines of one file, appended to `into` up to `limit`; answers whether the limit cut it. */
export const grepText = (
  path: string,
  text: string,
  test: (line: string) => boolean,
  into: Array<Match>,
  limit: number
): boolean => {
  if (isBinary(text)) return false
  const lines = linesOf(text)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (!test(line)) continue
    if (into.length === limit) return true
    into.push({ path, line: i + 1, text: line.length > maxMatchChars ? `${line.slice(0, maxMatchChars)}…` : line })
  }
  return false
}

/** Whether `relative` (a file's path from the directory searched) passes `grep`'s glob, if any. */
export const passesGlob = (relative: string, glob: string | undefined): boolean =>
  glob === undefined || matches(relative, glob) || (!glob.includes("/") && matches(posix.basename(relative), glob))
