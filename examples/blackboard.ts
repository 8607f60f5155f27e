/**
 * Blackboard: a lead coordinates a researcher and a writer over a shared board — the researcher adds a fact, the
 * writer turns it into prose, the lead ends the rounds with `"terminate": true`, and an editor writes the answer
 * from the board.
 * Run alone: `npx tsx examples/blackboard.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, Blackboard, Model, type ScriptedModel } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "Two sentences on why octopuses are clever."

const system = (request: Model.Request): string => request.messages?.find((message) => message.role === "system")?.content ?? ""
const user = (request: Model.Request): string => Model.textOf(request.messages?.filter((message) => message.role === "user").at(-1)?.content ?? "")

/** What a model would answer, for runs without a server: each role, by its instructions and the board. */
export const script: ScriptedModel.Script = (request) => {
  const who = system(request)
  if (who.startsWith("You find facts")) return "About two thirds of an octopus's neurons are in its arms."
  if (who.startsWith("You write")) return "Octopuses think with their arms: two thirds of their neurons are there, so each arm can decide on its own."
  if (who.startsWith("You edit")) return "Octopuses think with their arms. Two thirds of their neurons are there, so each arm can taste and decide on its own."
  const board = user(request)
  if (!board.includes("[contribution] researcher:")) return '{"agent": "researcher", "instruction": "Find one striking fact."}'
  if (!board.includes("[contribution] writer:")) return '{"agent": "writer", "instruction": "Write two sentences from the fact."}'
  return '{"terminate": true}'
}

// Agents made apart from the options: each is typed with the `Model` it needs, which the architecture then needs too.
const researcher = Agent.make({ name: "researcher", instructions: "You find facts." })
const writer = Agent.make({ name: "writer", instructions: "You write short, clear prose." })
const lead = Agent.make({ name: "lead", instructions: "You lead a small science desk." })
const editor = Agent.make({ name: "editor", instructions: "You edit the desk's work into the final answer." })

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Blackboard — ${note}`)
  const desk = Agent.make({
    name: "desk",
    instructions: "",
    architecture: yield* Blackboard.make({ agents: [researcher, writer], coordinator: lead, decider: editor, maxRounds: 5 })
  })
  yield* Agent.stream(desk, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) => event._tag === "Progress" || (event._tag === "RunCompleted" && !event.sessionId.includes("__"))),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
