/**
 * Approvals and questions that wait durably: a durable run's call that needs approval, or its question, suspends the workflow on
 * a `DurableDeferred`; `Durable.decide` from outside the run (compare-and-set on valet's table, then the deferred)
 * wakes it; the approved tool runs once and the model calls before the wait are not sent again.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Duration, Effect, Layer, Option, Schema } from "effect"
import type { WorkflowEngine } from "effect/workflow"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Workspace from "../../src/environment/Workspace.js"
import * as Durable from "../../src/rollouts/Durable.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import { startScript } from "../support/valetProcess.js"

/** A tool that needs approval and counts its runs (by argument). */
const counted = (options: { readonly needsApproval?: boolean; readonly approvalTimeout?: Duration.Input } = {}) => {
  const ran: Array<number> = []
  const act = Tool.make({
    name: "act",
    description: "",
    parameters: Schema.Struct({ n: Schema.Number }),
    handler: ({ n }) => Effect.sync(() => (ran.push(n), `did ${n}`)),
    needsApproval: options.needsApproval ?? (({ n }) => Effect.succeed(n > 0)),
    ...(options.approvalTimeout !== undefined ? { approvalTimeout: options.approvalTimeout } : {})
  })
  return { ran, act }
}

/** The agent of these tests: "worker", holding `act`. */
const workerOf = (act: Tool.Tool) => Agent.make({ name: "worker", instructions: "", tools: [act] })

/** The durable engine on `file` with the worker holding `act`, on `model`. */
const engineOf = (file: string, act: Tool.Tool, model: Layer.Layer<Model.Model>) =>
  Durable.layer([workerOf(act)]).pipe(
    Layer.provideMerge(Durable.layerSqlite(file)),
    Layer.provide(model)
  )

/**
 * A model whose first reply is `first` and every later one `answer`, keeping what it read last on each later call
 * (a tool's result, a rejection).
 */
const readingModel = (first: ScriptedModel.Turn, answer: string) => {
  const seen: Array<string> = []
  const model = ScriptedModel.layer((request, index) => {
    if (index === 0) return first
    seen.push(String(request.messages?.at(-1)?.content))
    return answer
  })
  return { seen, model }
}

/** Polls `effect` until `done` holds (a live test: the engine runs on its own fibers). */
const until = <A, E, R>(effect: Effect.Effect<A, E, R>, done: (a: A) => boolean): Effect.Effect<A, E | string, R> =>
  Effect.gen(function*() {
    for (let i = 0; i < 400; i++) {
      const value = yield* effect
      if (done(value)) return value
      yield* Effect.sleep("25 millis")
    }
    return yield* Effect.fail(`condition never held: last ${JSON.stringify(yield* effect)}`)
  })

