/**
 * Parser time on adversarial model replies: how long each parser of model text takes on inputs built to make a
 * backtracking regex or a restart-at-every-position scan blow up (a run of blanks after `score`, 60,000 `{`, a
 * `FINAL:` line of 60,000 digits, 100k-deep `[[[…`, 1 MiB of one character, runs of backticks, `<tag>` repeated,
 * plans of 100k lines). A parser that is not linear freezes the event loop for the whole parse, so no timeout
 * can stop it: each case group runs in a child process that is killed after a time limit, and a parser that did
 * not finish is reported at the limit, marked `(timed out)`, and a fresh process goes on with the next one; one
 * that throws (a stack overflow on deep nesting) is marked `(threw)`.
 * Each parser runs once per input (these inputs are large: one run is the measure).
 *
 *   npx tsx bench/parsers.ts [--quick] [--timeout <seconds per parser>]
 *
 * The cases are the same in both modes (each takes milliseconds once the parsers are linear); `--quick` only
 * lowers the limit from 20 s to 10 s.
 *
 * Before issue 12's fix (same machine, 2 cores): `score` + 3,000 blanks 8.8–9.0 s in every score parser, + 5,000
 * blanks > 20 s (killed); 60,000 `{` 5.2–5.6 s in every JSON reader; a `FINAL:` line of 60,000 digits 7.5 s in
 * answer extraction; 100k unclosed `[` 15–16 s in the plan reader; 1 MiB of `{` or `[` > 20 s (killed); a 100k-deep
 * `[[…]]` plan threw `RangeError` (stack overflow); 42 of the 253 cells over 50 ms. After: every cell under 30 ms.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as ActorCritic from "../src/architectures/ActorCritic.js"
import * as Plans from "../src/architectures/internal/plan.js"
import * as Reflexion from "../src/architectures/Reflexion.js"
import * as Parse from "../src/core/internal/parse.js"
import * as ActorLoopParse from "../src/rollouts/internal/actorLoop.js"
import * as Evidence from "../src/architectures/internal/ensemble/evidence.js"
import * as Protocol from "../src/architectures/internal/toolVote/protocol.js"
import { type Row, writeReport } from "./support/report.js"

const script = fileURLToPath(import.meta.url)
const root = fileURLToPath(new URL("..", import.meta.url))

/** Every parser of model text, as the architectures call it. */
const parsers: Record<string, (text: string) => unknown> = {
  parseScore: (text) => Parse.parseScore(text),
  "parseScore (any number)": (text) => Parse.parseScore(text, { fallbackToAnyNumber: true }),
  extractJson: (text) => Parse.extractJson(text),
  codeFences: (text) => Parse.codeFences(text),
  "finalAnswer (first)": (text) => Parse.finalAnswer(text, "first"),
  "finalAnswer (last)": (text) => Parse.finalAnswer(text, "last"),
  lastNonEmptyLine: (text) => Parse.lastNonEmptyLine(text),
  listItems: (text) => Parse.listItems(text),
  extractTag: (text) => Parse.extractTag(text, "action"),
  normalizeAnswer: (text) => Parse.normalizeAnswer(text),
  "ActorCritic.parseCritique": (text) => ActorCritic.parseCritique(text),
  "Reflexion.parseEvaluation": (text) => Reflexion.parseEvaluation(text),
  "Reflexion.parseLesson": (text) => Reflexion.parseLesson(text),
  "Ensemble judge": (text) => Evidence.parseJudgement(text, true),
  "Ensemble critic": (text) => Evidence.parseCritique(text),
  "PlanAndExecute plan": (text) => Plans.parse(text, 8),
  "ActorLoop blocks": (text) => ActorLoopParse.parseOutput(text, undefined),
  "ToolVote turn": (text) => Protocol.parseTurn(text),
  "Evaluate answer": (text) => Parse.normalizeAnswer(Parse.finalAnswer(text, "last") ?? text.trim())
}
const all = Object.keys(parsers)
const scores = ["parseScore", "parseScore (any number)", "ActorCritic.parseCritique", "Reflexion.parseEvaluation", "Ensemble judge"]
const json = ["extractJson", "ActorCritic.parseCritique", "Ensemble judge", "Ensemble critic", "PlanAndExecute plan", "ActorLoop blocks"]
const MiB = 1024 * 1024

interface Case {
  readonly id: string
  readonly label: string
  readonly input: () => string
  readonly parsers: ReadonlyArray<string>
}

// The cases first (each with the parsers it reaches), then 1 MiB of one character through every parser.
const cases: ReadonlyArray<Case> = [
  { id: "blanks3k", label: "'score' + 3,000 spaces", input: () => `score${" ".repeat(3000)}`, parsers: scores },
  { id: "blanks5k", label: "'score' + 5,000 spaces", input: () => `score${" ".repeat(5000)}`, parsers: scores },
  { id: "braces", label: "60,000 '{'", input: () => "{".repeat(60_000), parsers: json },
  {
    id: "finalDigits",
    label: "'FINAL: ' + 60,000 digits + 'x'",
    input: () => `FINAL: ${"1".repeat(60_000)}x`,
    parsers: ["finalAnswer (first)", "normalizeAnswer", "Evaluate answer", "ToolVote turn"]
  },
  { id: "nestOpen", label: "100k '[' (unclosed)", input: () => "[".repeat(100_000), parsers: json },
  { id: "nestBalanced", label: "100k-deep [[…]]", input: () => "[".repeat(100_000) + "]".repeat(100_000), parsers: [...json, "ToolVote turn"] },
  { id: "backticks", label: "100k '```x' fences", input: () => "```x".repeat(100_000), parsers: ["codeFences", "extractJson", "listItems", "PlanAndExecute plan"] },
  { id: "tags", label: "'<action>' × 100k", input: () => "<action>".repeat(100_000), parsers: ["extractTag", "ActorLoop blocks"] },
  {
    id: "plan",
    label: "plan of 100k lines",
    input: () => Array.from({ length: 100_000 }, (_, i) => `${i + 1}. [step] do part ${i + 1}`).join("\n"),
    parsers: ["PlanAndExecute plan", "listItems", "extractJson"]
  },
  { id: "lesson", label: "'lesson' + 30,000 spaces + 'x'", input: () => `lesson${" ".repeat(30_000)}x`, parsers: ["Reflexion.parseLesson"] },
  { id: "dollars", label: "'$' × 30,000 + 'x'", input: () => `${"$".repeat(30_000)}x`, parsers: ["normalizeAnswer"] },
  ...[" ", "a", "1", "{", "[", "`", "<", "$", ".", "\n", "/"].map((char): Case => ({
    id: `mib${char.charCodeAt(0)}`,
    label: `1 MiB of ${JSON.stringify(char)}`,
    input: () => char.repeat(MiB),
    parsers: all
  }))
]

