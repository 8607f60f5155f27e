/**
 * Unified diffs of text files, with Myers' O(ND) algorithm. Written here rather than run as `diff -ruN`: the
 * sandbox diffs a workspace after every command of an RL loop, and doing it in-process from the snapshot it
 * already holds costs no process, no copy of the "before" tree on disk, and works where diffutils is missing.
 * The output is what `diff -u` / `git diff` print (3 lines of context, `\ No newline at end of file`), so
 * `patch -p1` and `git apply` accept it.
 */

const enum Op {
  Equal = 0,
  Delete = 1,
  Insert = 2
}

/** The lines of a text, each with its `\n` (the last one may have none). */
export const splitLines = (text: string): Array<string> => {
  if (text === "") return []
  const lines: Array<string> = []
  let start = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", start)) {
    lines.push(text.slice(start, i + 1))
    start = i + 1
  }
  if (start < text.length) lines.push(text.slice(start))
  return lines
}

/**
 * The shortest edit script turning `a` into `b` (items compared by identity), as a list of ops in order; or
 * `undefined` when it needs more than `maxEdits` edits (the caller then replaces the whole text).
 */
const myers = (a: ArrayLike<number>, b: ArrayLike<number>, maxEdits: number): Array<Op> | undefined => {
  const n = a.length
  const m = b.length
  const max = Math.min(n + m, maxEdits)
  // v[k + offset] = furthest x reached on diagonal k; `trace[d]` keeps diagonals -d..d after step d.
  const offset = max + 1
  const v = new Int32Array(2 * max + 3)
  const trace: Array<Int32Array> = []
  let found = -1
  outer: for (let d = 0; d <= max; d++) {
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!) ? v[offset + k + 1]! : v[offset + k - 1]! + 1
      let y = x - k
      while (x < n && y < m && a[x] === b[y]) {
        x++
        y++
      }
      v[offset + k] = x
      if (x >= n && y >= m) {
        trace.push(v.slice(offset - d, offset + d + 1))
        found = d
        break outer
      }
    }
    trace.push(v.slice(offset - d, offset + d + 1))
  }
  if (found === -1) return undefined
  const ops: Array<Op> = []
  let x = n
  let y = m
  for (let d = found; d > 0; d--) {
    const prev = trace[d - 1]!
    const at = (k: number) => prev[k + d - 1]!
    const k = x - y
    const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1
    const prevX = at(prevK)
    const prevY = prevX - prevK
    while (x > prevX && y > prevY) {
      ops.push(Op.Equal)
      x--
      y--
    }
    ops.push(x === prevX ? Op.Insert : Op.Delete)
    x = prevX
    y = prevY
  }
  while (x > 0 && y > 0) {
    ops.push(Op.Equal)
    x--
    y--
  }
  return ops.reverse()
}

/** Options of `unifiedDiff`. */
export interface DiffOptions {
  /** Lines of context around each change (default 3). */
  readonly context?: number
  /** Past this many edits the files are shown as wholly replaced instead of searching on (default 4000). */
  readonly maxEdits?: number
}

interface Line {
  readonly op: Op
  readonly text: string
}

/** The edit script of two line lists, common prefix and suffix trimmed first (the usual case is a small edit). */
const editLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>, maxEdits: number): Array<Line> => {
  let prefix = 0
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++
  let suffix = 0
  while (
    suffix < a.length - prefix && suffix < b.length - prefix &&
    a[a.length - 1 - suffix] === b[b.length - 1 - suffix]
  ) suffix++
  const midA = a.slice(prefix, a.length - suffix)
  const midB = b.slice(prefix, b.length - suffix)
  // Lines become small integers so the inner loop compares numbers, not strings.
  const ids = new Map<string, number>()
  const idOf = (line: string) => {
    let id = ids.get(line)
    if (id === undefined) {
      id = ids.size
      ids.set(line, id)
    }
    return id
  }
  const idsA = Int32Array.from(midA, idOf)
  const idsB = Int32Array.from(midB, idOf)
  const ops = myers(idsA, idsB, maxEdits) ??
    [...Array<Op>(midA.length).fill(Op.Delete), ...Array<Op>(midB.length).fill(Op.Insert)]
  const lines: Array<Line> = []
  for (let i = 0; i < prefix; i++) lines.push({ op: Op.Equal, text: a[i]! })
  let i = 0
  let j = 0
  for (const op of ops) {
    if (op === Op.Equal) {
      lines.push({ op, text: midA[i++]! })
      j++
    } else if (op === Op.Delete) lines.push({ op, text: midA[i++]! })
    else lines.push({ op, text: midB[j++]! })
  }
  for (let s = a.length - suffix; s < a.length; s++) lines.push({ op: Op.Equal, text: a[s]! })
  return lines
}

const range = (start: number, count: number): string => (count === 1 ? `${start}` : `${start},${count}`)

const prefixes = [" ", "-", "+"] as const

/** The hunks (`@@ … @@` and their lines) of two texts; empty when they are equal. */
export const hunks = (before: string, after: string, options?: DiffOptions): string => {
  const context = options?.context ?? 3
  const lines = editLines(splitLines(before), splitLines(after), options?.maxEdits ?? 4000)
  const out: Array<string> = []
  // Lines of a and b consumed before each entry, to number the hunks.
  let aBefore = 0
  let bBefore = 0
  const aAt: Array<number> = []
  const bAt: Array<number> = []
  for (const line of lines) {
    aAt.push(aBefore)
    bAt.push(bBefore)
    if (line.op !== Op.Insert) aBefore++
    if (line.op !== Op.Delete) bBefore++
  }
  let i = 0
  while (i < lines.length) {
    if (lines[i]!.op === Op.Equal) {
      i++
      continue
    }
    const start = Math.max(0, i - context)
    let lastChange = i
    let j = i + 1
    for (; j < lines.length; j++) {
      if (lines[j]!.op !== Op.Equal) lastChange = j
      else if (j - lastChange > 2 * context) break
    }
    const end = Math.min(lines.length, lastChange + 1 + context)
    let aCount = 0
    let bCount = 0
    for (let k = start; k < end; k++) {
      if (lines[k]!.op !== Op.Insert) aCount++
      if (lines[k]!.op !== Op.Delete) bCount++
    }
    // An empty range is numbered by the line before it, as diff and git do.
    const aStart = aCount === 0 ? aAt[start]! : aAt[start]! + 1
    const bStart = bCount === 0 ? bAt[start]! : bAt[start]! + 1
    out.push(`@@ -${range(aStart, aCount)} +${range(bStart, bCount)} @@\n`)
    for (let k = start; k < end; k++) {
      const line = lines[k]!
      out.push(prefixes[line.op] + line.text)
      if (!line.text.endsWith("\n")) out.push("\n\\ No newline at end of file\n")
    }
    i = end
  }
  return out.join("")
}

/**
 * The unified diff of one file: `before` undefined for a new file (`--- /dev/null`), `after` undefined for a
 * deleted one (`+++ /dev/null`). Empty when nothing changed.
 */
export const unifiedDiff = (
  path: string,
  before: string | undefined,
  after: string | undefined,
  options?: DiffOptions
): string => {
  const body = hunks(before ?? "", after ?? "", options)
  if (body === "") return ""
  const from = before === undefined ? "/dev/null" : `a/${path}`
  const to = after === undefined ? "/dev/null" : `b/${path}`
  return `--- ${from}\n+++ ${to}\n${body}`
}