const withStore = <A, E, R>(use: (file: string) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-dwait-"))),
    (dir) => use(join(dir, "runs.db")),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

describe("Durable approvals (Durable.layerSqlite, one process)", () => {
  it.live("a call waits suspended; decided from outside, the tool runs once and no model call is sent again", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted()
        let sent = 0
        const model = ScriptedModel.layer((_request, index) => {
          sent++
          return index === 0 ? { toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] } : "done"
        })
        const engine = engineOf(file, act, model)
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "go", runId: "run-a" }
          const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
          const [waiting] = yield* until(Durable.pending("run-a"), (rows) => rows.length === 1)
          expect(waiting).toMatchObject({ sessionId: "run-a", toolCallId: "c1", name: "act", arguments: `{"n":1}` })
          const suspended = yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          expect(Option.isSome(suspended)).toBe(true)
          expect(ran).toEqual([])
          expect(sent).toBe(1)
          // Unknown call, edited arguments the schema refuses: nothing changes.
          const unknown = yield* Effect.flip(Durable.decide("run-a", "nope", { approved: true }))
          expect(unknown._tag).toBe("NotWaiting")
          const refused = yield* Effect.flip(Durable.decide("run-a", "c1", { approved: true, arguments: { n: "x" } }, { agents: [workerOf(act)] }))
          expect(refused._tag).toBe("InvalidDecision")
          expect(refused.message).toContain("arguments")
          expect((yield* Durable.pending("run-a")).length).toBe(1)
          // Approved with edited arguments, checked by the tool's schema.
          yield* Durable.decide("run-a", "c1", { approved: true, arguments: { n: 7 } }, { agents: [workerOf(act)] })
          const again = yield* Effect.flip(Durable.decide("run-a", "c1", { approved: false }))
          expect(again._tag).toBe("AlreadyDecided")
          const result = yield* Durable.AgentRun.execute(payload)
          expect(result.output).toBe("done")
          expect(ran).toEqual([7])
          expect(sent).toBe(2)
          expect(yield* Durable.pending("run-a")).toEqual([])
        }).pipe(Effect.provide(engine))
      })), 60_000)

  /**
   * A durable DeepAgent (`approvals: { execute: true }`) whose first turn calls `execute` `make test` on a workspace
   * counting its commands: once the run is suspended on the call, `decide` decides it; the run then ends and answers
   * the commands run and the model calls sent.
   */
  const heldExecute = (file: string, runId: string, decide: (deep: Agent.Agent<unknown>) => Effect.Effect<void, unknown, Durable.HumanLoopStore | WorkflowEngine.WorkflowEngine>) =>
    Effect.gen(function*() {
      const commands: Array<ReadonlyArray<string>> = []
      const files = yield* Effect.orDie(Workspace.makeMemory())
      // A workspace whose commands are counted, not run.
      const workspace: Workspace.Service = {
        ...files,
        run: (request) =>
          Effect.sync(() => {
            commands.push(request.command as ReadonlyArray<string>)
            return { command: request.command as ReadonlyArray<string>, exitCode: 0, stdout: "ok\n", stderr: "", durationMs: 1, timedOut: false, isolation: "test" as const }
          })
      }
      let sent = 0
      const model = ScriptedModel.layer((_request, index) => {
        sent++
        return index === 0 ? { toolCalls: [{ id: "c1", name: "execute", arguments: { command: ["make", "test"] } }] } : "tested"
      })
      const deep = Agent.make({ name: "deep", instructions: "", architecture: DeepAgent.makeUnsafe({ approvals: { execute: true } }) })
      const engine = Durable.layer<Model.Model | Workspace.Workspace>([deep]).pipe(
        Layer.provideMerge(Durable.layerSqlite(file)),
        Layer.provide(Layer.merge(model, Layer.succeed(Workspace.Workspace, workspace)))
      )
      return yield* Effect.gen(function*() {
        const payload = { agent: "deep", prompt: "test it", runId }
        const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
        const [waiting] = yield* until(Durable.pending(runId), (rows) => rows.length === 1)
        expect(waiting).toMatchObject({ sessionId: runId, toolCallId: "c1", name: "execute" })
        yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
        expect(commands).toEqual([])
        yield* decide(deep as Agent.Agent<unknown>)
        const result = yield* Durable.AgentRun.execute(payload)
        expect(result.output).toBe("tested")
        return { commands, sent }
      }).pipe(Effect.provide(engine))
    })

  it.live("DeepAgent: an execute its approvals hold waits suspended; approved from outside, the command runs once", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { commands, sent } = yield* heldExecute(file, "run-d", () => Effect.asVoid(Durable.decide("run-d", "c1", { approved: true })))
        expect(commands).toEqual([["make", "test"]])
        expect(sent).toBe(2)
      })), 60_000)

  it.live("a durable DeepAgent's execute approved with edited arguments (Durable.decide with its agents): checked against execute's schema, the edited command runs; a bad edit is InvalidDecision and the call still waits", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { commands, sent } = yield* heldExecute(file, "run-e", (deep) =>
          Effect.gen(function*() {
            // Before: "cannot check edited arguments here: this process does not know tool \"execute\"".
            const bad = yield* Effect.flip(Durable.decide("run-e", "c1", { approved: true, arguments: { command: "make check" } }, { agents: [deep] }))
            expect(bad).toMatchObject({ _tag: "InvalidDecision", toolCallId: "c1" })
            expect(bad.message).toContain("command")
            expect(yield* Durable.pending("run-e")).toHaveLength(1)
            yield* Durable.decide("run-e", "c1", { approved: true, arguments: { command: ["make", "check"] } }, { agents: [deep] })
          }))
        expect(commands).toEqual([["make", "check"]])
        expect(sent).toBe(2)
      })), 60_000)

  it.live("rejected: the tool never runs, the model reads the rejection", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted()
        const { model, seen } = readingModel({ toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] }, "ok")
        const engine = engineOf(file, act, model)
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "go", runId: "run-r" }
          yield* Durable.AgentRun.execute(payload, { discard: true })
          yield* until(Durable.pending("run-r"), (rows) => rows.length === 1)
          yield* Durable.decide("run-r", "c1", { approved: false, reason: "too risky" })
          const result = yield* Durable.AgentRun.execute(payload)
          expect(result.output).toBe("ok")
          expect(ran).toEqual([])
          expect(seen).toEqual(["ERROR: rejected: too risky"])
        }).pipe(Effect.provide(engine))
      })), 60_000)

  it.live("calls of one turn are decided independently, each answered by its own tool run (activities named by call id)", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted()
        const seen: Array<string> = []
        const model = ScriptedModel.layer((request, index) => {
          if (index === 0) {
            return { toolCalls: [
              { id: "c1", name: "act", arguments: { n: 1 } },
              { id: "c2", name: "act", arguments: { n: 2 } },
              { id: "c3", name: "act", arguments: { n: 0 } }
            ] }
          }
          seen.push(...(request.messages ?? []).filter((m) => m.role === "tool").map((m) => `${m.role === "tool" ? m.toolCallId : ""}=${m.content}`))
          return "ok"
        })
        const engine = engineOf(file, act, model)
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "go", runId: "run-t" }
          const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
          yield* until(Durable.pending("run-t"), (rows) => rows.length === 2)
          yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          // c3 needed no approval: it ran while the others wait.
          expect(ran).toEqual([0])
          // c2 decided first: it runs while c1 still waits.
          yield* Durable.decide("run-t", "c2", { approved: true })
          yield* until(Effect.sync(() => ran.length), (n) => n === 2)
          expect(ran).toEqual([0, 2])
          yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          expect((yield* Durable.pending("run-t")).map((r) => r.toolCallId)).toEqual(["c1"])
          yield* Durable.decide("run-t", "c1", { approved: true })
          const result = yield* Durable.AgentRun.execute(payload)
          expect(result.output).toBe("ok")
          // Each call ran once, and each result is its own (with a count of starts, c1 got c2's stored result).
          expect(ran).toEqual([0, 2, 1])
          expect(seen).toEqual(["c1=did 1", "c2=did 2", "c3=did 0"])
        }).pipe(Effect.provide(engine))
      })), 60_000)

  it.live("call ids a model may write with # in them name no other call's activity (c1 twice, then c1#2)", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted({ needsApproval: false })
        const results: Array<ReadonlyArray<string>> = []
        const model = ScriptedModel.layer((request, index) => {
          if (index === 0) return { toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] }
          if (index === 1) return { toolCalls: [{ id: "c1", name: "act", arguments: { n: 2 } }, { id: "c1#2", name: "act", arguments: { n: 3 } }] }
          results.push((request.messages ?? []).filter((message) => message.role === "tool").map((message) => message.content))
          return "done"
        })
        const engine = engineOf(file, act, model)
        const result = yield* Durable.AgentRun.execute({ agent: "worker", prompt: "go", runId: "run-hash" }).pipe(Effect.provide(engine))
        expect(result.output).toBe("done")
        expect([...ran].sort()).toEqual([1, 2, 3])
        expect(results).toEqual([["did 1", "did 2", "did 3"]])
      })), 60_000)

  it.live("approvalTimeout: a DurableClock rejects the call when no decision comes; a late decision is AlreadyDecided", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted({ needsApproval: true, approvalTimeout: "1 second" })
        const { model, seen } = readingModel({ toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] }, "ok")
        const engine = engineOf(file, act, model)
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "go", runId: "run-o" }
          const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
          yield* until(Durable.pending("run-o"), (rows) => rows.length === 1)
          // Suspended on the race of the decision and the clock: no fiber waits on a timer of this process.
          yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          const result = yield* Durable.AgentRun.execute(payload)
          expect(result.output).toBe("ok")
          expect(ran).toEqual([])
          expect(seen).toEqual(["ERROR: rejected: no decision within 1s"])
          const late = yield* Effect.flip(Durable.decide("run-o", "c1", { approved: true }))
          expect(late._tag).toBe("AlreadyDecided")
        }).pipe(Effect.provide(engine))
      })), 60_000)
})

