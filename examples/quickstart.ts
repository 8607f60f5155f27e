import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, ScriptedModel, Tool } from "valet"

// A tool: typed parameters, a JSON schema for the model, an Effect handler.
const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

// An agent: ReAct by default.
const agent = Agent.make({ name: "calculator", instructions: "Use the add tool, then answer.", tools: [add] })

// A scripted model stands in for a server: it asks for the tool once, then answers. Each layer made here is a
// script of its own (Effect 4 builds one layer value once, however many times it is provided).
const model = () => ScriptedModel.layer([
  { toolCalls: [{ name: "add", arguments: { a: 2, b: 40 } }] },
  "2 + 40 = 42"
])

const main = Effect.gen(function*() {
  // Stream a run's typed events, one readable line each...
  yield* Agent.stream(agent, "What is 2 + 40?", { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event)))
  )
  // ...or just run it. (The first script is spent: this run gets a fresh one.)
  const result = yield* Agent.run(agent, "What is 2 + 40?").pipe(Effect.provide(model()))
  yield* Console.log(`${result.output} (${result.modelCalls} model calls, ${result.usage.totalTokens} tokens)`)
}).pipe(Effect.provide(model()))

NodeRuntime.runMain(main)
