import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import { Agent, AgentError, AgentEvent, Architecture, Model, ReAct, ScriptedModel, SelfRefine, Tool } from "../../src/index.js"
import { adjustWhenSleeping } from "../support/clock.js"

const lastUser = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).filter((message) => message.role === "user").at(-1)?.content ?? "")

const progress = (events: ReadonlyArray<AgentEvent.AgentEvent>) =>
  events.flatMap((event) => (event._tag === "Progress" ? [[event.name, event.data] as const] : []))

const writer = (architecture: Architecture.Architecture<Model.Model>) =>
  Agent.make({ name: "writer", instructions: "You write short answers.", architecture })

describe("SelfRefine", () => {
  it.effect("the critic finds no issues at once: the base's draft, two calls", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(writer(SelfRefine.architecture), "Explain tides.", { sessionId: "sr" })
      expect(result.output).toBe("draft")
      expect(result.modelCalls).toBe(2)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toEqual({ rounds: 1, converged: true, critiques: ["no issues"], outputs: ["draft"] })
      const calls = yield* ScriptedModel.calls
      // The base is the agent itself: its instructions, then the task.
      expect(calls[0]!.messages).toEqual([Model.system("You write short answers."), Model.user("Explain tides.")])
      // The critic sees the task and the draft, and is told the stop phrase.
      expect(lastUser(calls[1]!)).toContain("Task:\nExplain tides.")
      expect(lastUser(calls[1]!)).toContain("Answer:\ndraft")
      expect(lastUser(calls[1]!)).toContain(`reply with exactly "no issues"`)
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["draft", "no issues"]))))

  it.effect("the critic's and the refiner's requests of a round start alike: the task and the answer, then their instructions", () =>
    Effect.gen(function*() {
      yield* Agent.run(writer(SelfRefine.architecture), "Explain tides.")
      const calls = yield* ScriptedModel.calls
      const [critic, refiner] = [JSON.stringify(calls[1]!.messages), JSON.stringify(calls[2]!.messages)]
      let shared = 0
      while (shared < critic.length && critic[shared] === refiner[shared]) shared++
      // What a prefix cache can serve the refiner from the critic's request: everything up to the instructions.
      expect(critic.slice(0, shared)).toContain("Task:\\nExplain tides.\\n\\nAnswer:\\ndraft\\n\\n")
    }).pipe(Effect.provide(ScriptedModel.layer(["draft", "too short", "longer draft", "no issues"]))))

  it.effect("a critique, a refinement, then a case-insensitive stop phrase: the refined answer, four calls", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(writer(SelfRefine.architecture), "Explain tides.", { sessionId: "sr", textDeltas: false })
        .pipe(Stream.runCollect)
      const last = events.at(-1)!
      expect(last._tag).toBe("RunCompleted")
      const result = (last as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("polished")
      expect(result.modelCalls).toBe(4)
      expect(progress(events)).toEqual([
        ["self_refine.round_started", { round: 1 }],
        ["self_refine.critique", { round: 1, critique: "missing examples" }],
        ["self_refine.refined", { round: 1, output: "polished" }],
        ["self_refine.round_started", { round: 2 }],
        ["self_refine.critique", { round: 2, critique: "No Issues found." }],
        ["self_refine.converged", { round: 2 }]
      ])
      expect([...new Set(events.map((event) => event.sessionId))]).toEqual([
        "sr",
        "sr__base",
        "sr__critic_1",
        "sr__refiner_1",
        "sr__critic_2"
      ])
      const calls = yield* ScriptedModel.calls
      const refine = lastUser(calls[2]!)
      expect(refine).toContain("Answer:\nrough")
      expect(refine).toContain("Review:\nmissing examples")
      expect(lastUser(calls[3]!)).toContain("Answer:\npolished")
    }).pipe(Effect.provide(ScriptedModel.layer(["rough", "missing examples", "polished", "No Issues found."]))))

  it.effect("maxRounds: 2 with critiques that never converge: five calls, the last refinement, max_rounds_reached", () =>
    Effect.gen(function*() {
      const architecture = yield* SelfRefine.make({ maxRounds: 2 })
      const events = yield* Agent.stream(writer(architecture), "task", { textDeltas: false }).pipe(
        Stream.runCollect
      )
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("v3")
      expect(result.modelCalls).toBe(5)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({ rounds: 2, converged: false, outputs: ["v1", "v2", "v3"] })
      expect(progress(events).at(-1)).toEqual(["self_refine.max_rounds_reached", { rounds: 2 }])
      expect(progress(events).some(([name]) => name === "self_refine.converged")).toBe(false)
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["v1", "too long", "v2", "still too long", "v3"]))))

  it.effect("maxRounds absent or undefined: the default of three rounds, seven calls", () =>
    Effect.forEach([{}, { maxRounds: undefined }], (options) =>
      Effect.gen(function*() {
        const architecture = yield* SelfRefine.make(options)
        const result = yield* Agent.run(writer(architecture), "task")
        expect(result.output).toBe("v4")
        expect(result.modelCalls).toBe(7)
        expect(result.metadata).toMatchObject({ rounds: 3, converged: false })
        yield* ScriptedModel.assertConsumed
      }).pipe(Effect.provide(ScriptedModel.layer(["v1", "c1", "v2", "c2", "v3", "c3", "v4"])))
    ))

  it.effect("a spent budget stops it cleanly: interrupted budget:max_calls with the best answer so far", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(writer(SelfRefine.architecture), "task", { budget: { maxCalls: 4 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.output).toBe("v2")
      expect(result.modelCalls).toBe(4)
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["v1", "fix a", "v2", "fix b"]))))

  it.effect("a critic on its own model continues its script across rounds; base and refiner use the run's model", () =>
    Effect.gen(function*() {
      const criticModel = yield* Layer.build(ScriptedModel.layer(["too vague", "no issues at all"]))
      const critic = Agent.make({
        name: "strict-critic",
        instructions: "You are strict.",
        model: Layer.succeedContext(criticModel)
      })
      const architecture = yield* SelfRefine.make({ critic })
      const result = yield* Agent.run(writer(architecture), "task")
      expect(result.output).toBe("precise")
      expect(result.modelCalls).toBe(4)
      const criticCalls = yield* Context.get(criticModel, ScriptedModel.ScriptedModel).calls
      expect(criticCalls).toHaveLength(2)
      expect(criticCalls[0]!.messages![0]).toEqual(Model.system("You are strict."))
      expect(yield* ScriptedModel.calls).toHaveLength(2)
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["vague", "precise"]))))

  it.effect("the base keeps the agent's tools and runs with the given base architecture", () =>
    Effect.gen(function*() {
      const lookup = Tool.make({
        name: "lookup",
        description: "Looks a word up",
        parameters: Schema.Struct({ word: Schema.String }),
        handler: ({ word }) => Effect.succeed(`${word}: the rise and fall of the sea`)
      })
      const base = yield* ReAct.make({ maxTurns: 3 })
      const architecture = yield* SelfRefine.make({ base, maxRounds: 1 })
      const agent = Agent.make({ name: "writer", instructions: "", tools: [lookup], architecture })
      const result = yield* Agent.run(agent, "Define tide.")
      expect(result.output).toBe("Tide: the rise and fall of the sea.")
      expect(result.modelCalls).toBe(3)
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.tools?.map((tool) => tool.name)).toEqual(["lookup"])
      expect(calls[2]!.tools).toBeUndefined()
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "lookup", arguments: { word: "tide" } }] },
        "Tide: the rise and fall of the sea.",
        "No issues."
      ]))
    ))

  it.effect("a base stopped at a limit interrupts with the role's reason and keeps its answer; a failing critic fails the run", () =>
    Effect.gen(function*() {
      const base = yield* ReAct.make({ maxTurns: 1 })
      const looping = Agent.make({
        name: "w",
        instructions: "",
        tools: [Tool.make({ name: "noop", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })],
        architecture: yield* SelfRefine.make({ base })
      })
      const stopped = yield* Agent.run(looping, "task").pipe(
        Effect.provide(ScriptedModel.layer([{ text: "partial", toolCalls: [{ name: "noop" }] }]))
      )
      expect(stopped.interruptionReason).toBe("base:max_turns_exceeded")
      expect(stopped.output).toBe("partial")

      // The same failure that fails a ReAct run fails this one (one rule for every architecture).
      const failed = yield* Effect.flip(Agent.run(writer(SelfRefine.architecture), "task").pipe(
        Effect.provide(ScriptedModel.layer(["first draft"]))
      ))
      expect(failed._tag).toBe("SubAgentFailed")
      expect(failed).toMatchObject({ role: "critic", error: { _tag: "ScriptExhausted" } })
      expect((failed as { sessionId: string }).sessionId).toMatch(/__critic_1$/)
    }))

  it.effect("interrupting the run stops the refiner in flight at once", () =>
    Effect.gen(function*() {
      const calling = yield* Deferred.make<void>()
      let stopped = false
      const model = ScriptedModel.layer((_request, index) =>
        index < 2
          ? Effect.succeed(index === 0 ? "draft" : "too short")
          : Deferred.succeed(calling, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Effect.sync(() => { stopped = true }))
          )
      )
      const fiber = yield* Effect.forkChild(Agent.run(writer(SelfRefine.architecture), "task").pipe(Effect.provide(model)))
      yield* Deferred.await(calling)
      yield* Fiber.interrupt(fiber)
      expect(Exit.hasInterrupts(yield* Effect.exit(Fiber.join(fiber)))).toBe(true)
      expect(stopped).toBe(true)
    }))

  it.effect("a wall-clock budget interrupts a slow critic (TestClock) with budget:wall_clock and the draft", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(
        Agent.run(writer(SelfRefine.architecture), "task", { budget: { maxDuration: "10 seconds" } })
      )
      yield* adjustWhenSleeping("11 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:wall_clock")
      expect(result.output).toBe("draft")
    }).pipe(Effect.provide(ScriptedModel.layer(["draft", { text: "no issues", delay: "1 minute" }]))))

  it.effect("invalid options fail with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const rounds = yield* Effect.flip(SelfRefine.make({ maxRounds: 0 }))
      expect(rounds).toBeInstanceOf(AgentError.InvalidOptions)
      expect(rounds.module).toBe("SelfRefine")
      expect(rounds.message).toContain("maxRounds")
      const phrase = yield* Effect.flip(SelfRefine.make({ stopPhrase: "  " }))
      expect(phrase.message).toContain("stopPhrase")
      const template = yield* Effect.flip(SelfRefine.make({ refinerPrompt: "Fix {output} using {critic}" }))
      expect(template.message).toContain("refinerPrompt")
      expect(template.message).toContain("unknown placeholder {critic}")
      const typo = yield* Effect.flip(SelfRefine.make({ maxRound: 2 } as SelfRefine.Options))
      expect(typo.message).toContain("maxRound")
    }))
})
