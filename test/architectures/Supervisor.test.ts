import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import { Agent, AgentError, AgentEvent, type Architecture, Model, ScriptedModel, Supervisor, Tool } from "../../src/index.js"

const toolResults = (request: Model.Request) =>
  (request.messages ?? []).filter((message): message is Model.ToolMessage => message.role === "tool")

const researcher = Agent.make({ name: "researcher", instructions: "Find facts.\nCite sources." })
const writer = Agent.make({ name: "writer", instructions: "Write clear prose." })

const lead = (architecture: Architecture.Architecture<Model.Model>) =>
  Agent.make({ name: "lead", instructions: "You run a small newsroom.", architecture })

const delegate = (worker: string, instructions: string, id?: string) => ({
  name: "delegate",
  arguments: { worker, instructions },
  ...(id !== undefined ? { id } : {})
})

describe("Supervisor", () => {
  it.effect("delegationTimeout: a worker still running is interrupted and the coordinator reads that it timed out", () =>
    Effect.gen(function*() {
      let stopped = false
      const slow = Agent.make({
        name: "researcher",
        instructions: "Find facts.",
        model: ScriptedModel.layer(() =>
          Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => void (stopped = true))))
        )
      })
      const architecture = yield* Supervisor.make({ workers: [slow], delegationTimeout: "5 seconds" })
      const fiber = yield* Agent.run(lead(architecture), "Facts about otters.").pipe(Effect.forkChild)
      yield* TestClock.adjust("6 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.output).toBe("The researcher did not answer in time.")
      expect(stopped).toBe(true)
      const second = (yield* ScriptedModel.calls)[1]!
      expect(toolResults(second)[0]!.content).toBe('ERROR: tool "delegate" failed: DelegationFailed: worker "researcher" timed out after 5s')
      expect(result.metadata).toMatchObject({ delegations: [{ worker: "researcher", error: "timed out after 5s" }] })
    }).pipe(Effect.provide(ScriptedModel.layer([
      { toolCalls: [delegate("researcher", "Otter facts")] },
      "The researcher did not answer in time."
    ]))))

  it.effect("two delegations in one turn run concurrently (a two-party barrier); worker events stream under their sessions", () =>
    Effect.gen(function*() {
      const arrived = yield* Ref.make(0)
      const bothStarted = yield* Deferred.make<void>()
      // Each worker's model waits until both workers are being called: one after the other, the first waits forever.
      const barrierModel = (answer: string) =>
        ScriptedModel.layer(() =>
          Effect.gen(function*() {
            if ((yield* Ref.updateAndGet(arrived, (n) => n + 1)) === 2) yield* Deferred.succeed(bothStarted, undefined)
            yield* Deferred.await(bothStarted)
            return answer
          })
        )
      const architecture = yield* Supervisor.make({
        workers: [
          Agent.make({ name: "researcher", instructions: "Find facts.", model: barrierModel("Otters hold hands.") }),
          Agent.make({ name: "writer", instructions: "Write clear prose.", model: barrierModel("A draft about otters.") })
        ]
      })
      const events = yield* Agent.stream(lead(architecture), "Write about otters.", { sessionId: "sup", textDeltas: false })
        .pipe(Stream.runCollect)
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("Otters hold hands; the draft is ready.")
      expect(result.modelCalls).toBe(4)
      expect(result.interrupted).toBe(false)
      expect(result.metadata).toMatchObject({
        turns: 2,
        delegations: [
          { worker: "researcher", n: 1, sessionId: "sup__worker_researcher_1", output: "Otters hold hands." },
          { worker: "writer", n: 1, sessionId: "sup__worker_writer_1", output: "A draft about otters." }
        ]
      })
      // The workers' own runs are in the merged stream under their session ids.
      for (const session of ["sup__worker_researcher_1", "sup__worker_writer_1"]) {
        const own = events.filter(AgentEvent.belongsTo(session)).map((event) => event._tag)
        expect(own[0]).toBe("RunStarted")
        expect(own).toContain("ModelReplied")
        expect(own.at(-1)).toBe("RunCompleted")
      }
      const [root] = AgentEvent.tree(events)
      expect(root!.children.map((child) => child.sessionId)).toEqual(["sup__worker_researcher_1", "sup__worker_writer_1"])
      const calls = yield* ScriptedModel.calls
      expect(calls[0]!.messages![0]!.content).toContain("You run a small newsroom.")
      expect(calls[0]!.messages![0]!.content).toContain("- researcher: Find facts.\n- writer: Write clear prose.")
      // Results in call order, whichever worker finished first.
      expect(toolResults(calls[1]!).map((message) => [message.toolCallId, message.content])).toEqual([
        ["d1", "Otters hold hands."],
        ["d2", "A draft about otters."]
      ])
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [delegate("researcher", "Facts about otters", "d1"), delegate("writer", "Draft on otters", "d2")] },
        "Otters hold hands; the draft is ready."
      ]))
    ))

  it.effect("the delegate tool offers the worker names as an enum, described from the workers' instructions", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher, writer] })
      yield* Agent.run(lead(architecture), "hi")
      const [call] = yield* ScriptedModel.calls
      const tool = call!.tools!.find((definition) => definition.name === "delegate")!
      expect(tool.description).toContain("- researcher: Find facts.\n- writer: Write clear prose.")
      expect(tool.parameters).toMatchObject({
        type: "object",
        required: ["worker", "instructions"],
        properties: { worker: { enum: ["researcher", "writer"] } }
      })
      const forward = call!.tools!.find((definition) => definition.name === "forward_message")!
      expect(forward.parameters).toMatchObject({ properties: { worker: { enum: ["researcher", "writer"] } } })
    }).pipe(Effect.provide(ScriptedModel.layer(["Hello."]))))

  it.effect("an unknown worker is an ERROR: result the coordinator reads, not a crash", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher, writer] })
      const result = yield* Agent.run(lead(architecture), "task")
      expect(result.output).toBe("Facts: the sea is salty.")
      expect(result.modelCalls).toBe(4)
      const calls = yield* ScriptedModel.calls
      const [unknown] = toolResults(calls[1]!)
      expect(unknown!.content).toMatch(/^ERROR: invalid arguments for tool "delegate": /)
      expect(unknown!.content).toContain('worker must be one of the workers (researcher, writer), got "poet"')
      expect(toolResults(calls[3]!).at(-1)!.content).toBe("the sea is salty")
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [delegate("poet", "A poem")] },
        { toolCalls: [delegate("researcher", "Facts")] },
        "the sea is salty",
        "Facts: the sea is salty."
      ]))
    ))

  it.effect("forward_message returns the worker's answer verbatim as the run's output, and ends the run", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher, writer] })
      const events = yield* Agent.stream(lead(architecture), "task", { textDeltas: false }).pipe(
        Stream.runCollect
      )
      const result = (events.at(-1) as AgentEvent.Of<"RunCompleted">).result
      expect(result.output).toBe("  # Otters\n\nThey hold hands while sleeping.  \n")
      expect(result.modelCalls).toBe(3)
      expect(result.metadata).toMatchObject({ forwardedFrom: "writer", turns: 2 })
      expect(events.some((event) => event._tag === "Progress" && event.name === "supervisor.forwarded")).toBe(true)
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [delegate("writer", "Write about otters")] },
        "  # Otters\n\nThey hold hands while sleeping.  \n",
        { text: "Passing it on.", toolCalls: [{ name: "forward_message", arguments: { worker: "writer" } }] }
      ]))
    ))

  it.effect("forward_message in the same turn as the delegation reads that delegation's answer", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher, writer] })
      const result = yield* Agent.run(lead(architecture), "task")
      expect(result.output).toBe("fresh facts")
      expect(result.modelCalls).toBe(2)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { name: "forward_message", arguments: { worker: "researcher" } },
            delegate("researcher", "Facts")
          ]
        },
        "fresh facts"
      ]))
    ))

  it.effect("forward_message before a worker answered, and a failing worker, are ERROR: results", () =>
    Effect.gen(function*() {
      const failing = Agent.make({ name: "flaky", instructions: "Unreliable.", model: ScriptedModel.layer([]) })
      const architecture = yield* Supervisor.make({ workers: [researcher, failing] })
      const result = yield* Agent.run(lead(architecture), "task", { sessionId: "s" })
      expect(result.output).toBe("Nobody could help.")
      const calls = yield* ScriptedModel.calls
      const [early, broken] = toolResults(calls[1]!)
      expect(early!.content).toBe(
        'ERROR: tool "forward_message" failed: DelegationFailed: worker "researcher" has not answered yet: delegate to it first'
      )
      expect(broken!.content).toMatch(/^ERROR: tool "delegate" failed: DelegationFailed: worker "flaky" failed: ScriptExhausted: /)
      expect(result.metadata).toMatchObject({
        delegations: [{ worker: "flaky", sessionId: "s__worker_flaky_1", error: expect.stringMatching(/^failed: ScriptExhausted/) }]
      })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "forward_message", arguments: { worker: "researcher" } }, delegate("flaky", "Try")] },
        "Nobody could help."
      ]))
    ))

  it.effect("the same worker twice in one turn gets two sessions, _1 and _2", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher] })
      const result = yield* Agent.run(lead(architecture), "task", { sessionId: "s" })
      expect(result.metadata).toMatchObject({
        delegations: [
          { sessionId: "s__worker_researcher_1", output: "a" },
          { sessionId: "s__worker_researcher_2", output: "b" }
        ]
      })
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [delegate("researcher", "one"), delegate("researcher", "two")] },
        "a",
        "b",
        "done"
      ]))
    ))

  it.effect("a spent budget stops it cleanly: interrupted budget:max_calls with the last worker answer", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher, writer] })
      const result = yield* Agent.run(lead(architecture), "task", { budget: { maxCalls: 2 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.output).toBe("some facts")
      expect(result.modelCalls).toBe(2)
      // The run ended in the coordinator's second turn: its metadata still says what was delegated.
      expect(result.metadata).toEqual({
        turns: 1,
        delegations: [{ worker: "researcher", n: 1, sessionId: expect.stringMatching(/__worker_researcher_1$/), instructions: "Facts", output: "some facts" }]
      })
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [delegate("researcher", "Facts")] }, "some facts"]))))

  it.effect("concurrency bounds the delegations in flight; maxConcurrency, its deprecated name, does the same", () =>
    Effect.gen(function*() {
      // Each worker's call yields a few times while it counts itself in flight: unbounded, the two overlap.
      const mostInFlight = (options: Omit<Supervisor.Options, "workers">) =>
        Effect.gen(function*() {
          let inFlight = 0
          let most = 0
          const counting = ScriptedModel.layer(() =>
            Effect.gen(function*() {
              most = Math.max(most, ++inFlight)
              for (let i = 0; i < 5; i++) yield* Effect.yieldNow
              inFlight--
              return "done"
            })
          )
          const architecture = yield* Supervisor.make({
            ...options,
            workers: [
              Agent.make({ name: "researcher", instructions: "", model: counting }),
              Agent.make({ name: "writer", instructions: "", model: counting })
            ]
          })
          const result = yield* Agent.run(lead(architecture), "task").pipe(Effect.provide(ScriptedModel.layer([
            { toolCalls: [delegate("researcher", "a"), delegate("writer", "b")] },
            "both done"
          ])))
          expect(result.output).toBe("both done")
          return most
        })
      expect(yield* mostInFlight({})).toBe(2)
      expect(yield* mostInFlight({ concurrency: 1 })).toBe(1)
      expect(yield* mostInFlight({ maxConcurrency: 1 })).toBe(1)
    }))

  it.effect("maxTurns coordinator turns end the run with max_turns_exceeded", () =>
    Effect.gen(function*() {
      const architecture = yield* Supervisor.make({ workers: [researcher], maxTurns: 1 })
      const result = yield* Agent.run(lead(architecture), "task")
      expect(result.interruptionReason).toBe("max_turns_exceeded")
      expect(result.output).toBe("facts")
      expect(result.modelCalls).toBe(2)
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [delegate("researcher", "Facts")] }, "facts"]))))

  it.effect("interrupting the run stops every worker in flight at once", () =>
    Effect.gen(function*() {
      const waiting = yield* Ref.make(0)
      const bothWaiting = yield* Deferred.make<void>()
      const stopped = yield* Ref.make(0)
      const stuck = ScriptedModel.layer(() =>
        Effect.gen(function*() {
          if ((yield* Ref.updateAndGet(waiting, (n) => n + 1)) === 2) yield* Deferred.succeed(bothWaiting, undefined)
          return yield* Effect.never
        }).pipe(Effect.onInterrupt(() => Ref.update(stopped, (n) => n + 1)))
      )
      const architecture = yield* Supervisor.make({
        workers: [
          Agent.make({ name: "a", instructions: "", model: stuck }),
          Agent.make({ name: "b", instructions: "", model: stuck })
        ]
      })
      const coordinator = ScriptedModel.layer([{ toolCalls: [delegate("a", "x"), delegate("b", "y")] }])
      const fiber = yield* Effect.forkChild(Agent.run(lead(architecture), "task").pipe(Effect.provide(coordinator)))
      yield* Deferred.await(bothWaiting)
      yield* Fiber.interrupt(fiber)
      const exit = yield* Effect.exit(Fiber.join(fiber))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      expect(yield* Ref.get(stopped)).toBe(2)
    }))

  it.effect("invalid options fail with InvalidOptions naming the field; a clashing own tool fails the run", () =>
    Effect.gen(function*() {
      const empty = yield* Effect.flip(Supervisor.make({ workers: [] }))
      expect(empty).toBeInstanceOf(AgentError.InvalidOptions)
      expect(empty.module).toBe("Supervisor")
      expect(empty.message).toContain("workers")
      const twice = yield* Effect.flip(Supervisor.make({ workers: [researcher, researcher] }))
      expect(twice.message).toContain('two agents are named "researcher"')
      const badName = yield* Effect.flip(
        Supervisor.make({ workers: [Agent.make({ name: "web search", instructions: "" })] })
      )
      expect(badName.message).toContain('"web search"')
      expect((yield* Effect.flip(Supervisor.make({ workers: [writer], maxTurns: 0 }))).message).toContain("maxTurns")

      const clashing = Agent.make({
        name: "lead",
        instructions: "",
        architecture: yield* Supervisor.make({ workers: [writer] }),
        tools: [Tool.make({ name: "delegate", description: "", parameters: Schema.Struct({}), handler: () => Effect.void })]
      })
      const error = yield* Effect.flip(Agent.run(clashing, "task"))
      expect(error).toBeInstanceOf(AgentError.InvalidAgent)
      expect(error.message).toContain('"delegate"')
      expect(yield* ScriptedModel.calls).toHaveLength(0)
    }).pipe(Effect.provide(ScriptedModel.layer([]))))
})