describe("Durable approvals: a decider that dies half-way (review28b)", () => {
  it.live("the decider's compare-and-set went through but it died before completing the deferred: deciding again re-sends what was stored, and the run ends", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { ran, act } = counted({ needsApproval: true })
        const model = ScriptedModel.layer((_request, index) => index === 0 ? { toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] } : "done")
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "go", runId: "run-x" }
          const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
          yield* until(Durable.pending("run-x"), (rows) => rows.length === 1)
          yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          // What `Durable.decide` does first (the compare-and-set on valet's table), and then its process died: the
          // deferred the run waits on was never completed.
          const store = yield* Durable.HumanLoopStore
          const stored = yield* store.settle("run-x", "approval/run-x/c1", JSON.stringify({ approved: true, arguments: `{"n":1}`, edited: false }))
          expect(stored).toBe(true)
          expect(yield* Durable.pending("run-x")).toEqual([])
          // The person tries again: the first decision is the one that counts (AlreadyDecided) — and the run gets it.
          const again = yield* Effect.flip(Durable.decide("run-x", "c1", { approved: false }))
          expect(again._tag).toBe("AlreadyDecided")
          const result = yield* Durable.AgentRun.execute(payload).pipe(Effect.timeoutOption("10 seconds"))
          expect(Option.map(result, (r) => r.output)).toEqual(Option.some("done"))
          expect(ran).toEqual([1])
        }).pipe(Effect.provide(engineOf(file, act, model)))
      })), 60_000)
})

