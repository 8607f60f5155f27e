/**
 * ReWOO: the planner writes the whole tool plan in one call — a lookup, then a conversion that uses the lookup's
 * result as `{{E1}}` — the tools run, and one solver call answers from their results: two model calls for two
 * tools, where ReAct would need three.
 * Run alone: `npx tsx examples/rewoo.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, Model, ReWOO, type ScriptedModel, Tool } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "How tall is the Eiffel Tower in feet?"

const lookup = Tool.make({
  name: "lookup",
  description: "Looks up a fact in the encyclopedia.",
  parameters: Schema.Struct({ topic: Schema.String }),
  handler: ({ topic }) => Effect.succeed(topic.toLowerCase().includes("eiffel") ? "330" : "unknown")
})
const convert = Tool.make({
  name: "metres_to_feet",
  description: "Converts metres to feet.",
  parameters: Schema.Struct({ metres: Schema.String }),
  handler: ({ metres }) => Effect.succeed(`${Math.round(Number(metres) * 3.28084)}`)
})

const user = (request: Model.Request): string => Model.textOf(request.messages?.filter((message) => message.role === "user").at(-1)?.content ?? "")

/** What a model would answer, for runs without a server: the plan, then the answer from the evidence. */
export const script: ScriptedModel.Script = (request) =>
  user(request).startsWith("Task:")
    ? "The Eiffel Tower is about 1083 feet tall (330 m)."
    : JSON.stringify([
      { id: "E1", tool: "lookup", args: { topic: "Eiffel Tower height in metres" } },
      { id: "E2", tool: "metres_to_feet", args: { metres: "{{E1}}" } }
    ])

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# ReWOO — ${note}`)
  const agent = Agent.make({ name: "researcher", instructions: "You answer with facts.", tools: [lookup, convert], architecture: ReWOO.architecture })
  yield* Agent.stream(agent, prompt, { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
