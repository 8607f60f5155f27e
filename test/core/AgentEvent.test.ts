import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as AgentEvent from "../../src/core/AgentEvent.js"
import type * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

describe("AgentEvent", () => {
  it("session ids name their parent and role", () => {
    expect(AgentEvent.parentSessionId("sess_a__actor_2__critic_1")).toBe("sess_a__actor_2")
    expect(AgentEvent.sessionRole("sess_a__actor_2__critic_1")).toBe("critic_1")
    expect(AgentEvent.parentSessionId("sess_a")).toBeUndefined()
    expect(AgentEvent.isWithin("sess_a__actor_2", "sess_a")).toBe(true)
    expect(AgentEvent.isWithin("sess_ab", "sess_a")).toBe(false)
  })

  it("tree places sub-agents under their parents, even when a parent has emitted nothing of its own", () => {
    const at = (sessionId: string): AgentEvent.AgentEvent => ({ _tag: "ModelCalled", sessionId, timestamp: 0, step: "s" })
    const roots = AgentEvent.tree([at("r"), at("r__a_1"), at("r__a_1__b"), at("r__a_2"), at("other")])
    expect(roots.map((node) => node.sessionId)).toEqual(["r", "other"])
    expect(roots[0]!.children.map((node) => node.sessionId)).toEqual(["r__a_1", "r__a_2"])
    expect(roots[0]!.children[0]!.children.map((node) => node.role)).toEqual(["b"])
  })

  it("format renders one readable line per event", () => {
    const line = AgentEvent.format({
      _tag: "ModelReplied",
      sessionId: "s",
      timestamp: 0,
      step: "react.turn_1",
      text: "",
      toolCalls: [{ id: "1", name: "add", arguments: '{"a":1,"b":2}' }],
      finishReason: "tool_calls",
      usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 },
      latencyMs: 12
    })
    expect(line).toBe('[s] model replied react.turn_1 in 12 ms, 3 tokens: tool calls: add({"a":1,"b":2})')
  })
})

describe("AgentEvent.toSse", () => {
  const writer = Agent.make({ name: "writer", instructions: "Write.", architecture: SelfRefine.architecture })
  const script = ["Paris is the capital", "Add a full stop.", "Paris is the capital.", "No issues."]

  /** The SSE text parsed by a parser no one here wrote. */
  const parse = (text: string) => {
    const events: Array<EventSourceMessage> = []
    const parser = createParser({ onEvent: (event) => void events.push(event) })
    parser.feed(text)
    return events
  }

  it.effect("one SSE event per AgentEvent: id, event (the tag), data (the event's JSON); the decoder reads them back", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(writer, "Capital of France?"))
      const text = (yield* Stream.runCollect(AgentEvent.toSse(Stream.fromIterable(events)))).join("")
      const received = parse(text)
      expect(received.map((event) => event.id)).toEqual(events.map((_, i) => String(i)))
      expect(received.map((event) => event.event)).toEqual(events.map((event) => event._tag))
      expect(received.map((event) => JSON.parse(event.data))).toEqual(events.map((event) => JSON.parse(JSON.stringify(event))))
      const decode = AgentEvent.sseDecoder()
      expect(received.map((event) => decode({ event: event.event!, data: event.data }))).toEqual(
        events.map((event) => ({ _tag: "Event", event: JSON.parse(JSON.stringify(event)) }))
      )
      // Five RunCompleted (the root and its four sub-agents'): one is the root's, holding the run's result.
      const completions = events.filter((event) => event._tag === "RunCompleted")
      expect(completions.length).toBeGreaterThan(1)
      expect(completions.filter(AgentEvent.isRoot)).toEqual([events.at(-1)])
    }).pipe(Effect.provide(ScriptedModel.layer(script))))

  it.effect("the compact form leaves out what a reader knows; the decoder restores the same events", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(writer, "Capital of France?"))
      const deltas = events.filter((event) => event._tag === "TextDelta")
      expect(deltas.length).toBeGreaterThan(3)
      const full = (yield* Stream.runCollect(AgentEvent.toSse(Stream.fromIterable(events)))).join("")
      const compact = (yield* Stream.runCollect(AgentEvent.toSse(Stream.fromIterable(events), { compact: true }))).join("")
      const received = parse(compact)
      const compactDeltas = received.filter((event) => event.event === "TextDelta")
      // After the first delta of a call, only the text: {"text":"…"}.
      const calls = new Set(deltas.map((delta) => `${delta.sessionId} ${delta.step}`)).size
      expect(compactDeltas.slice(1).filter((event) => Object.keys(JSON.parse(event.data)).join() !== "text")).toHaveLength(calls - 1)
      expect(JSON.parse(compactDeltas[1]!.data)).toEqual({ text: deltas[1]!.text })
      // A word's frame: ~190 bytes in full, under 60 compact (`id`, `event: TextDelta`, `data: {"text":" word"}`).
      const deltaFrames = (text: string) => text.split("\n\n").filter((frame) => frame.includes("event: TextDelta"))
      expect(deltaFrames(full)[1]!.length).toBeGreaterThan(150)
      expect(deltaFrames(compact)[1]!.length).toBeLessThan(60)
      expect(deltaFrames(compact).join("").length).toBeLessThan(deltaFrames(full).join("").length * 0.5)
      expect(compact.length).toBeLessThan(full.length)
      const decode = AgentEvent.sseDecoder()
      expect(received.map((event) => decode({ event: event.event!, data: event.data }))).toEqual(
        events.map((event) => ({ _tag: "Event", event: JSON.parse(JSON.stringify(event)) }))
      )
    }).pipe(Effect.provide(ScriptedModel.layer(script))))

  it.effect("a failed run ends with event: error carrying the typed error; the text itself never fails", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "a", instructions: "" })
      const text = (yield* Stream.runCollect(AgentEvent.toSse(Agent.stream(agent, "hi")))).join("")
      const received = parse(text)
      const last = received.at(-1)!
      expect(last.event).toBe("error")
      expect(last.id).toBe(String(received.length - 1))
      const error = JSON.parse(last.data)
      expect(error).toMatchObject({ _tag: "RateLimited", message: expect.stringContaining("slow down") })
      expect(AgentEvent.sseDecoder()({ event: "error", data: last.data })).toEqual({ _tag: "Error", error })
    }).pipe(Effect.provide(ScriptedModel.layer([{ error: new ModelError.RateLimited({ message: "slow down" }) }]))))

  it.effect("works on a stream whose requirements are provided later; keep-alive comments while it is quiet", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "a", instructions: "" })
      // Encoded before the model is provided: `R` is still `Model`.
      const sse: Stream.Stream<string, never, Model.Model> = AgentEvent.toSse(Agent.stream(agent, "hi"), { heartbeat: "10 seconds" })
      const fiber = yield* Stream.runCollect(sse).pipe(Effect.provide(ScriptedModel.layer([{ text: "hello", delay: "35 seconds" }])), Effect.forkChild)
      for (let i = 0; i < 8; i++) yield* TestClock.adjust("5 seconds")
      const frames = yield* Fiber.join(fiber)
      expect(frames.filter((frame) => frame === ": keep-alive\n\n")).toHaveLength(3)
      expect(parse(frames.join("")).at(-1)!.event).toBe("RunCompleted")
    }))
})