/**
 * 20 runs wait on a call each in a process that is then killed (SIGKILL); a new process on the same store decides
 * them all (even runs approved, odd rejected) and every run ends: each approved tool ran once, no rejected one ran,
 * the rejected runs' model read the rejection, and no model call made before the kill was sent again.
 */
const killWhileWaiting = (store: string) =>
  Effect.gen(function*() {
    const count = 20
    const child = join(import.meta.dirname, "..", "support", "durableApprovalChild.ts")
    const first = startScript(child, [store, "start", String(count)])
    yield* Effect.addFinalizer(() => Effect.sync(() => first.kill("SIGKILL")))
    yield* Effect.promise(() => first.waitFor(/^waiting \d+$/, 90_000))
    first.kill("SIGKILL")
    yield* Effect.promise(() => first.exited)
    expect(first.lines.filter((line) => line.startsWith("tool "))).toEqual([])
    expect(first.lines.filter((line) => line.startsWith("call ")).sort()).toEqual(
      Array.from({ length: count }, (_, i) => `call run-${i} react.turn_1`).sort()
    )
    const second = startScript(child, [store, "decide", String(count)])
    yield* Effect.addFinalizer(() => Effect.sync(() => second.kill("SIGKILL")))
    const code = yield* Effect.promise(() => second.exited)
    expect(code, second.lines.join("\n")).toBe(0)
    const even = Array.from({ length: count }, (_, i) => i).filter((i) => i % 2 === 0)
    // Each approved tool ran once, in the second process; no rejected one ran.
    expect(second.lines.filter((line) => line.startsWith("tool ")).sort()).toEqual(even.map((i) => `tool ${i}`).sort())
    // The second process sent only the calls after the wait (turn 2 of each run), none before it again.
    expect(second.lines.filter((line) => line.startsWith("call ")).sort()).toEqual(
      Array.from({ length: count }, (_, i) => `call run-${i} react.turn_2`).sort()
    )
    expect(second.lines.filter((line) => line.startsWith("result ")).sort()).toEqual(
      Array.from({ length: count }, (_, i) => `result run-${i} read ${i % 2 === 0 ? `did ${i}` : "ERROR: rejected: no"}`).sort()
    )
  }).pipe(Effect.scoped)

