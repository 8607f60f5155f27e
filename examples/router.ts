/**
 * Router: a front desk classifies each request in one model call and hands it to the specialist that fits —
 * billing or technical support — with a general agent as the fallback for anything it cannot place. The chosen
 * agent runs the request as it was asked, under `<parent>__route_<name>`.
 * Run alone: `npx tsx examples/router.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, Model, Router, type ScriptedModel } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompts = ["I was charged twice for my March invoice.", "My router keeps dropping the Wi-Fi."]

const system = (request: Model.Request): string => request.messages?.find((message) => message.role === "system")?.content ?? ""
const user = (request: Model.Request): string => Model.textOf(request.messages?.filter((message) => message.role === "user").at(-1)?.content ?? "")

/** What a model would answer, for runs without a server: the classifier, then each specialist. */
export const script: ScriptedModel.Script = (request) => {
  const who = system(request)
  if (who.startsWith("You resolve billing")) return "I have refunded the duplicate charge; it will show within five days."
  if (who.startsWith("You fix network")) return "Move the router away from the microwave and update its firmware."
  if (who.startsWith("You answer anything")) return "Happy to help with that."
  return user(request).includes("charged") ? "route: billing\nconfidence: 0.95" : "Route: **Tech-Support**\nconfidence: 80%"
}

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Router — ${note}`)
  const desk = Agent.make({
    name: "front-desk",
    instructions: "You route customer requests.",
    architecture: yield* Router.make({
      routes: [
        { name: "billing", agent: Agent.make({ name: "billing", instructions: "You resolve billing problems." }), description: "invoices, charges, refunds" },
        { name: "tech-support", agent: Agent.make({ name: "tech", instructions: "You fix network and device problems." }) },
        { name: "general", agent: Agent.make({ name: "general", instructions: "You answer anything else." }) }
      ],
      fallback: "general"
    })
  })
  for (const prompt of prompts) {
    yield* Agent.stream(desk, prompt, { textDeltas: false }).pipe(
      Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
      Effect.provide(layer)
    )
  }
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
