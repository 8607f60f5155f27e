/**
 * ReWOO: one plan, real tool calls as a DAG with `{{E1}}` references, one solver call. Every way a plan is written
 * (fenced, in prose, default ids, E2 before E10), bad plans shown back once then a typed InvalidPlan, failed steps
 * whose dependents are skipped (never fed an empty string), concurrent steps (and the old `parallel`), budgets, record /
 * replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Layer, Ref, Result, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ReWOO from "../../src/architectures/ReWOO.js"
import * as Agent from "../../src/core/Agent.js"
import * as Journal from "../../src/core/Journal.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const lastUser = (request: Model.Request) => request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? ""

const search = Tool.make({
  name: "search",
  description: "Searches the web.",
  parameters: Schema.Struct({ query: Schema.String }),
  handler: ({ query }) => query.includes("fail") ? Effect.fail("the search service is down") : Effect.succeed(`results for ${query}`)
})
const calculator = Tool.make({
  name: "calculate",
  description: "Evaluates arithmetic.",
  parameters: Schema.Struct({ expression: Schema.String }),
  handler: ({ expression }) => Effect.succeed(`${expression} = 42`)
})

const researcher = (architecture = ReWOO.architecture) =>
  Agent.make({ name: "researcher", instructions: "Research carefully.", tools: [search, calculator], architecture })

const plan = (steps: ReadonlyArray<unknown>) => JSON.stringify(steps)

describe("ReWOO", () => {
  it.effect("a plan, its steps as real tool calls with {{E1}} filled in, and one solver call that sees every result in order", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(researcher(), "How tall is the Eiffel tower in feet?", { sessionId: "r" }))
      const calls = yield* ScriptedModel.calls
      expect(calls).toHaveLength(2)
      expect(calls[0]!.messages![0]!.content).toContain("- search: Searches the web.")
      const tools = events.filter((event) => event._tag === "ToolCalled").map((event) => [event.name, JSON.parse(event.arguments)])
      expect(tools).toEqual([
        ["search", { query: "Eiffel tower height" }],
        ["calculate", { expression: "results for Eiffel tower height × 3.28" }]
      ])
      expect(lastUser(calls[1]!)).toContain("E1 (search): results for Eiffel tower height\nE2 (calculate): results for Eiffel tower height × 3.28 = 42")
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "About 1,083 feet.", modelCalls: 2 } })
      const progress = events.filter((event) => event._tag === "Progress").map((event) => event.name)
      expect(progress).toEqual(["rewoo.plan", "rewoo.step_started", "rewoo.step_completed", "rewoo.step_started", "rewoo.step_completed"])
    }).pipe(Effect.provide(ScriptedModel.layer([
      `Here is my plan:\n\`\`\`json\n${plan([
        { id: "E1", tool: "search", args: { query: "Eiffel tower height" } },
        { id: "E2", tool: "calculate", args: { expression: "{{E1}} × 3.28" } }
      ])}\n\`\`\``,
      "About 1,083 feet."
    ]))))

  it("plans: default ids, E2 before E10, and every kind of bad plan named", () => {
    const tools = new Set(["search", "calculate"])
    const ids = (text: string) => Result.map(ReWOO.parsePlan(text, tools, 20), (steps) => steps.map((step) => step.id))
    expect(ids(plan([{ tool: "search", args: { query: "a" } }, { tool: "search", args: { query: "b" } }]))).toEqual(Result.succeed(["E1", "E2"]))
    expect(ids(plan([{ id: "E10", tool: "search" }, { id: "E2", tool: "search" }, { id: "E1", tool: "search" }]))).toEqual(Result.succeed(["E1", "E2", "E10"]))
    const problem = (steps: ReadonlyArray<unknown> | string) => {
      const parsed = ReWOO.parsePlan(typeof steps === "string" ? steps : plan(steps), tools, 20)
      return Result.isFailure(parsed) ? parsed.failure : "accepted"
    }
    expect(problem([{ id: "E1", tool: "browse" }])).toBe('step E1 uses the unknown tool "browse" (tools: search, calculate)')
    expect(problem([{ id: "E1", tool: "search" }, { id: "E1", tool: "search" }])).toBe("two steps have the id E1")
    expect(problem([{ id: "E1", tool: "search", args: { q: "{{E9}}" } }])).toBe("step E1 refers to {{E9}}, which no step is")
    expect(problem([{ id: "E1", tool: "search", args: { q: "{{E2}}" } }, { id: "E2", tool: "search", args: { q: "{{E1}}" } }])).toBe(
      "the steps refer to each other in a circle: E1 → E2 → E1"
    )
    expect(problem("I would search the web.")).toMatch(/^the plan is not a JSON array of \{"id", "tool", "args"\} steps/)
  })

  it.effect("a bad plan is shown to the planner once; the corrected plan runs", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(researcher(), "x")
      expect(result.output).toBe("done")
      const calls = yield* ScriptedModel.calls
      expect(lastUser(calls[1]!)).toBe('That plan cannot run: step E1 uses the unknown tool "browse" (tools: search, calculate). Write the corrected plan, as a JSON array only.')
    }).pipe(Effect.provide(ScriptedModel.layer([plan([{ tool: "browse" }]), plan([{ tool: "search", args: { query: "x" } }]), "done"]))))

  it.effect("two bad plans: the run fails with a typed InvalidPlan naming the problem", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(researcher(), "x", { sessionId: "bad" }))
      expect(error).toMatchObject({ _tag: "InvalidPlan", problem: "two steps have the id E1" })
      expect(error.message).toBe("the plan of bad cannot run: two steps have the id E1")
    }).pipe(Effect.provide(ScriptedModel.layer([plan([{ tool: "browse" }]), plan([{ id: "E1", tool: "search" }, { id: "E1", tool: "search" }])]))))

  it.effect("a failed step: its dependents are skipped with the failure, never fed an empty result; the solver sees both", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(researcher(), "x"))
      const called = events.filter((event) => event._tag === "ToolCalled").map((event) => event.name)
      expect(called).toEqual(["search", "search"])
      const solver = lastUser((yield* ScriptedModel.calls)[1]!)
      expect(solver).toContain("E1 (search) FAILED:")
      expect(solver).toContain("the search service is down")
      expect(solver).toContain("E2 (calculate) SKIPPED: E1 failed:")
      expect(solver).toContain("E3 (search): results for fine")
      expect(events.filter((event) => event._tag === "Progress" && event.name === "rewoo.step_skipped")).toHaveLength(1)
      const steps = (events.at(-1) as unknown as { result: { metadata: { steps: ReadonlyArray<{ _tag: string }> } } }).result.metadata.steps
      expect(steps.map((step) => step._tag)).toEqual(["Failed", "Skipped", "Done"])
    }).pipe(Effect.provide(ScriptedModel.layer([
      plan([
        { id: "E1", tool: "search", args: { query: "fail please" } },
        { id: "E2", tool: "calculate", args: { expression: "{{E1}} + 1" } },
        { id: "E3", tool: "search", args: { query: "fine" } }
      ]),
      "Partly answered."
    ]))))

  it.effect("independent steps run at once (a two-party barrier)", () =>
    Effect.gen(function*() {
      const arrived = yield* Ref.make(0)
      const both = yield* Deferred.make<void>()
      const barrier = Tool.make({
        name: "search",
        description: "",
        parameters: Schema.Struct({ query: Schema.String }),
        handler: ({ query }) =>
          Effect.gen(function*() {
            if ((yield* Ref.updateAndGet(arrived, (n) => n + 1)) === 2) yield* Deferred.succeed(both, undefined)
            yield* Deferred.await(both)
            return query
          })
      })
      const agent = Agent.make({ name: "r", instructions: "", tools: [barrier], architecture: ReWOO.architecture })
      const result = yield* Agent.run(agent, "x").pipe(Effect.provide(ScriptedModel.layer([
        plan([{ tool: "search", args: { query: "a" } }, { tool: "search", args: { query: "b" } }]),
        "both"
      ])))
      expect(result.output).toBe("both")
    }))

  it.effect("concurrency: 1 runs one step at a time; the old parallel: false does the same and parallel: true runs them all at once", () =>
    Effect.gen(function*() {
      // Counts the steps in flight at once; each step waits a turn so that others could start.
      const inFlight = yield* Ref.make(0)
      const most = yield* Ref.make(0)
      const counting = Tool.make({
        name: "search",
        description: "",
        parameters: Schema.Struct({ query: Schema.String }),
        handler: ({ query }) =>
          Effect.gen(function*() {
            const now = yield* Ref.updateAndGet(inFlight, (n) => n + 1)
            yield* Ref.update(most, (m) => Math.max(m, now))
            yield* Effect.yieldNow
            yield* Ref.update(inFlight, (n) => n - 1)
            return query
          })
      })
      const script = [plan([1, 2, 3].map((i) => ({ tool: "search", args: { query: `q${i}` } }))), "done"]
      const mostInFlight = (options: ReWOO.Options) =>
        Effect.gen(function*() {
          yield* Ref.set(most, 0)
          const agent = Agent.make({ name: "r", instructions: "", tools: [counting], architecture: ReWOO.makeUnsafe(options) })
          const result = yield* Agent.run(agent, "x").pipe(Effect.provide(ScriptedModel.layer(script)))
          expect(result.output).toBe("done")
          return yield* Ref.get(most)
        })
      expect(yield* mostInFlight({ concurrency: 1 })).toBe(1)
      expect(yield* mostInFlight({ parallel: false })).toBe(1)
      expect(yield* mostInFlight({ concurrency: 2 })).toBe(2)
      expect(yield* mostInFlight({})).toBe(3)
      expect(yield* mostInFlight({ parallel: true })).toBe(3)
    }))

  it.effect("options are checked; a solver template with the old {problem} placeholder still gets the task", () =>
    Effect.gen(function*() {
      const message = (options: ReWOO.Options) => Effect.map(Effect.flip(ReWOO.make(options)), (e) => e.message)
      expect(yield* message({ maxSteps: 0 })).toBe("ReWOO: maxSteps must be an integer >= 1, got 0")
      expect(yield* message({ concurrency: 0 })).toBe("ReWOO: concurrency must be an integer >= 1, got 0")
      expect(yield* message({ solverPrompt: "{task} {nope}" })).toMatch(/^ReWOO: solverPrompt has unknown placeholder \{nope\}/)
      const architecture = ReWOO.makeUnsafe({ solverPrompt: "Problem: {problem}\nEvidence: {evidence}" })
      yield* Agent.run(researcher(architecture), "How tall is it?")
      expect(lastUser((yield* ScriptedModel.calls)[1]!)).toBe("Problem: How tall is it?\nEvidence: E1 (search): results for a")
    }).pipe(Effect.provide(ScriptedModel.layer([plan([{ tool: "search", args: { query: "a" } }]), "tall"]))))

  it.effect("a spent budget ends the run interrupted with the evidence so far", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(researcher(), "x", { budget: { maxCalls: 1 } })
      expect(result).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "E1 (search): results for a" })
      // The plan and what became of its steps, as a completed run reports them.
      expect(result.metadata).toEqual({
        plan: [{ id: "E1", tool: "search", args: { query: "a" } }],
        steps: [{ _tag: "Done", id: "E1", tool: "search", result: "results for a" }]
      })
    }).pipe(Effect.provide(ScriptedModel.layer([plan([{ tool: "search", args: { query: "a" } }]), "never"]))))

  it.effect("record / replay", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-rewoo-"))
      try {
        const cassette = join(dir, "rewoo.jsonl")
        const script = [plan([{ tool: "search", args: { query: "a" } }, { tool: "calculate", args: { expression: "{{E1}}" } }]), "answer"]
        const recorded = yield* Agent.run(researcher(), "x", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(ScriptedModel.layer(script))))
        )
        const replayed = yield* Agent.run(researcher(), "x", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe("answer")
        expect(replayed.metadata).toEqual(recorded.metadata)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
