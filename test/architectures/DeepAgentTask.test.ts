import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Stream } from "effect"
import { Agent, AgentEvent, Model, ScriptedModel } from "../../src/index.js"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Workspace from "../../src/environment/Workspace.js"

// Who is asking: the prompt of the run (the parent's, or the task's description for a sub-agent).
const promptOf = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).find((message) => message.role === "user")?.content ?? "")
const toolResults = (request: Model.Request): ReadonlyArray<string> =>
  (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))
const toolNames = (request: Model.Request): ReadonlyArray<string> => request.tools?.map((tool) => tool.name) ?? []

const researcher = Agent.make({ name: "researcher", instructions: "You find facts.\nMore lines." })
const deep = (options: { readonly maxTasks?: number; readonly maxTaskDepth?: number; readonly subAgents?: ReadonlyArray<typeof researcher> } = {}) =>
  Agent.make({ name: "lead", instructions: "You lead.", architecture: DeepAgent.makeUnsafe({ maxTurns: 10, ...options }) })

describe("DeepAgent task", () => {
  it.effect("a task's final answer returns to the model and its events carry the sub-run's own session id", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(deep(), "Main"))
      const completed = events.find((event) => event._tag === "RunCompleted" && event.sessionId.indexOf("__") === -1)
      expect(completed?._tag === "RunCompleted" && completed.result.output).toBe("Final: A done")
      const started = events.filter((event): event is AgentEvent.Of<"SubRunStarted"> => event._tag === "SubRunStarted")
      expect(started).toHaveLength(1)
      const child = started[0]!.childSessionId
      expect(child).toBe(`${completed!.sessionId}__task_1`)
      expect(started[0]!.agent).toBe("lead")
      // The sub-run's own events (its model call) are under its session id; the parent's under the parent's.
      expect(events.some((event) => event.sessionId === child && event._tag !== "SubRunStarted")).toBe(true)
      expect(events.some((event) => event._tag === "SubRunCompleted" && event.childSessionId === child)).toBe(true)
      const calls = yield* ScriptedModel.calls
      // The sub-agent had its own context: only its task, not the parent's conversation; the general one has the file tools, no task.
      const sub = calls.find((call) => promptOf(call) === "Sub A")!
      expect((sub.messages ?? []).some((message) => Model.textOf(message.content) === "Main")).toBe(false)
      expect(toolNames(sub)).toContain("read_file")
      expect(toolNames(sub)).not.toContain("task")
      expect(toolNames(calls[0]!)).toContain("task")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer((request) => {
        if (promptOf(request) === "Sub A") return "A done"
        const results = toolResults(request)
        return results.length === 0 ? { toolCalls: [{ name: "task", arguments: { description: "Sub A" } }] } : `Final: ${results[0]}`
      }))
    ))

  it.effect("two tasks in one turn both run, at the same time", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(deep(), "Main")
      expect(result.output).toBe("A: a | B: b")
      expect(counts.subCalls).toBe(2)
      expect(counts.maxInFlight).toBe(2)
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer((request) => {
        const prompt = promptOf(request)
        if (prompt === "A" || prompt === "B") {
          return Effect.gen(function*() {
            counts.subCalls += 1
            counts.inFlight += 1
            counts.maxInFlight = Math.max(counts.maxInFlight, counts.inFlight)
            for (let i = 0; i < 5; i++) yield* Effect.yieldNow
            counts.inFlight -= 1
            return prompt.toLowerCase()
          })
        }
        const results = toolResults(request)
        return results.length === 0
          ? { toolCalls: [{ name: "task", arguments: { description: "A" } }, { name: "task", arguments: { description: "B" } }] }
          : `A: ${results[0]} | B: ${results[1]}`
      }))
    ))

  it.effect("past maxTasks, and past maxTaskDepth, the model reads an error", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(deep({ maxTasks: 1 }), "Main")
      const calls = yield* ScriptedModel.calls
      const last = calls.at(-1)!
      expect(promptOf(last)).toBe("Main")
      const [first, second] = toolResults(last)
      expect(first).toBe("sub done")
      expect(second).toMatch(/at most 1 tasks/)
      // The sub-agent (depth 1 = maxTaskDepth) has no task tool: its call to it is an error it reads.
      const sub = calls.filter((call) => promptOf(call) === "Sub")
      expect(toolNames(sub[0]!)).not.toContain("task")
      expect(toolResults(sub[1]!)[0]).toMatch(/task/)
      expect(result.output).toBe("done")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer((request) => {
        const results = toolResults(request)
        if (promptOf(request) === "Sub") {
          return results.length === 0 ? { toolCalls: [{ name: "task", arguments: { description: "Deeper" } }] } : "sub done"
        }
        return results.length === 0
          ? { toolCalls: [{ name: "task", arguments: { description: "Sub" } }, { name: "task", arguments: { description: "Sub2" } }] }
          : "done"
      }))
    ))

  it.effect("maxTaskDepth 2: a sub-agent starts its own task, under its own session; maxTaskDepth 0: no task", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(deep({ maxTaskDepth: 2 }), "Main", { sessionId: "s" }))
      const started = events.filter((event): event is AgentEvent.Of<"SubRunStarted"> => event._tag === "SubRunStarted")
      expect(started.map((event) => [event.sessionId, event.childSessionId])).toEqual([["s", "s__task_1"], ["s__task_1", "s__task_1__task_1"]])
      const calls = yield* ScriptedModel.calls
      expect(toolNames(calls.find((call) => promptOf(call) === "Sub")!)).toContain("task")
      expect(toolNames(calls.find((call) => promptOf(call) === "Deeper")!)).not.toContain("task")
      const completed = events.find((event) => event._tag === "RunCompleted" && event.sessionId === "s")
      expect(completed?._tag === "RunCompleted" && completed.result.output).toBe("deepest")
      const none = yield* Agent.run(deep({ maxTaskDepth: 0 }), "Zero")
      expect(none.output).toBe("zero")
      expect(toolNames((yield* ScriptedModel.calls).at(-1)!)).not.toContain("task")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer((request) => {
        const results = toolResults(request)
        const prompt = promptOf(request)
        if (prompt === "Zero") return "zero"
        if (prompt === "Deeper") return "deepest"
        if (results.length > 0) return results[0]!
        return { toolCalls: [{ name: "task", arguments: { description: prompt === "Sub" ? "Deeper" : "Sub" } }] }
      }))
    ))

  it.effect("a configured sub-agent runs by name; an unknown name is an error naming the known ones", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(deep({ subAgents: [researcher] }), "Main"))
      const calls = yield* ScriptedModel.calls
      const task = calls[0]!.tools!.find((tool) => tool.name === "task")!
      expect(task.description).toContain("- researcher: You find facts.")
      const results = toolResults(calls.at(-1)!)
      expect(results[0]).toBe("fact")
      expect(results[1]).toMatch(/unknown agent "writer".*researcher/)
      const started = events.filter((event): event is AgentEvent.Of<"SubRunStarted"> => event._tag === "SubRunStarted")
      expect(started.map((event) => event.agent)).toEqual(["researcher"])
      // The researcher runs with its own instructions, not the lead's.
      const sub = calls.find((call) => promptOf(call) === "Find")!
      expect(Model.textOf(sub.messages![0]!.content)).toContain("You find facts.")
      expect(Model.textOf(sub.messages![0]!.content)).not.toContain("You lead.")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer((request) => {
        if (promptOf(request) === "Find") return "fact"
        return toolResults(request).length === 0
          ? {
            toolCalls: [
              { name: "task", arguments: { description: "Find", agent: "researcher" } },
              { name: "task", arguments: { description: "Write", agent: "writer" } }
            ]
          }
          : "done"
      }))
    ))

  it.effect("interrupting the parent interrupts its sub-agents", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const model = ScriptedModel.layer((request) =>
        promptOf(request) === "Forever"
          ? Deferred.succeed(entered, undefined).pipe(
            Effect.andThen(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined))
          )
          : { toolCalls: [{ name: "task", arguments: { description: "Forever" } }] }
      )
      const fiber = yield* Agent.run(deep(), "Main").pipe(
        Effect.provide(Workspace.layerMemory()),
        Effect.provide(model),
        Effect.forkChild
      )
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(fiber)
      expect(yield* Deferred.isDone(interrupted)).toBe(true)
    }))
})

const counts = { subCalls: 0, inFlight: 0, maxInFlight: 0 }
