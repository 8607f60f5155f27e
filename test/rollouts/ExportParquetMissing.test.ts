/**
 * Parquet through the optional peer `hyparquet-writer`: where it is not installed, asking for Parquet is one error
 * naming the package (its import is made to fail here, as it does without the package).
 */
import { describe, expect, it } from "@effect/vitest"
import { vi } from "vitest"
import { Effect, Stream } from "effect"
import * as Export from "../../src/rollouts/Export.js"

vi.mock("hyparquet-writer", () => {
  throw new Error("Cannot find package 'hyparquet-writer'")
})

describe("Export.parquet without hyparquet-writer", () => {
  it.effect("fails with an ExportError naming the package to install; JSONL needs nothing", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Stream.runCollect(Export.parquet("sft-chat")(Stream.make({ messages: [] }))))
      expect(error).toBeInstanceOf(Export.ExportError)
      expect(error.message).toBe("Parquet output needs the optional package hyparquet-writer: npm install hyparquet-writer")
      expect(yield* Stream.runCollect(Export.jsonl(Stream.make({ messages: [] })))).toEqual(["{\"messages\":[]}\n"])
    }))
})
