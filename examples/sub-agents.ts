/**
 * A custom architecture built with `Architecture.make`: a researcher and a writer run as sub-agents under
 * deterministic session ids; their events stream into the parent's, and `AgentEvent.tree` rebuilds who did what.
 * Run alone: `npx tsx examples/sub-agents.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, Architecture } from "../src/index.js"
import { demoModel } from "./support/model.js"

const researcher = Agent.make({ name: "researcher", instructions: "List three facts about the topic, one per line." })
const writer = Agent.make({ name: "writer", instructions: "Write one paragraph from the facts you are given." })

const researchThenWrite = Architecture.make({
  name: "research-then-write",
  program: (input) =>
    Effect.gen(function*() {
      const facts = yield* Agent.runChild(researcher, input.prompt, { role: "researcher" })
      yield* Architecture.progress("research_then_write.facts", { lines: facts.output.split("\n").length })
      const text = yield* Agent.runChild(writer, `Topic: ${input.prompt}\nFacts:\n${facts.output}`, { role: "writer" })
      return { output: text.output, metadata: { facts: facts.output } }
    })
})

export const agent = Agent.make({ name: "editor", instructions: "", architecture: researchThenWrite })
export const prompt = "Octopuses"
export const script = [
  "Octopuses have three hearts.\nTheir blood is blue.\nEach arm has its own cluster of neurons.",
  "Octopuses are strange: three hearts pump their blue blood, and each arm thinks a little for itself."
]

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Sub-agents — ${note}`)
  const events: Array<AgentEvent.AgentEvent> = []
  yield* Agent.stream(agent, prompt, { textDeltas: false }).pipe(
    Stream.tap((event) => Effect.sync(() => events.push(event))),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
  const describe = (node: AgentEvent.SessionTree, depth: number): Array<string> => [
    `${"  ".repeat(depth)}${node.sessionId}: ${node.events.length} events`,
    ...node.children.flatMap((child) => describe(child, depth + 1))
  ]
  yield* Console.log(["session tree:", ...AgentEvent.tree(events).flatMap((root) => describe(root, 1))].join("\n"))
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
