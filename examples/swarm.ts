/**
 * Swarm: a triage agent hands a customer to billing, with a note; billing answers. The handoff ends triage's turn
 * at once, and billing sees the task and the conversation so far.
 * Run alone: `npx tsx examples/swarm.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, type Model, type ScriptedModel, Swarm } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "I was charged twice for my March invoice."

const system = (request: Model.Request): string => request.messages?.find((message) => message.role === "system")?.content ?? ""

/** What a model would answer, for runs without a server: triage hands off, billing answers. */
export const script: ScriptedModel.Script = (request) =>
  system(request).startsWith("You handle billing")
    ? "I have refunded the duplicate March charge; it will show within five days."
    : {
      text: "This is a billing question.",
      toolCalls: [{ name: "handoff", arguments: { target: "billing", message: "duplicate charge on the March invoice" } }]
    }

// Agents made apart from the options: each is typed with the `Model` it needs, which the architecture then needs too.
const triage = Agent.make({ name: "triage", instructions: "You triage customer messages and hand them to the right agent." })
const billing = Agent.make({ name: "billing", instructions: "You handle billing: invoices, charges and refunds." })
const tech = Agent.make({ name: "tech", instructions: "You handle technical problems." })

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Swarm — ${note}`)
  const support = Agent.make({
    name: "support",
    instructions: "",
    architecture: yield* Swarm.make({ agents: [triage, billing, tech], entry: "triage", maxHandoffs: 3 })
  })
  yield* Agent.stream(support, prompt, { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