/** Worker: times `case:parser` pairs in order, one JSON line per pair as it finishes. */
const worker = (pairs: ReadonlyArray<string>) => {
  const inputs = new Map<string, string>()
  for (const pair of pairs) {
    const [id, index] = pair.split(":") as [string, string]
    const kase = cases.find((c) => c.id === id)!
    const parser = kase.parsers[Number(index)]!
    let input = inputs.get(id)
    if (input === undefined) {
      inputs.clear()
      input = kase.input()
      inputs.set(id, input)
    }
    const started = performance.now()
    try {
      parsers[parser]!(input)
      console.log(JSON.stringify({ pair, ms: performance.now() - started }))
    } catch (error) {
      console.log(JSON.stringify({ pair, threw: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }))
    }
  }
}

/**
 * Runs the pairs in a child process killed after `timeoutMs` without progress; the pair it was on is reported
 * at the limit and a new process goes on with the next one (a hung parser cannot be interrupted in-process).
 */
const measure = (pairs: ReadonlyArray<string>, timeoutMs: number) => {
  const times = new Map<string, number | "timeout" | "threw">()
  const errors = new Map<string, string>()
  let remaining = pairs
  while (remaining.length > 0) {
    let out: string
    let killed = false
    try {
      out = execFileSync(process.execPath, ["--import", "tsx", script, "--worker", remaining.join(",")], {
        cwd: root,
        encoding: "utf8",
        timeout: timeoutMs,
        killSignal: "SIGKILL",
        maxBuffer: 16 * MiB,
        stdio: ["ignore", "pipe", "inherit"]
      })
    } catch (error) {
      // Killed at the time limit, or the parser threw: keep what it printed before.
      out = String((error as { stdout?: unknown }).stdout ?? "")
      killed = (error as { signal?: unknown }).signal === "SIGKILL"
    }
    for (const line of out.split("\n")) {
      if (!line.startsWith("{")) continue
      const { ms, pair, threw } = JSON.parse(line) as { pair: string; ms?: number; threw?: string }
      times.set(pair, ms ?? "threw")
      if (threw !== undefined) errors.set(pair, threw)
    }
    const next = remaining.findIndex((pair) => !times.has(pair))
    if (next === -1) break
    // The limit is per parser: one that had the process to itself timed out; else it gets a fresh process.
    if (next === 0 || !killed) {
      times.set(remaining[next]!, killed ? "timeout" : "threw")
      process.stderr.write(`  parsers: ${remaining[next]} ${killed ? "timed out" : "threw"}\n`)
      remaining = remaining.slice(next + 1)
      continue
    }
    remaining = remaining.slice(next)
  }
  const rows: Array<Row> = []
  const notes: Array<string> = []
  for (const pair of pairs) {
    const [id, index] = pair.split(":") as [string, string]
    const kase = cases.find((c) => c.id === id)!
    const parser = kase.parsers[Number(index)]!
    const time = times.get(pair)!
    if (time === "timeout") notes.push(`${parser} on ${kase.label}: did not finish within ${timeoutMs / 1000} s`)
    if (time === "threw") notes.push(`${parser} on ${kase.label}: threw ${errors.get(pair) ?? "(the process died)"}`)
    rows.push({
      framework: parser,
      measure: `${kase.label}${time === "timeout" ? " (timed out)" : time === "threw" ? " (threw)" : ""}`,
      value: typeof time === "number" ? time : time === "timeout" ? timeoutMs : Number.NaN,
      unit: "ms"
    })
  }
  return { rows, notes }
}

/** Runs every case and writes `bench/results/parsers.json`. */
export const main = (quick: boolean, timeoutSeconds?: number) => {
  const pairs = cases.flatMap((kase) => kase.parsers.map((_, i) => `${kase.id}:${i}`))
  const timeoutMs = (timeoutSeconds ?? (quick ? 10 : 20)) * 1000
  const { notes, rows } = measure(pairs, timeoutMs)
  const slowest = rows.reduce((a, b) => (b.value > a.value || Number.isNaN(a.value) ? b : a))
  return writeReport({
    name: "parsers",
    description: `parser time on adversarial model replies (ms, one run each; a parser is stopped after ${timeoutMs / 1000} s)`,
    rows,
    notes: [...notes, `slowest: ${slowest.framework} on ${slowest.measure}: ${slowest.value.toFixed(1)} ms`]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") worker(args[1]!.split(","))
else if (import.meta.url === `file://${process.argv[1]}`) {
  const at = args.indexOf("--timeout")
  main(args.includes("--quick"), at === -1 ? undefined : Number(args[at + 1]))
}
