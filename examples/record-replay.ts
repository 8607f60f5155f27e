/**
 * Record a run's model calls to a JSONL cassette, then replay it with no model at all: the same result, every
 * time. A run recorded once against a real server becomes a deterministic test.
 * Run alone: `npx tsx examples/record-replay.ts`.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, FileSystem, Layer } from "effect"
import { Agent, Journal } from "../src/index.js"
import * as Calculator from "./react-calculator.js"
import { demoModel } from "./support/model.js"

export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(Calculator.script)
  yield* Console.log(`# Record / replay — ${note}`)
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-demo-" })
  const cassette = `${dir}/calculator.jsonl`

  const recorded = yield* Agent.run(Calculator.agent, Calculator.prompt).pipe(
    Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(layer)))
  )
  yield* Console.log(`recorded ${recorded.modelCalls} model calls to ${cassette}: ${recorded.output}`)

  const replayed = yield* Agent.run(Calculator.agent, Calculator.prompt).pipe(
    Effect.provide(Journal.layerReplay(cassette))
  )
  yield* Console.log(`replayed without a model: ${replayed.output}`)
  yield* Console.log(`identical output and usage: ${replayed.output === recorded.output && replayed.usage.totalTokens === recorded.usage.totalTokens}`)

  const miss = yield* Effect.flip(Agent.run(Calculator.agent, "What is 1 + 1?").pipe(Effect.provide(Journal.layerReplay(cassette))))
  yield* Console.log(`a prompt that was never recorded: ${miss._tag}: ${miss.message}`)
}).pipe(Effect.scoped, Effect.provide(NodeServices.layer))

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
