/**
 * `Agent.run` / `Agent.stream` on a task given as parts (text with an image): the parts go in the first user message;
 * events and everything that needs text read the task's text.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

// A real 1×1 PNG.
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
const task: ReadonlyArray<Model.Part> = [
  Model.textPart("What is in"),
  Model.imagePart({ data: png, mediaType: "image/png" }),
  Model.textPart("this picture?")
]
const agent = Agent.make({ name: "looker", instructions: "Describe." })

describe("Agent: a task given as parts", () => {
  it.effect("run: the parts are the first user message, as given", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent, task)
      expect(result.output).toBe("A pixel.")
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.messages).toEqual([Model.system("Describe."), { role: "user", content: task }])
    }).pipe(Effect.provide(ScriptedModel.layer(["A pixel."]))))

  it.effect("stream: the same request; RunStarted's prompt is the task's text, without the image", () =>
    Effect.gen(function*() {
      const events = Array.from(yield* Stream.runCollect(Agent.stream(agent, task)))
      const started = events.find((event): event is AgentEvent.Of<"RunStarted"> => event._tag === "RunStarted")!
      expect(started.prompt).toBe("What is in\nthis picture?")
      expect(JSON.stringify(events)).not.toContain(png.slice(0, 40))
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.messages!.at(-1)).toEqual({ role: "user", content: task })
    }).pipe(Effect.provide(ScriptedModel.layer(["A pixel."]))))

  it.effect("a bad part fails the run with InvalidOptions naming it, before any model call", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(agent, [Model.textPart("x"), { type: "image", url: "file:///etc/passwd" }]))
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toBe("Agent: the task's part 1: the URL scheme \"file:\" is not allowed (only http:, https: and data:)")
      expect(yield* ScriptedModel.calls).toHaveLength(0)
    }).pipe(Effect.provide(ScriptedModel.layer(["never"]))))
})
