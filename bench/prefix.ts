/**
 * Prompt-cache friendliness: how much of each request's prompt a server's prefix cache could reuse. Self-Refine,
 * Multi-agent debate and the Ensemble run against the loopback OpenAI-compatible server (`test/support/openAiServer.ts`,
 * in this process); every chat request it receives is rendered the way a chat template lays it out (each message's
 * role, then its content, in order) and compared with every earlier request of the same run. A request's reusable
 * prefix is its longest common prefix with an earlier one (what vLLM's automatic prefix caching, OpenAI's and
 * DeepSeek's caches match; they count tokens in blocks, this counts characters). Reported: the share of all
 * prompt characters that are such a prefix, over the run's requests.
 *
 * "before" runs each architecture with its prompts of valet 0.1 (the templates passed as options, the debate's
 * transcript marking each debater's own answers); "after" with today's defaults, which put the part the roles
 * share (the task, the answer under review, the debate so far) first and what differs between roles last.
 *
 *   npx tsx bench/prefix.ts [--quick]     # needs `npm run build` first (npm run bench does it)
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { Agent, Ensemble, MultiAgentDebate, OpenAiCompatible, SelfRefine } from "valet"
import * as Server from "../test/support/openAiServer.js"
import { type Row, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")

// A task with a long shared part, as the tasks prefix caching pays for: a document and a question about it.
const paragraph = "The committee met on Tuesday to review the quarterly figures. Revenue rose by four percent against the " +
  "previous quarter, costs by two, and the new warehouse opened a month late. "
const task = `${paragraph.repeat(quick ? 8 : 24)}\nQuestion: by how much did the margin change, and why?`

// valet 0.1's prompts, kept here to measure against.
const before = {
  criticPrompt: `Review an answer to a task. List the concrete problems that matter: mistakes, missing parts, unclear \
wording. Be brief. If the answer needs no change, reply with exactly "{stop_phrase}".

Task:
{task}

Answer:
{output}`,
  refinerPrompt: `Improve the answer to the task below so that it addresses every point of the review. Reply with \
the improved answer only.

Task:
{task}

Answer:
{output}

Review:
{critique}`,
  debaterPrompt: `{task}

This is round {round} of a debate. Here are the answers so far (yours are marked "(you)"):

{transcript}

Consider the other answers. Where they are right, take them up; where they are wrong, say why. Then give your own \
answer again, complete.`,
  ensembleCriticPrompt: `A solver proposed an answer to the problem below. Look for reasons it could be wrong: misread \
conditions, arithmetic slips, missing cases, a wrong form or unit.

Problem:
{task}

Proposed answer: {answer}

Reply with only a JSON object: {"risk": <from 0 to 1, the chance the answer is wrong>, "notes": "<your main concerns, briefly>"}`,
  ensembleJudgePrompt: `Judge a proposed answer to the problem below.

Problem:
{task}

Proposed answer: {answer}
Solvers who gave it: {support}. A reviewer put the risk that it is wrong at {risk}: {critique}
{reference}
Reply with only a JSON object: {"score": <from 0 to 1, the quality of the answer>, "confidence": <from 0 to 1, how sure \
you are that it is correct>, "is_correct": <true or false against the reference answer; null without one>, "notes": "<one sentence>"}`
}

/** A chat request as a chat template lays it out: each message's role, then its content. */
const render = (body: { readonly messages?: ReadonlyArray<{ readonly role: string; readonly content?: unknown }> }): string =>
  (body.messages ?? []).map((m) => `<|${m.role}|>\n${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`).join("\n")

const commonPrefix = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  let i = 0
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

interface Measured {
  readonly requests: number
  readonly characters: number
  readonly reusable: number
}

/** The requests' reusable prefixes: each against every request the server received before it. */
const measure = (prompts: ReadonlyArray<string>): Measured => {
  let characters = 0
  let reusable = 0
  prompts.forEach((prompt, i) => {
    characters += prompt.length
    let best = 0
    for (let j = 0; j < i; j++) best = Math.max(best, commonPrefix(prompt, prompts[j]!))
    reusable += best
  })
  return { requests: prompts.length, characters, reusable }
}

/** Runs `agent` on the task against a fresh loopback server; the chat prompts it received, in arrival order. */
const promptsOf = (agent: Agent.Agent<never>) =>
  Effect.scoped(Effect.gen(function*() {
    const server = yield* Server.make({ words: 24 })
    // Answers that differ from call to call (the server's own are all alike, and alike answers end a debate at once).
    const answers = Array.from({ length: 60 }, (_, i) => {
      const text = `Answer ${i + 1}: the margin moved by ${i % 5} points because costs rose by ${(i * 7) % 11} percent. FINAL: ${i % 3}`
      return Server.json({
        id: `c${i}`,
        model: "bench",
        choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 }
      })
    })
    server.enqueue("/v1/chat/completions", ...answers)
    const layer = OpenAiCompatible.layer({ baseUrl: server.url, model: "bench", maxAttempts: 1 }).pipe(
      Layer.provide(NodeHttpClient.layerUndici)
    )
    yield* Agent.run(agent, task).pipe(Effect.provide(layer))
    return server.requests.filter((r) => r.path === "/v1/chat/completions").map((r) => render(r.body))
  }))

const instructions = "You answer questions about company reports."
const cases = Effect.gen(function*() {
  const refine = (options: SelfRefine.Options | Record<string, never>) =>
    Agent.make({ name: "writer", instructions, architecture: SelfRefine.makeUnsafe({ maxRounds: 3, ...options }) })
  const debate = (options: Record<string, string>) =>
    Agent.make({ name: "panel", instructions, architecture: MultiAgentDebate.makeUnsafe({ maxRounds: 2, convergence: 1, ...options }) })
  const ensemble = (options: Record<string, string>) =>
    Agent.make({ name: "ensemble", instructions, architecture: Ensemble.makeUnsafe({ maxRounds: 2, ...options }) })
  return [
    ["self_refine", refine({ criticPrompt: before.criticPrompt, refinerPrompt: before.refinerPrompt }), refine({})],
    ["multi_agent_debate", debate({ debaterPrompt: before.debaterPrompt }), debate({})],
    [
      "ensemble",
      ensemble({ criticPrompt: before.ensembleCriticPrompt, judgePrompt: before.ensembleJudgePrompt }),
      ensemble({})
    ]
  ] as const
})

const program = Effect.gen(function*() {
  const rows: Array<Row> = []
  const notes: Array<string> = []
  for (const [name, old, now] of yield* cases) {
    for (const [label, agent] of [["before", old], ["after", now]] as const) {
      const m = measure(yield* promptsOf(agent as Agent.Agent<never>))
      rows.push({ framework: `valet ${label}`, measure: `${name}: prompt characters a prefix cache can reuse`, value: (100 * m.reusable) / m.characters, unit: "%" })
      notes.push(`${name} ${label}: ${m.requests} requests, ${m.characters} prompt characters, ${m.reusable} reusable`)
    }
  }
  writeReport({
    name: "prefix",
    description: `share of each chat request's prompt identical to the start of an earlier request of the same run (loopback ` +
      `server, ${task.length}-character task${quick ? ", quick" : ""}); before: valet 0.1's prompts, after: today's`,
    rows,
    notes
  })
})

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
