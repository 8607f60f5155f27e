/**
 * Self-Refine: a first draft, then critic / refiner rounds until the critic has nothing left to fix.
 * Run alone: `npx tsx examples/self-refine.ts`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Stream } from "effect"
import { Agent, AgentEvent, SelfRefine } from "../src/index.js"
import { demoModel } from "./support/model.js"

export const prompt = "Why is the sky blue?"

/** What a model would answer, for runs without a server: draft, critique, rewrite, approval. */
export const script = [
  "Sunlight is scattered by nitrogen and oxygen molecules (Rayleigh scattering), which scatter short wavelengths most.",
  "Too technical for a ten-year-old: 'Rayleigh scattering' and 'wavelengths' need explaining, and there is no picture to hold on to.",
  "Sunlight is a mix of all colours. When it hits the tiny bits of air, blue light bounces around the most, so blue comes at you from every part of the sky.",
  "No issues: clear, correct and the right length."
]

// A module-level value: `makeUnsafe` throws the `InvalidOptions` at import, where `make` would fail an effect.
const explainer = Agent.make({
  name: "explainer",
  instructions: "Explain things to a ten-year-old in at most two sentences.",
  architecture: SelfRefine.makeUnsafe({ maxRounds: 3 })
})

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  yield* Console.log(`# Self-Refine — ${note}`)
  yield* Agent.stream(explainer, prompt, { textDeltas: false }).pipe(
    // The milestones and the end; `AgentEvent.format` prints any event in one line.
    Stream.filter((event) => event._tag === "Progress" || event._tag === "SubRunStarted" || event._tag === "RunCompleted"),
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
})

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
