/**
 * A long conversation on a thread under a small window (DESIGN §14): 500 scripted turns (quick: 100) on one thread
 * in a SQLite file, each `Agent.run(agent, question, { thread })` on a model with a 16,384-token window — questions
 * of 15 to 60 words, answers of 60 to 250, and every fourth turn a `search_docs` call whose result is 3 to 8 hits of
 * JSON (1 to 3 KB) — with compaction on its defaults (at 80 % of the window, the last 8 messages kept whole).
 *
 * Every request the model receives is counted with o200k_base (gpt-tokenizer), answers' and summaries' alike. Two
 * cells: compaction measuring with that tokenizer in context (`valet/GptTokenizer`), and with the budget's estimate
 * (no tokenizer). The bench FAILS (exit 1) when, with the tokenizer, a request goes over the window. It reports the
 * largest request, the summary calls and their tokens, and the whole conversation's size for scale.
 *
 *   npm run build && npx tsx bench/conversation.ts [--quick]
 */
import { Effect, Layer, Schema } from "effect"
import { encode } from "gpt-tokenizer/encoding/o200k_base"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Compaction, Model, ScriptedModel, Threads, Tool } from "valet"
import * as GptTokenizer from "valet/GptTokenizer"
import * as SqliteClient from "valet/SqliteClient"
import { type Row, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const turns = quick ? 100 : 500
const window = 16_384
const dir = mkdtempSync(join(tmpdir(), "valet-bench-conversation-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))

// ---------------------------------------------------------------------------------------------------------
// The script: deterministic text of realistic sizes
// ---------------------------------------------------------------------------------------------------------

/** mulberry32: the same conversation on every run. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const words = (
  "the plan budget release schedule review team customer invoice contract server database query index cache latency " +
  "request response error retry timeout deploy rollback migration schema table column report chart quarter revenue cost " +
  "margin forecast risk owner deadline milestone sprint ticket bug feature test coverage build pipeline branch merge " +
  "because however therefore after before while during since until although unless whether which that this those " +
  "should would could might must will can may need want expect prefer suggest recommend decide agree confirm check " +
  "first second next last final early late quickly carefully roughly exactly about around nearly almost only also"
).split(" ")

const textOf = (next: () => number, count: number): string => {
  const out: Array<string> = []
  for (let i = 0; i < count; i++) {
    const word = words[Math.floor(next() * words.length)]!
    // Now and then a number or an identifier, as real conversations have.
    const r = next()
    out.push(r < 0.04 ? String(Math.floor(next() * 100_000)) : r < 0.06 ? `${word}_${Math.floor(next() * 1000)}` : word)
    if (i % 14 === 13) out[out.length - 1] += "."
  }
  return `${out.join(" ")}.`
}

const between = (next: () => number, low: number, high: number) => low + Math.floor(next() * (high - low + 1))

const questionOf = (turn: number) => {
  const next = random(turn * 7919)
  return `Question ${turn}: ${textOf(next, between(next, 15, 60))}?`
}
const answerOf = (turn: number) => {
  const next = random(turn * 104_729)
  return `Answer ${turn}: ${textOf(next, between(next, 60, 250))}`
}
const hitsOf = (query: string, turn: number) => {
  const next = random(turn * 15_485_863)
  return JSON.stringify(Array.from({ length: between(next, 3, 8) }, (_, i) => ({
    id: `doc-${turn}-${i}`,
    title: textOf(next, between(next, 4, 9)),
    snippet: textOf(next, between(next, 25, 50)),
    score: Math.round(next() * 1000) / 1000,
    query
  })))
}
const isToolTurn = (turn: number) => turn % 4 === 0

const search = Tool.make({
  name: "search_docs",
  description: "Searches the team's documents",
  parameters: Schema.Struct({ query: Schema.String, turn: Schema.Number }),
  handler: ({ query, turn }) => Effect.succeed(hitsOf(query, turn))
})

const agent = Agent.make({
  name: "assistant",
  instructions: "You are the team's planning assistant. Answer from the conversation and the documents; search them when unsure.",
  tools: [search]
})

// ---------------------------------------------------------------------------------------------------------
// Counting what the model receives
// ---------------------------------------------------------------------------------------------------------

const counted = new WeakMap<object, number>()
// By text too: each turn loads the thread's messages as new objects (the bench's counting is not what is measured).
const texts = new Map<string, number>()
const tokensOf = (text: string) => {
  if (text === "") return 0
  let tokens = texts.get(text)
  if (tokens === undefined) {
    tokens = encode(text, { disallowedSpecial: new Set() }).length
    texts.set(text, tokens)
  }
  return tokens
}
/** A request's tokens as compaction counts them: each message's content and tool calls, 4 each, the tools. */
const requestTokens = (request: Model.Request): number => {
  let sum = 0
  for (const message of request.messages ?? []) {
    let tokens = counted.get(message)
    if (tokens === undefined) {
      tokens = tokensOf(Model.textOf(message.content)) + (message.role === "assistant" && message.toolCalls !== undefined ? tokensOf(JSON.stringify(message.toolCalls)) : 0) + 4
      counted.set(message, tokens)
    }
    sum += tokens
  }
  return sum + (request.tools !== undefined && request.tools.length > 0 ? tokensOf(JSON.stringify(request.tools)) : 0)
}

interface Cell {
  readonly largest: number
  readonly largestAnswer: number
  readonly summaryCalls: number
  readonly summaryInput: number
  readonly summaryOutput: number
  readonly answerCalls: number
  readonly threadMessages: number
  readonly conversationTokens: number
  readonly summaryThrough: number
  readonly ms: number
}

/** The whole conversation on a fresh thread, with or without a tokenizer in context. */
const conversation = (tokenizer: boolean): Promise<Cell> => {
  let turn = 0
  let largest = 0
  let largestAnswer = 0
  let summaryCalls = 0
  let summaryInput = 0
  let summaryOutput = 0
  let answerCalls = 0
  const script: ScriptedModel.Script = (request) => {
    const tokens = requestTokens(request)
    largest = Math.max(largest, tokens)
    if (request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions) {
      summaryCalls++
      summaryInput += tokens
      // A summary of a few hundred words: the first words of each question it reads, at most 350 words.
      const transcript = Model.textOf(request.messages[1]?.content ?? "")
      const asked = [...transcript.matchAll(/Question (\d+): ((?:\S+ ){1,10})/g)].map((match) => `turn ${match[1]}: ${match[2]!.trim()}`)
      const summary = `Earlier: ${asked.join("; ")}`.split(" ").slice(0, 350).join(" ")
      summaryOutput += tokensOf(summary)
      return summary
    }
    answerCalls++
    largestAnswer = Math.max(largestAnswer, tokens)
    const last = request.messages!.at(-1)!
    return isToolTurn(turn) && last.role === "user"
      ? { toolCalls: [{ name: "search_docs", arguments: { query: questionOf(turn).slice(0, 60), turn } }] }
      : answerOf(turn)
  }
  const store = Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, `${tokenizer ? "tokenizer" : "estimate"}.db`) })))
  const counting = tokenizer ? GptTokenizer.layer({ encoding: "o200k_base" }) : Layer.empty
  return Effect.runPromise(Effect.gen(function*() {
    const thread = yield* Threads.create({ owner: "bench" })
    const started = performance.now()
    for (turn = 1; turn <= turns; turn++) {
      const result = yield* Agent.run(agent, questionOf(turn), { thread: thread.id })
      if (result.output !== answerOf(turn)) return yield* Effect.die(new Error(`turn ${turn}: answered ${JSON.stringify(result.output.slice(0, 60))}`))
    }
    const ms = performance.now() - started
    const page = yield* Threads.messages(thread.id, { limit: 1000 })
    let all = page.messages.length
    let conversationTokens = requestTokens({ messages: page.messages })
    for (let before = page.start; before > 0;) {
      const older = yield* Threads.messages(thread.id, { before, limit: 1000 })
      all += older.messages.length
      conversationTokens += requestTokens({ messages: older.messages })
      before = older.start
    }
    const summary = yield* Threads.summary(thread.id)
    return {
      largest,
      largestAnswer,
      summaryCalls,
      summaryInput,
      summaryOutput,
      answerCalls,
      threadMessages: all,
      conversationTokens,
      summaryThrough: summary?.through ?? 0,
      ms
    }
  }).pipe(
    Effect.provide(ScriptedModel.layer(script)),
    Effect.provide(Compaction.layer({ contextWindow: window })),
    Effect.provide(counting),
    Effect.provide(store)
  ))
}

