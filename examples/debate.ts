/**
 * Multi-agent debate: three debaters answer alone, read each other's answers, and answer again; here they agree in
 * round 1, so no judge is asked. The transcript each debater reads is in debater order, whoever finished first.
 * Run alone: `npx tsx examples/debate.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, Model, MultiAgentDebate, type ScriptedModel } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "Is a tomato a fruit or a vegetable? One sentence."

const system = (request: Model.Request): string => request.messages?.find((message) => message.role === "system")?.content ?? ""
const user = (request: Model.Request): string => Model.textOf(request.messages?.filter((message) => message.role === "user").at(-1)?.content ?? "")

/** What a model would answer, for runs without a server: first answers differ, then the debaters agree. */
export const script: ScriptedModel.Script = (request) => {
  if (user(request).includes("This is round 1,")) return "Botanically a tomato is a fruit; cooks treat it as a vegetable."
  if (system(request).includes("botanist")) return "A tomato is a fruit: it grows from the flower and holds the seeds."
  if (system(request).includes("chef")) return "In the kitchen a tomato is a vegetable."
  return "Botanically a fruit, in cooking a vegetable."
}

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Multi-agent debate — ${note}`)
  const moderator = Agent.make({
    name: "moderator",
    instructions: "",
    architecture: yield* MultiAgentDebate.make({
      debaters: [
        Agent.make({ name: "botanist", instructions: "You are a botanist. Answer briefly." }),
        Agent.make({ name: "chef", instructions: "You are a chef. Answer briefly." }),
        Agent.make({ name: "teacher", instructions: "You are a teacher. Answer briefly." })
      ],
      maxRounds: 2,
      convergence: 0.85
    })
  })
  yield* Agent.stream(moderator, prompt, { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
