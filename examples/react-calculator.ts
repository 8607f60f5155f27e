/**
 * ReAct with two tools: the model asks for both in one turn (they run concurrently), then answers.
 * Run alone: `npx tsx examples/react-calculator.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, Tool } from "../src/index.js"
import { demoModel } from "./support/model.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const multiply = Tool.make({
  name: "multiply",
  description: "Multiplies two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a * b)
})

export const agent = Agent.make({
  name: "calculator",
  instructions: "You are a careful calculator. Use the tools for every operation, then answer in one sentence.",
  tools: [add, multiply]
})

export const prompt = "What are 17 + 25 and 6 × 7?"

/** What a model would answer, for runs without a server. */
export const script = [
  {
    toolCalls: [
      { name: "add", arguments: { a: 17, b: 25 } },
      // Models sometimes quote numbers: the schema decode coerces "6" to 6.
      { name: "multiply", arguments: { a: "6", b: 7 } }
    ]
  },
  "17 + 25 = 42 and 6 × 7 = 42: both are 42."
]

/** Streams the run's events, one readable line each. */
export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# ReAct calculator — ${note}`)
  yield* Agent.stream(agent, prompt, { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
