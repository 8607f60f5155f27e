/**
 * Plan-and-Execute: a planner splits the task into steps with dependencies, independent steps run at the same
 * time (each as the agent itself, with its tools), and a synthesizer writes the answer from their results.
 * Run alone: `npx tsx examples/plan-and-execute.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, Model, PlanAndExecute, type ScriptedModel, Tool } from "../src/index.js"
import { demoModel } from "./support/model.js"

const forecasts: Record<string, string> = {
  lisbon: "Saturday 24 °C and sunny, Sunday 22 °C with light wind",
  porto: "Saturday 17 °C with showers, Sunday 19 °C and cloudy"
}

const forecast = Tool.make({
  name: "forecast",
  description: "The weekend forecast for a city",
  parameters: Schema.Struct({ city: Schema.String }),
  handler: ({ city }) => Effect.succeed(forecasts[city.toLowerCase()] ?? `no forecast for ${city}`)
})

export const prompt = "Lisbon or Porto for a sunny weekend?"

const plan = JSON.stringify([
  { id: "lisbon", description: "Get the weekend forecast for Lisbon", depends_on: [] },
  { id: "porto", description: "Get the weekend forecast for Porto", depends_on: [] },
  { id: "compare", description: "Compare the two forecasts for sunshine", depends_on: ["lisbon", "porto"] }
], null, 2)

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

/**
 * What a model would answer, for runs without a server. The two forecast steps run at the same time, so the
 * answers are chosen by what is asked rather than by call order.
 */
export const script: ScriptedModel.Script = (request) => {
  const asked = lastUser(request)
  const toolResult = (request.messages ?? []).filter((message) => message.role === "tool").at(-1)
  if (asked.startsWith("Break the task")) return "```json\n" + plan + "\n```"
  for (const city of ["lisbon", "porto"]) {
    if (asked.includes(`Do step ${city} now`)) {
      // A little latency, as a server would have: the two steps are seen to overlap.
      return toolResult === undefined
        ? { toolCalls: [{ name: "forecast", arguments: { city } }], delay: "20 millis" }
        : `${city === "lisbon" ? "Lisbon" : "Porto"}: ${toolResult.content}.`
    }
  }
  if (asked.includes("Do step compare now")) return "Lisbon is warmer and dry both days; Porto expects showers on Saturday."
  return "Go to Lisbon: 22–24 °C and sun all weekend, while Porto expects showers on Saturday."
}

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Plan-and-Execute — ${note}`)
  const planner = Agent.make({
    name: "trip-planner",
    instructions: "You help plan weekend trips. Use the tools for facts.",
    tools: [forecast],
    architecture: yield* PlanAndExecute.make({ maxSteps: 5 })
  })
  yield* Agent.stream(planner, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) =>
      (event._tag === "Progress" && event.name !== "plan_and_execute.created") || event._tag === "ToolReturned" ||
      (event._tag === "RunCompleted" && !event.sessionId.includes("__"))
    ),
    Stream.runForEach((event) =>
      Console.log(
        event._tag === "RunCompleted"
          ? `${AgentEvent.format(event)}\nsteps: ${
            JSON.stringify((event.result.metadata.steps as ReadonlyArray<PlanAndExecute.StepResult>).map((step) => step.id))
          }`
          : AgentEvent.format(event)
      )
    ),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
