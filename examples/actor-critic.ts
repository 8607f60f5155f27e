/**
 * Actor-Critic: a poet writes, an editor scores the poem as JSON `{issues, score, summary}`, and the poet
 * revises until the score reaches the approval threshold. Each role is its own agent (and could be its own
 * model: `Agent.make({ ..., model })`). Run alone: `npx tsx examples/actor-critic.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { ActorCritic, Agent, AgentEvent } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "A haiku about the first snow."

/** What a model would answer, for runs without a server: poem, critique, revision, approval. */
export const script = [
  "White snow on the ground\nit is cold and very white\nwinter is here now",
  "```json\n" + JSON.stringify({
    issues: ["'white' twice and 'cold' say what the reader already knows", "no single concrete image"],
    score: 0.45,
    summary: "Correct form, flat images."
  }) + "\n```",
  "first snow on the step —\nthe cat's paw lifts, shakes, and lifts\nthen walks on, careful",
  JSON.stringify({ issues: [], score: 0.93, summary: "A precise, living image." })
]

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Actor-Critic — ${note}`)
  const architecture = yield* ActorCritic.make({
    actor: Agent.make({ name: "poet", instructions: "You write haiku: 5-7-5 syllables, one concrete image." }),
    critic: Agent.make({ name: "editor", instructions: "You are an exacting poetry editor." }),
    approvalThreshold: 0.9
  })
  const workshop = Agent.make({ name: "workshop", instructions: "", architecture })
  yield* Agent.stream(workshop, prompt, { textDeltas: false }).pipe(
    Stream.filter((event) => event._tag === "Progress" || event._tag === "SubRunStarted" || event._tag === "RunCompleted"),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