const cells: Array<readonly [string, Cell]> = [
  ["o200k tokenizer", await conversation(true)],
  ["estimate", await conversation(false)]
]

const rows: Array<Row> = []
for (const [label, cell] of cells) {
  const row = (measure: string, unit: string, value: number): Row => ({ framework: "valet", measure: `${label}: ${measure}`, unit, value })
  rows.push(
    row("largest request (any call, by o200k)", "tokens", cell.largest),
    row("largest answer request (by o200k)", "tokens", cell.largestAnswer),
    row("summary calls", "calls", cell.summaryCalls),
    row("turns per summary call", "turns", cell.summaryCalls === 0 ? turns : turns / cell.summaryCalls),
    row("summary calls' input", "tokens", cell.summaryInput),
    row("summary calls' output", "tokens", cell.summaryOutput),
    row("answer calls", "calls", cell.answerCalls),
    row("the whole conversation (thread, by o200k)", "tokens", cell.conversationTokens),
    row("thread messages", "messages", cell.threadMessages),
    row("wall time of the turns", "ms", cell.ms)
  )
}

const header = ["counting", "turns", "messages", "conversation", "largest req", "largest answer", "summary calls", "turns/summary", "summary in", "summary out", "ms"]
const lines = [header, ...cells.map(([label, cell]) => [
  label,
  String(turns),
  String(cell.threadMessages),
  cell.conversationTokens.toLocaleString("en"),
  cell.largest.toLocaleString("en"),
  cell.largestAnswer.toLocaleString("en"),
  String(cell.summaryCalls),
  (cell.summaryCalls === 0 ? turns : turns / cell.summaryCalls).toFixed(1),
  cell.summaryInput.toLocaleString("en"),
  cell.summaryOutput.toLocaleString("en"),
  cell.ms.toFixed(0)
])]
const widths = header.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
const table = lines.map((line) => line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n")
console.log(`\nconversation: ${turns} turns on one thread (SQLite), a ${window.toLocaleString("en")}-token window, compaction at 80 %, tokens by o200k:\n${table}`)

const withTokenizer = cells[0]![1]
const verdict = withTokenizer.largest < window
  ? `with the tokenizer, the largest request (${withTokenizer.largest} tokens) stays under the ${window}-token window`
  : `with the tokenizer, a request of ${withTokenizer.largest} tokens went OVER the ${window}-token window`
console.log(`  ${verdict}`)
writeReport({
  name: "conversation",
  description: `a ${turns}-turn conversation on a thread under a ${window}-token window: the largest request, and what compaction cost`,
  rows,
  notes: [
    ...table.split("\n"),
    verdict,
    "requests counted with gpt-tokenizer o200k_base as compaction counts them (content, tool calls as JSON, 4 a message, the tools' JSON); " +
      "ScriptedModel: questions 15-60 words, answers 60-250, a search_docs call every 4th turn (3-8 JSON hits); summaries the first words of each question read, at most 350 words; " +
      "compaction defaults (threshold 0.8, keepLastMessages 8); thread in a SQLite file"
  ]
})
if (withTokenizer.largest >= window) process.exitCode = 1
