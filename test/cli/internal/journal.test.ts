import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer } from "effect"
import { describeCassette } from "../../../src/cli/internal/journal.js"
import * as Agent from "../../../src/core/Agent.js"
import * as Journal from "../../../src/core/Journal.js"
import * as ModelError from "../../../src/core/ModelError.js"
import * as ScriptedModel from "../../../src/core/ScriptedModel.js"

describe("valet journal show (describeCassette)", () => {
  it.effect("lists every recorded call with its key, answer and the totals", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped()
      const path = `${dir}/c.jsonl`
      const agent = Agent.make({ name: "a", instructions: "" })
      yield* Agent.run(agent, "hello").pipe(
        Effect.provide(Journal.layerRecord(path).pipe(Layer.provide(ScriptedModel.layer(["Hi there."])), Layer.provide(NodeServices.layer)))
      )
      yield* Effect.flip(Agent.run(agent, "again").pipe(
        Effect.provide(Journal.layerRecord(`${path}2`).pipe(
          Layer.provide(ScriptedModel.layer([{ error: new ModelError.ServerError({ status: 503, message: "down" }) }])),
          Layer.provide(NodeServices.layer)
        ))
      ))
      yield* fs.writeFileString(path, yield* fs.readFileString(`${path}2`), { flag: "a" })

      const output = describeCassette(yield* Journal.read(path))
      expect(output[0]).toMatch(/^root\/react\.turn_1\/[0-9a-f]{16}#0  5 tokens  Hi there\.$/)
      expect(output[1]).toMatch(/^root\/react\.turn_1\/[0-9a-f]{16}#0  FAILED ServerError: down$/)
      expect(output[2]).toBe("2 calls, 1 failed, 2 input + 3 output tokens")
    }).pipe(Effect.provide(NodeServices.layer)))
})
