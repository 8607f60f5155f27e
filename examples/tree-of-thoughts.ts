/**
 * Tree of Thoughts: a beam search over chains of reasoning steps for the game of 24. Each level proposes next
 * steps from the best chains so far, scores every candidate, and keeps the best two; a candidate scored 1 solves
 * the task, and a last call writes the answer from its chain.
 * Run alone: `npx tsx examples/tree-of-thoughts.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, Model, type ScriptedModel, TreeOfThoughts } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "Use 4, 7, 8 and 8 once each with + - × ÷ to make 24."

const user = (request: Model.Request): string => Model.textOf(request.messages?.filter((message) => message.role === "user").at(-1)?.content ?? "")

/** What a model would answer, for runs without a server: proposals, scores and the answer, read off the prompt. */
export const script: ScriptedModel.Script = (request) => {
  const text = user(request)
  if (text.includes("Propose up to")) {
    return text.includes("Step 1: 8 ÷ 8 = 1")
      ? "1. 7 − 1 = 6, then 6 × 4 = 24\n2. 4 + 1 = 5, then 5 × 7 = 35"
      : "1. 8 ÷ 8 = 1, leaving 4 7 1\n2. 8 + 8 = 16, leaving 4 7 16"
  }
  if (text.includes("How promising")) {
    if (text.includes("6 × 4 = 24")) return "score: 1 — this reaches 24."
    if (text.includes("5 × 7 = 35")) return "score: 0.1"
    if (text.includes("8 ÷ 8 = 1")) return "score: 0.8 — 4, 7 and 1 can make 24."
    return "score: 0.3"
  }
  return "(7 − 8 ÷ 8) × 4 = 24"
}

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Tree of Thoughts — ${note}`)
  const solver = Agent.make({
    name: "solver",
    instructions: "",
    architecture: yield* TreeOfThoughts.make({ branchFactor: 2, beamWidth: 2, maxDepth: 3 })
  })
  yield* Agent.stream(solver, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) => event._tag === "Progress" || event._tag === "RunCompleted" && !event.sessionId.includes("__")),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
