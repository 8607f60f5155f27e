import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { hunks, splitLines, unifiedDiff } from "../../../../src/environment/internal/sandbox/diff.js"

/** Applies a unified diff's hunks to `before`, checking every context and removed line. */
const apply = (before: string, diff: string): string => {
  const a = splitLines(before)
  const out: Array<string> = []
  let at = 0
  const lines = diff.split(/(?<=\n)/)
  for (let i = 0; i < lines.length; i++) {
    const header = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@\n$/.exec(lines[i]!)
    if (header === null) continue
    const aStart = Number(header[1])
    const aCount = header[2] === undefined ? 1 : Number(header[2])
    const from = aCount === 0 ? aStart : aStart - 1
    while (at < from) out.push(a[at++]!)
    for (i++; i < lines.length && !lines[i]!.startsWith("@@"); i++) {
      let line = lines[i]!.slice(1)
      if (lines[i + 1]?.startsWith("\\ No newline")) {
        line = line.slice(0, -1)
        i++
      }
      const kind = lines[i]![0] === "\\" ? lines[i - 1]![0] : lines[i]![0]
      if (kind === " " || kind === "-") {
        expect(a[at]).toBe(line)
        at++
      }
      if (kind === " " || kind === "+") out.push(line)
    }
    i--
  }
  while (at < a.length) out.push(a[at++]!)
  return out.join("")
}

const lcs = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  const row = new Array<number>(b.length + 1).fill(0)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = 0
    for (let j = 1; j <= b.length; j++) {
      const up = row[j]!
      row[j] = a[i - 1] === b[j - 1] ? diagonal + 1 : Math.max(row[j]!, row[j - 1]!)
      diagonal = up
    }
  }
  return row[b.length]!
}

/** A deterministic pseudo-random generator, so a failing case can be replayed. */
const random = (seed: number) => () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}

const randomText = (next: () => number, alphabet: number, maxLines: number): string => {
  const n = Math.floor(next() * maxLines)
  const lines = Array.from({ length: n }, () => `line ${Math.floor(next() * alphabet)}\n`)
  const text = lines.join("")
  return next() < 0.2 && text.length > 0 ? text.slice(0, -1) : text
}

describe("diff", () => {
  it("prints a modification with three lines of context, like diff -u", () => {
    const before = "a\nb\nc\nd\ne\nf\ng\nh\n"
    const after = "a\nb\nc\nd\nE\nf\ng\nh\n"
    expect(unifiedDiff("x.txt", before, after)).toBe(
      "--- a/x.txt\n+++ b/x.txt\n@@ -2,7 +2,7 @@\n b\n c\n d\n-e\n+E\n f\n g\n h\n"
    )
  })

  it("uses /dev/null for new and deleted files", () => {
    expect(unifiedDiff("new.py", undefined, "print(1)\n")).toBe(
      "--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+print(1)\n"
    )
    expect(unifiedDiff("old.py", "a\nb\n", undefined)).toBe("--- a/old.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n")
  })

  it("marks a last line without a newline", () => {
    expect(unifiedDiff("f", "a\nb", "a\nb\n")).toBe(
      "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"
    )
  })

  it("is empty for equal texts and keeps far-apart changes in separate hunks", () => {
    expect(unifiedDiff("f", "same\n", "same\n")).toBe("")
    const before = Array.from({ length: 30 }, (_, i) => `${i}\n`).join("")
    const after = before.replace("2\n", "two\n").replace("25\n", "twenty-five\n")
    const out = hunks(before, after)
    expect(out.match(/^@@/gm)).toHaveLength(2)
    expect(out).toContain("@@ -1,6 +1,6 @@\n")
    expect(out).toContain("@@ -23,7 +23,7 @@\n")
  })

  it("round-trips and is minimal on 500 random pairs", () => {
    const next = random(42)
    for (let n = 0; n < 500; n++) {
      const before = randomText(next, 6, 40)
      const after = randomText(next, 6, 40)
      const diff = hunks(before, after)
      expect(apply(before, diff)).toBe(after)
      const changed = diff.split("\n").filter((line) => /^[-+]/.test(line)).length
      const a = splitLines(before)
      const b = splitLines(after)
      expect(changed).toBe(a.length + b.length - 2 * lcs(a, b))
    }
  })

  it("falls back to a whole replacement past maxEdits, still correct", () => {
    const before = Array.from({ length: 200 }, (_, i) => `a${i}\n`).join("")
    const after = Array.from({ length: 200 }, (_, i) => `b${i}\n`).join("")
    const diff = hunks(before, after, { maxEdits: 10 })
    expect(apply(before, diff)).toBe(after)
  })

  it.runIf(hasProgram("patch"))("is accepted by GNU patch", () => {
    const dir = mkdtempSync(join(tmpdir(), "valet-diff-"))
    try {
      const next = random(7)
      for (let n = 0; n < 20; n++) {
        const before = randomText(next, 8, 60)
        const after = randomText(next, 8, 60)
        writeFileSync(join(dir, "f.txt"), before)
        writeFileSync(join(dir, "p.diff"), unifiedDiff("f.txt", before, after) || "")
        if (before !== after) execFileSync("patch", ["-s", "-p1", "-i", "p.diff"], { cwd: dir })
        expect(readFileSync(join(dir, "f.txt"), "utf8")).toBe(after)
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

function hasProgram(name: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}