describe("Durable approvals across processes", () => {
  it.live("SQLite: 20 runs wait; their process is killed (SIGKILL); another decides all: approved tools ran once, rejected never, every run ended", () =>
    withStore((file) => killWhileWaiting(file)), 120_000)
})

describePostgres("Durable approvals across processes on PostgreSQL", () => {
  it.live("PostgreSQL: 20 runs wait; their runner is killed (SIGKILL); a new runner decides all: approved tools ran once, rejected never, every run ended", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      yield* killWhileWaiting(url)
    }).pipe(Effect.scoped), 180_000)
})

describe("Durable questions (Durable.layerSqlite, one process)", () => {
  /** The engine on `file` with `agent`, on `model`. */
  const engineWith = (file: string, agent: Agent.Agent<Model.Model>, model: Layer.Layer<Model.Model>) =>
    Durable.layer<Model.Model>([agent]).pipe(Layer.provideMerge(Durable.layerSqlite(file)), Layer.provide(model))

  it.live("ask_human waits suspended; a bad answer is refused (still waiting); the answer resumes the run, no model call sent again", () =>
    withStore((file) =>
      Effect.gen(function*() {
        let sent = 0
        const seen: Array<string> = []
        const model = ScriptedModel.layer((request, index) => {
          sent++
          if (index === 0) return { toolCalls: [{ id: "c1", name: "ask_human", arguments: { question: "Which city?" } }] }
          seen.push(String(request.messages?.at(-1)?.content))
          return "booked"
        })
        const agent = Agent.make({ name: "worker", instructions: "", tools: [HumanLoop.askTool()] })
        yield* Effect.gen(function*() {
          const payload = { agent: "worker", prompt: "book", runId: "run-q" }
          const executionId = yield* Durable.AgentRun.execute(payload, { discard: true })
          const [question] = yield* until(Durable.questions("run-q"), (rows) => rows.length === 1)
          expect(question).toMatchObject({ sessionId: "run-q", questionId: "q1", question: "Which city?", schema: { type: "string" } })
          yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended")
          expect(yield* Durable.pending("run-q")).toEqual([])
          // Checked against the stored schema in this process: refused, nothing changed.
          const refused = yield* Effect.flip(Durable.answer("run-q", "q1", 42))
          expect([refused._tag, refused.message]).toEqual(["InvalidDecision", expect.stringContaining("answer: the answer does not fit")])
          expect((yield* Durable.questions("run-q")).length).toBe(1)
          expect((yield* Effect.flip(Durable.answer("run-q", "q9", "x")))._tag).toBe("NotWaiting")
          expect((yield* Effect.flip(Durable.decide("run-q", "q1", { approved: true })))._tag).toBe("NotWaiting")
          yield* Durable.answer("run-q", "q1", "Lyon")
          expect((yield* Effect.flip(Durable.answer("run-q", "q1", "Paris")))._tag).toBe("AlreadyDecided")
          const result = yield* Durable.AgentRun.execute(payload)
          expect(result.output).toBe("booked")
          expect(seen).toEqual(["Lyon"])
          expect(sent).toBe(2)
          expect(yield* Durable.questions("run-q")).toEqual([])
        }).pipe(Effect.provide(engineWith(file, agent, model)))
      })), 60_000)

  it.live("Architecture.ask with a struct schema: answered durably, decoded; dismissed: the run fails Unanswered (and suspends, as a failed durable run does)", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const Plan = Schema.Struct({ plan: Schema.Literals(["fast", "careful"]), budget: Schema.Number })
        const planner = Agent.make({
          name: "planner",
          instructions: "",
          architecture: Architecture.make({
            name: "ask-then-answer",
            program: () =>
              Effect.gen(function*() {
                const choice = yield* Architecture.ask("Which plan?", Plan)
                return { output: `${choice.plan} at ${choice.budget}` }
              })
          })
        })
        const model = ScriptedModel.layer(["unused"])
        yield* Effect.gen(function*() {
          yield* Durable.AgentRun.execute({ agent: "planner", prompt: "plan", runId: "run-p" }, { discard: true })
          const [question] = yield* until(Durable.questions("run-p"), (rows) => rows.length === 1)
          expect(question!.schema).toMatchObject({ type: "object", required: ["plan", "budget"] })
          const refused = yield* Effect.flip(Durable.answer("run-p", "q1", { plan: "slow", budget: 3 }))
          expect(refused.message).toContain("plan")
          yield* Durable.answer("run-p", "q1", { plan: "careful", budget: 3 })
          expect((yield* Durable.AgentRun.execute({ agent: "planner", prompt: "plan", runId: "run-p" })).output).toBe("careful at 3")
          // Another run, dismissed.
          yield* Durable.AgentRun.execute({ agent: "planner", prompt: "plan", runId: "run-d" }, { discard: true })
          yield* until(Durable.questions("run-d"), (rows) => rows.length === 1)
          yield* Durable.dismiss("run-d", "q1", "nobody knows")
          // A durable run that fails suspends (AgentRun's SuspendOnFailure), with the failure as its cause.
          const executionId = yield* Durable.AgentRun.executionId({ agent: "planner", prompt: "plan", runId: "run-d" })
          const ended = yield* until(Durable.AgentRun.poll(executionId), (p) => Option.isSome(p) && p.value._tag === "Suspended" && p.value.failed === true)
          const reasons = JSON.parse(JSON.stringify(ended)).value.cause.reasons
          expect(reasons).toHaveLength(1)
          expect(reasons[0]).toMatchObject({ _tag: "Die", defect: { _tag: "Unanswered", questionId: "q1", reason: "nobody knows" } })
        }).pipe(Effect.provide(engineWith(file, planner, model)))
      })), 60_000)

  it.live("a question's timeout is a DurableClock: no answer in time, the model reads why; a late answer is AlreadyDecided", () =>
    withStore((file) =>
      Effect.gen(function*() {
        const { model, seen } = readingModel({ toolCalls: [{ id: "c1", name: "ask_human", arguments: { question: "Which city?" } }] }, "gave up")
        const agent = Agent.make({ name: "worker", instructions: "", tools: [HumanLoop.askTool({ timeout: "1 second" })] })
        yield* Effect.gen(function*() {
          const result = yield* Durable.AgentRun.execute({ agent: "worker", prompt: "book", runId: "run-t" })
          expect(result.output).toBe("gave up")
          expect(seen).toEqual([`ERROR: tool "ask_human" failed: no answer: no answer within 1s`])
          expect((yield* Effect.flip(Durable.answer("run-t", "q1", "Lyon")))._tag).toBe("AlreadyDecided")
        }).pipe(Effect.provide(engineWith(file, agent, model)))
      })), 60_000)

  it.live("an answer the stored JSON schema lets through but the question's own schema refuses: the run asks again (q1, waiting anew)", () =>
    withStore((file) =>
      Effect.gen(function*() {
        // A check JSON Schema cannot say: the process that answers cannot see it; the run does.
        const Name = Schema.String.check(Schema.makeFilter((name: string) => name.startsWith("A") || "must start with A"))
        const asker = Agent.make({
          name: "asker",
          instructions: "",
          architecture: Architecture.make({
            name: "ask-name",
            program: () => Effect.map(Architecture.ask("Your name?", Name), (name) => ({ output: `hello ${name}` }))
          })
        })
        yield* Effect.gen(function*() {
          const payload = { agent: "asker", prompt: "hi", runId: "run-n" }
          yield* Durable.AgentRun.execute(payload, { discard: true })
          yield* until(Durable.questions("run-n"), (rows) => rows.length === 1)
          yield* Durable.answer("run-n", "q1", "Bob")
          // Refused where the run decodes it: the question waits again, under the same id.
          const [again] = yield* until(Durable.questions("run-n"), (rows) => rows.length === 1 && rows[0]!.questionId === "q1")
          expect(again!.question).toBe("Your name?")
          yield* Durable.answer("run-n", "q1", "Ada")
          expect((yield* Durable.AgentRun.execute(payload)).output).toBe("hello Ada")
        }).pipe(Effect.provide(engineWith(file, asker, ScriptedModel.layer(["unused"]))))
      })), 60_000)
})
