/**
 * Supervisor: a coordinator delegates to named workers — two at once in its first turn — and forwards the
 * writer's article to the user unchanged. Worker runs stream into the parent under `<parent>__worker_<name>_<n>`.
 * Run alone: `npx tsx examples/supervisor.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, type Model, type ScriptedModel, Supervisor } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "A three-sentence piece on why octopuses are clever, with one checked fact."

export const article = "Octopuses solve puzzles that stump many mammals.\nEach arm holds about two thirds of their " +
  "neurons, so an arm can taste and decide on its own.\nIn aquariums they have learned to unscrew jars from the inside."

const system = (request: Model.Request): string => request.messages?.find((message) => message.role === "system")?.content ?? ""
const turns = (request: Model.Request): number =>
  (request.messages ?? []).filter((message) => message.role === "assistant").length

/**
 * What a model would answer, for runs without a server. The two first delegations run at the same time, so each
 * agent's answer is chosen by who is asked rather than by call order.
 */
export const script: ScriptedModel.Script = (request) => {
  const who = system(request)
  // A little latency, as a server would have: the two first delegations are seen to overlap.
  if (who.startsWith("You find facts")) {
    return { text: "About two thirds of an octopus's neurons are in its arms.", delay: "20 millis" }
  }
  if (who.startsWith("You check facts")) {
    return { text: "Confirmed: roughly 350 of 500 million neurons are in the arms.", delay: "20 millis" }
  }
  if (who.startsWith("You write")) return article
  switch (turns(request)) {
    case 0:
      return {
        toolCalls: [
          { name: "delegate", arguments: { worker: "researcher", instructions: "One striking fact about octopus brains." } },
          { name: "delegate", arguments: { worker: "fact-checker", instructions: "Check: most octopus neurons are in the arms." } }
        ]
      }
    case 1:
      return {
        toolCalls: [{
          name: "delegate",
          arguments: { worker: "writer", instructions: "Three sentences on octopus cleverness; use: two thirds of neurons are in the arms." }
        }]
      }
    default:
      return { text: "The writer's piece is ready.", toolCalls: [{ name: "forward_message", arguments: { worker: "writer" } }] }
  }
}

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Supervisor — ${note}`)
  const editor = Agent.make({
    name: "editor",
    instructions: "You run a small science desk.",
    architecture: yield* Supervisor.make({
      workers: [
        Agent.make({ name: "researcher", instructions: "You find facts and state them in one sentence." }),
        Agent.make({ name: "fact-checker", instructions: "You check facts against what is known and say so." }),
        Agent.make({ name: "writer", instructions: "You write short, vivid science pieces." })
      ]
    })
  })
  let output = ""
  yield* Agent.stream(editor, prompt, { textDeltas: false }).pipe(
    Stream.tap((event) =>
      Effect.sync(() => {
        if (event._tag === "RunCompleted" && !event.sessionId.includes("__")) output = event.result.output
      })
    ),
    Stream.filter((event) =>
      event._tag === "ToolCalled" || event._tag === "Progress" || event._tag === "SubRunCompleted" ||
      (event._tag === "RunCompleted" && !event.sessionId.includes("__"))
    ),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
  yield* Console.log(`forwarded verbatim: ${output === article}`)
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
