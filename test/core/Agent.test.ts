import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Schema, Stream, type Tracer, Option } from "effect"
import { TestClock } from "effect/testing"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const script: ScriptedModel.Script = [
  { toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] },
  "The answer is 5."
]

const calculator = Agent.make({ name: "calculator", instructions: "Use the add tool.", tools: [add] })

/** A tiny multi-agent architecture: asks `helper` twice (rounds 1 and 2) and joins the answers. */
const twoRounds = (helper: Agent.Agent<Model.Model>) =>
  Architecture.make({
    name: "two-rounds",
    program: (input) =>
      Effect.gen(function*() {
        const first = yield* Agent.runChild(helper, input.prompt, { role: "helper", index: 1 })
        yield* Architecture.progress("two_rounds.first", { output: first.output })
        const second = yield* Agent.runChild(helper, `${input.prompt} again`, { role: "helper", index: 2 })
        return { output: `${first.output} | ${second.output}`, metadata: { rounds: 2 } }
      })
  })

describe("Agent", () => {
  it.effect("run and stream give the same output and model-call count", () =>
    Effect.gen(function*() {
      const ran = yield* Agent.run(calculator, "2 + 3?").pipe(Effect.provide(ScriptedModel.layer(script)))
      const events = yield* Agent.stream(calculator, "2 + 3?").pipe(
        Stream.runCollect,
        Effect.provide(ScriptedModel.layer(script))
      )
      const completed = events.filter((event) => event._tag === "RunCompleted")
      expect(completed).toHaveLength(1)
      const streamed = completed[0]!.result
      expect(streamed.output).toBe(ran.output)
      expect(streamed.modelCalls).toBe(ran.modelCalls)
      expect(streamed.usage).toEqual(ran.usage)
      expect(streamed.metadata).toEqual(ran.metadata)
    }))

  it.effect("events start with RunStarted, end with one RunCompleted, and decode after a JSON round trip", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(calculator, "2 + 3?", { sessionId: "sess_fixed" }).pipe(
        Stream.runCollect
      )
      expect(events[0]!._tag).toBe("RunStarted")
      expect(events.at(-1)!._tag).toBe("RunCompleted")
      expect(events.filter((event) => event._tag === "RunCompleted")).toHaveLength(1)
      expect(events.every((event) => event.sessionId === "sess_fixed")).toBe(true)
      expect(events.map((event) => event._tag)).toEqual([
        "RunStarted",
        "ModelCalled",
        "ModelReplied",
        "ToolCalled",
        "ToolReturned",
        "ModelCalled",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "TextDelta",
        "ModelReplied",
        "RunCompleted"
      ])
      const deltas = events.filter((event) => event._tag === "TextDelta").map((event) => event.text).join("")
      expect(deltas).toBe("The answer is 5.")
      const decode = Schema.decodeUnknownSync(AgentEvent.AgentEvent)
      const encode = Schema.encodeSync(AgentEvent.AgentEvent)
      for (const event of events) {
        const roundTripped = decode(JSON.parse(JSON.stringify(encode(event))))
        expect(roundTripped).toEqual(event)
      }
    }).pipe(Effect.provide(ScriptedModel.layer(script))))

  it.effect("textDeltas: false streams the same run without TextDelta events", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(calculator, "2 + 3?", { textDeltas: false }).pipe(
        Stream.runCollect
      )
      expect(events.some((event) => event._tag === "TextDelta")).toBe(false)
      expect(events.at(-1)!._tag).toBe("RunCompleted")
    }).pipe(Effect.provide(ScriptedModel.layer(script))))

  it.effect("a sub-agent's events stream into the parent under <parent>__<role>_<n>, its calls roll up", () =>
    Effect.gen(function*() {
      const helper = Agent.make({ name: "helper", instructions: "Help." })
      const boss = Agent.make({ name: "boss", instructions: "", architecture: twoRounds(helper) })
      const events = yield* Agent.stream(boss, "task", { sessionId: "sess_boss" }).pipe(
        Stream.runCollect
      )
      const sessions = [...new Set(events.map((event) => event.sessionId))]
      expect(sessions).toEqual(["sess_boss", "sess_boss__helper_1", "sess_boss__helper_2"])
      // Each child's own run is framed by its RunStarted / RunCompleted, inside the parent's SubRun events.
      const framing = events
        .filter((event) => ["RunStarted", "RunCompleted", "SubRunStarted", "SubRunCompleted"].includes(event._tag))
        .map((event) => `${event._tag}:${event.sessionId}`)
      expect(framing).toEqual([
        "RunStarted:sess_boss",
        "SubRunStarted:sess_boss",
        "RunStarted:sess_boss__helper_1",
        "RunCompleted:sess_boss__helper_1",
        "SubRunCompleted:sess_boss",
        "SubRunStarted:sess_boss",
        "RunStarted:sess_boss__helper_2",
        "RunCompleted:sess_boss__helper_2",
        "SubRunCompleted:sess_boss",
        "RunCompleted:sess_boss"
      ])
      const last = events.at(-1)!
      expect(last._tag === "RunCompleted" && last.result).toMatchObject({
        output: "first answer | second answer",
        modelCalls: 2,
        interrupted: false,
        metadata: { rounds: 2 }
      })
      // The tree rebuilt from the merged stream.
      const [root] = AgentEvent.tree(events)
      expect(root!.sessionId).toBe("sess_boss")
      expect(root!.children.map((child) => [child.sessionId, child.role])).toEqual([
        ["sess_boss__helper_1", "helper_1"],
        ["sess_boss__helper_2", "helper_2"]
      ])
      expect(events.filter(AgentEvent.belongsTo("sess_boss__helper_2")).every((event) => event.sessionId === "sess_boss__helper_2"))
        .toBe(true)
      expect(events.filter(AgentEvent.belongsTo("sess_boss", { descendants: false })).length).toBeGreaterThan(0)
    }).pipe(Effect.provide(ScriptedModel.layer(["first answer", "second answer"]))))

  it.effect("a failing child surfaces as SubAgentFailed of the parent, never as an empty answer", () =>
    Effect.gen(function*() {
      const helper = Agent.make({ name: "helper", instructions: "" })
      const boss = Agent.make({ name: "boss", instructions: "", architecture: twoRounds(helper) })
      const events: Array<AgentEvent.AgentEvent> = []
      const exit = yield* Agent.stream(boss, "task", { sessionId: "sess_b" }).pipe(
        Stream.runForEach((event) => Effect.sync(() => events.push(event))),
        Effect.exit
      )
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Option.getOrUndefined(Exit.findErrorOption(exit))
      expect(error).toBeInstanceOf(AgentError.SubAgentFailed)
      const failed = error as AgentError.SubAgentFailed
      expect(failed.sessionId).toBe("sess_b__helper_2")
      expect(failed.role).toBe("helper")
      expect(failed.reason).toBe("ScriptExhausted")
      expect(failed.error._tag).toBe("ScriptExhausted")
      const completed = events.filter((event) => event._tag === "SubRunCompleted")
      expect(completed.map((event) => [event.childSessionId, event.error?.split(":")[0]])).toEqual([
        ["sess_b__helper_1", undefined],
        ["sess_b__helper_2", "ScriptExhausted"]
      ])
      expect(events.some((event) => event._tag === "RunCompleted" && event.sessionId === "sess_b")).toBe(false)
      // The typed failure survives a JSON round trip, nested error included.
      const json = JSON.parse(JSON.stringify(Schema.encodeSync(AgentError.AgentError)(failed)))
      const back = Schema.decodeUnknownSync(AgentError.AgentError)(json)
      expect(back).toBeInstanceOf(AgentError.SubAgentFailed)
      expect((back as AgentError.SubAgentFailed).error).toBeInstanceOf(Error)
    }).pipe(Effect.provide(ScriptedModel.layer(["only one answer"]))))

  it.effect("two children under the same session id are refused with SessionConflict", () =>
    Effect.gen(function*() {
      const helper = Agent.make({ name: "helper", instructions: "" })
      const clash = Architecture.make({
        name: "clash",
        program: (input) =>
          Effect.gen(function*() {
            yield* Agent.runChild(helper, input.prompt, { role: "judge" })
            yield* Agent.runChild(helper, input.prompt, { role: "judge" })
            return { output: "unreachable" }
          })
      })
      const error = yield* Effect.flip(Agent.run(Agent.make({ name: "p", instructions: "", architecture: clash }), "x", { sessionId: "s1" }))
      expect(error).toBeInstanceOf(AgentError.SessionConflict)
      expect(error.message).toContain("s1__judge")
    }).pipe(Effect.provide(ScriptedModel.layer(["a", "b"]))))

  it.effect("each agent can carry its own model: the child answers from its layer, the parent from the context's", () =>
    Effect.gen(function*() {
      const critic = Agent.make({
        name: "critic",
        instructions: "",
        model: ScriptedModel.layer(["from the critic's model"])
      })
      const boss = Agent.make({
        name: "boss",
        instructions: "",
        architecture: Architecture.make({
          name: "mixed",
          program: (input) =>
            Effect.gen(function*() {
              const own = yield* Architecture.generate({ messages: [Model.user(input.prompt)] })
              const child = yield* Agent.runChild(critic, input.prompt, { role: "critic", index: 1 })
              return { output: `${Model.text(own)} / ${child.output}` }
            })
        })
      })
      const result = yield* Agent.run(boss, "hi")
      expect(result.output).toBe("from the context's model / from the critic's model")
      expect(result.modelCalls).toBe(2)
    }).pipe(Effect.provide(ScriptedModel.layer(["from the context's model"]))))

  it.effect("an agent's model layer is built once per root run, shared by its rounds, and released at the end", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const tracked = Layer.effectContext(
        Effect.acquireRelease(
          Effect.sync(() => log.push("built")),
          () => Effect.sync(() => log.push("released"))
        ).pipe(Effect.flatMap(() => Layer.build(ScriptedModel.layer(["round one", "round two", "round three"]))))
      )
      const actor = Agent.make({ name: "actor", instructions: "", model: tracked })
      const rounds = Architecture.make({
        name: "rounds",
        program: (input) =>
          Effect.gen(function*() {
            const outputs: Array<string> = []
            for (let round = 1; round <= 3; round++) {
              outputs.push((yield* Agent.runChild(actor, input.prompt, { role: "actor", index: round })).output)
            }
            log.push("rounds done")
            return { output: outputs.join(", ") }
          })
      })
      const result = yield* Agent.run(Agent.make({ name: "boss", instructions: "", architecture: rounds }), "go")
      expect(result.output).toBe("round one, round two, round three")
      expect(log).toEqual(["built", "rounds done", "released"])
    }))

  it.effect("interrupting Agent.run while a tool handler sleeps stops at once and runs the handler's finalizer", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      let finalized = false
      const sleepy = Tool.make({
        name: "sleepy",
        description: "Sleeps a long time",
        parameters: Schema.Struct({}),
        timeout: "1 hour",
        handler: () =>
          Effect.acquireUseRelease(
            Deferred.succeed(started, undefined),
            () => Effect.never,
            () => Effect.sync(() => { finalized = true })
          )
      })
      const agent = Agent.make({ name: "sleeper", instructions: "", tools: [sleepy] })
      const fiber = yield* Effect.forkChild(Agent.run(agent, "go"))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const exit = yield* Effect.exit(Fiber.join(fiber))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      expect(finalized).toBe(true)
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "sleepy" }] }, "never reached"]))))

  it.effect("interrupting a stream's consumer interrupts the run and the tool in flight", () =>
    Effect.gen(function*() {
      let finalized = false
      const started = yield* Deferred.make<void>()
      const sleepy = Tool.make({
        name: "sleepy",
        description: "",
        parameters: Schema.Struct({}),
        handler: () =>
          Deferred.succeed(started, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => { finalized = true }))
          )
      })
      const agent = Agent.make({ name: "sleeper", instructions: "", tools: [sleepy] })
      const seen: Array<string> = []
      const consumer = yield* Agent.stream(agent, "go").pipe(
        Stream.runForEach((event) => Effect.sync(() => seen.push(event._tag))),
        Effect.forkChild
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(consumer)
      expect(finalized).toBe(true)
      expect(seen).not.toContain("RunCompleted")
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "sleepy" }] }]))))

  it.effect("an invalid session id or maxTurns fails with a typed error before anything runs", () =>
    Effect.gen(function*() {
      const badId = yield* Effect.flip(Agent.run(calculator, "x", { sessionId: "a__b" }))
      expect(badId).toBeInstanceOf(AgentError.InvalidOptions)
      // The same check, exported for ids a client chooses.
      expect(badId.message).toBe(`Agent: ${Agent.sessionIdProblem("a__b")}`)
      expect(Agent.sessionIdProblem("sess_1:a.b-c")).toBeUndefined()
      expect(Agent.sessionIdProblem("x".repeat(129))).toMatch(/at most 128 characters/)
      expect(Schema.is(Agent.SessionId)("../etc")).toBe(false)
      const badTurns = yield* Effect.flip(Agent.run(Agent.make({ name: "z", instructions: "", maxTurns: 0 }), "x"))
      expect(badTurns).toBeInstanceOf(AgentError.InvalidAgent)
      expect(yield* ScriptedModel.calls).toHaveLength(0)
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("cancel: the run stops at once and ends interrupted (cancelled) with its result, where interrupting would leave none", () =>
    Effect.gen(function*() {
      const cancelled = yield* Deferred.make<void>()
      const slow = Agent.make({ name: "slow", instructions: "" })
      const fiber = yield* Agent.run(slow, "x", { cancel: Deferred.await(cancelled) }).pipe(Effect.forkChild)
      yield* TestClock.adjust("1 second")
      yield* Deferred.succeed(cancelled, undefined)
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ interrupted: true, interruptionReason: "cancelled", modelCalls: 1, output: "" })
      // The model call in flight (an hour long) was interrupted, not waited for: the clock only moved a second.
      expect(yield* ScriptedModel.remaining).toBe(0)
    }).pipe(Effect.provide(ScriptedModel.layer([{ text: "late", delay: "1 hour" }]))))

  it.effect("generated session ids are sess_<unique>", () =>
    Effect.gen(function*() {
      const a = yield* Agent.run(Agent.make({ name: "a", instructions: "" }), "x")
      const b = yield* Agent.run(Agent.make({ name: "a", instructions: "" }), "x")
      expect(a.sessionId).toMatch(/^sess_[0-9a-f]{20}$/)
      expect(a.sessionId).not.toBe(b.sessionId)
    }).pipe(Effect.provide(ScriptedModel.layer(["1", "2"]))))

  it.effect("a consumer slower than the run: events wait for room in the stream and keep their order", () =>
    Effect.gen(function*() {
      // 400 steps make about 1,600 events, more than the stream buffers (1,024): the run has to wait for the reader.
      const steps = 400
      const agent = Agent.make({ name: "long", instructions: "", tools: [add], maxTurns: steps + 1 })
      const events = yield* Agent.stream(agent, "go", { textDeltas: false }).pipe(
        Stream.tap(() => Effect.yieldNow),
        Stream.runCollect
      )
      const tags = events.map((event) => event._tag)
      const step = ["ModelCalled", "ModelReplied", "ToolCalled", "ToolReturned"]
      expect(tags).toEqual([
        "RunStarted",
        ...Array.from({ length: steps - 1 }, () => step).flat(),
        "ModelCalled",
        "ModelReplied",
        "RunCompleted"
      ])
      const returned = events.filter((event) => event._tag === "ToolReturned")
      expect(returned.map((event) => event.content)).toEqual(Array.from({ length: steps - 1 }, (_, i) => String(3 * (i + 1))))
    }).pipe(
      Effect.provide(ScriptedModel.layer((_request, index) =>
        index < 399 ? { toolCalls: [{ name: "add", arguments: { a: index + 1, b: 2 * (index + 1) } }] } : "done"
      ))
    ))

  it("a streamed run that never waits streams without an event-loop turn (the run starts on the reader's turn)", async () => {
    // A run forked onto the scheduler would wait for a `setImmediate` (a turn of the event loop) per hop.
    let turned = false
    setImmediate(() => {
      turned = true
    })
    const events = await Effect.runPromise(
      Agent.stream(calculator, "2 + 3?").pipe(Stream.runCollect, Effect.provide(ScriptedModel.context(script)))
    )
    expect(turned).toBe(false)
    expect(events[0]!._tag).toBe("RunStarted")
    expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "The answer is 5.", modelCalls: 2 } })
  })

  it.effect("one Agent.run effect run twice makes two runs with their own session ids", () =>
    Effect.gen(function*() {
      const once = Agent.run(Agent.make({ name: "a", instructions: "" }), "x")
      const [a, b] = [yield* once, yield* once]
      expect(a.output).toBe("1")
      expect(b.output).toBe("2")
      expect(a.sessionId).not.toBe(b.sessionId)
    }).pipe(Effect.provide(ScriptedModel.layer(["1", "2"]))))

  it.effect("Agent.run is traced by an invoke_agent span: the caller's child, the parent of work in tools, ended with the run", () =>
    Effect.gen(function*() {
      const seen: Array<Tracer.AnySpan> = []
      const probe = Tool.make({
        name: "probe",
        description: "",
        parameters: Schema.Struct({}),
        handler: () => Effect.map(Effect.currentSpan, (span) => (seen.push(span), "ok"))
      })
      const agent = Agent.make({ name: "traced", instructions: "", tools: [probe] })
      const result = yield* Agent.run(agent, "x").pipe(Effect.withSpan("caller"))
      expect(result.output).toBe("done")
      // Effect's built-in tracer: the run's span alone (model and tool call spans need a tracer installed: see
      // test/serve/Telemetry.test.ts).
      const span = seen[0] as Tracer.Span
      expect(span.name).toBe("invoke_agent traced")
      expect(span.attributes.get("gen_ai.agent.name")).toBe("traced")
      expect(span.attributes.get("valet.session_id")).toBe(result.sessionId)
      expect(span.parent._tag === "Some" && span.parent.value._tag === "Span" ? span.parent.value.name : undefined).toBe("caller")
      expect(span.status._tag).toBe("Ended")
      const failed = yield* Effect.exit(Agent.run(agent, "x", { sessionId: "bad__id" }))
      expect(Exit.isFailure(failed)).toBe(true)
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "probe" }] }, "done"]))))
})
