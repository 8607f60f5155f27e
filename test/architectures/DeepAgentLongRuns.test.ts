/**
 * DeepAgent on long runs: its `approvals` option makes calls of `execute`, `write_file` and `edit_file` wait for a
 * person (`HumanLoop`) by the rules of valet.yaml's `approvals:`; interrupting a run stops at once a command in the
 * sandbox (its process gone) and the sub-agents its `task` calls run concurrently.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref, Stream } from "effect"
import { TestClock } from "effect/testing"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Agent from "../../src/core/Agent.js"
import * as ApprovalPolicy from "../../src/core/internal/approvalPolicy.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import { bwrapWorks, marker, processesWith, skippedWithoutBwrap } from "../support/processes.js"

const toolResults = (request: Model.Request): ReadonlyArray<string> =>
  (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))

/** A workspace in memory whose `execute` records the commands it runs (no processes). */
const recordingWorkspace = (ran: Ref.Ref<ReadonlyArray<ReadonlyArray<string>>>) =>
  Effect.map(Effect.orDie(Workspace.makeMemory()), (files): Workspace.Service => ({
    ...files,
    run: (request) =>
      Effect.as(Ref.update(ran, (commands) => [...commands, request.command as ReadonlyArray<string>]), {
        command: request.command as ReadonlyArray<string>,
        exitCode: 0,
        stdout: "ran\n",
        stderr: "",
        durationMs: 1,
        timedOut: false,
        isolation: "test" as const
      })
  }))

const guarded = Agent.make({
  name: "coder",
  instructions: "",
  architecture: DeepAgent.makeUnsafe({
    maxTurns: 10,
    approvals: { execute: true, edit_file: true, write_file: { when: { argument: "path", matches: "^deploy/" } } }
  })
})

describe("DeepAgent approvals", () => {
  it.effect("an execute call waits for a decision; approved, it runs and the model reads its result", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make<ReadonlyArray<ReadonlyArray<string>>>([])
      const workspace = yield* recordingWorkspace(ran)
      const run = yield* Effect.forkChild(Agent.run(guarded, "Run the tests").pipe(Effect.provideService(Workspace.Workspace, workspace)))
      const [waiting] = yield* HumanLoop.awaitPending(1)
      expect(waiting).toMatchObject({ toolCallId: "c1", name: "execute" })
      // Nothing ran while it waited.
      expect(yield* Ref.get(ran)).toEqual([])
      yield* HumanLoop.decide("c1", { approved: true })
      const result = yield* Fiber.join(run)
      expect(result.output).toBe("Tests ran.")
      expect(yield* Ref.get(ran)).toEqual([["python3", "-m", "pytest"]])
      expect(toolResults((yield* ScriptedModel.calls).at(-1)!)).toEqual(["exit code 0\n--- stdout ---\nran"])
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ id: "c1", name: "execute", arguments: { command: ["python3", "-m", "pytest"] } }] },
        "Tests ran."
      ]))
    ))

  it.effect("rejected, the model reads the rejection and nothing ran: no command, no edit", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make<ReadonlyArray<ReadonlyArray<string>>>([])
      const workspace = yield* recordingWorkspace(ran)
      yield* Effect.orDie(workspace.write("app.py", "x = 1\n"))
      const run = yield* Effect.forkChild(Agent.run(guarded, "Change it").pipe(Effect.provideService(Workspace.Workspace, workspace)))
      const waiting = yield* HumanLoop.awaitPending(2)
      expect(waiting.map((request) => request.name)).toEqual(["edit_file", "execute"])
      yield* HumanLoop.decide("e1", { approved: false, reason: "not that file" })
      yield* HumanLoop.decide("x1", { approved: false, reason: "no commands today" })
      expect((yield* Fiber.join(run)).output).toBe("Understood.")
      expect(toolResults((yield* ScriptedModel.calls).at(-1)!)).toEqual([
        "ERROR: rejected: not that file",
        "ERROR: rejected: no commands today"
      ])
      expect(yield* Ref.get(ran)).toEqual([])
      expect(yield* Effect.orDie(workspace.readText("app.py"))).toBe("x = 1\n")
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { id: "e1", name: "edit_file", arguments: { path: "app.py", old_string: "1", new_string: "2" } },
            { id: "x1", name: "execute", arguments: { command: ["rm", "-rf", "."] } }
          ]
        },
        "Understood."
      ]))
    ))

  it.effect("a write_file outside the policy runs without waiting; one inside it waits", () =>
    Effect.gen(function*() {
      const workspace = yield* Effect.orDie(Workspace.makeMemory())
      const run = yield* Effect.forkChild(
        Stream.runCollect(Agent.stream(guarded, "Write them")).pipe(Effect.provideService(Workspace.Workspace, workspace))
      )
      const [waiting] = yield* HumanLoop.awaitPending(1)
      // The note was written at once, while the deploy file waits for its decision.
      expect(waiting).toMatchObject({ toolCallId: "w2", name: "write_file" })
      expect(yield* Effect.orDie(workspace.readText("notes.md"))).toBe("n\n")
      expect(yield* Effect.flip(workspace.readText("deploy/prod.yaml"))).toMatchObject({ reason: "not_found" })
      yield* HumanLoop.decide("w2", { approved: true })
      const events = yield* Fiber.join(run)
      expect(yield* Effect.orDie(workspace.readText("deploy/prod.yaml"))).toBe("p\n")
      expect(events.filter((event) => event._tag === "ApprovalRequested").map((event) => event._tag === "ApprovalRequested" && event.toolCallId)).toEqual(["w2"])
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { id: "w1", name: "write_file", arguments: { path: "notes.md", content: "n\n" } },
            { id: "w2", name: "write_file", arguments: { path: "deploy/prod.yaml", content: "p\n" } }
          ]
        },
        "Written."
      ]))
    ))

  it.effect("rules are judged on the arguments as the workspace acts on them: every spelling of deploy/… waits, a program by any path", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make<ReadonlyArray<ReadonlyArray<string>>>([])
      const workspace = yield* recordingWorkspace(ran)
      const agent = Agent.make({
        name: "coder",
        instructions: "",
        architecture: DeepAgent.makeUnsafe({
          approvals: {
            write_file: { when: { argument: "path", matches: "^deploy/" } },
            execute: { when: { argument: "command", matches: "^python3 " } }
          }
        })
      })
      const run = yield* Effect.forkChild(Agent.run(agent, "Write them").pipe(Effect.provideService(Workspace.Workspace, workspace)))
      // `./deploy/…`, `deploy//…` and `deploy/./…` name deploy/…; `../x` is refused by the workspace, so the policy
      // cannot tell what it names and asks; `/usr/bin/python3` is python3. `notes.md` and `ls` run unasked.
      const waiting = yield* HumanLoop.awaitPending(5)
      expect(waiting.map((request) => request.toolCallId).sort()).toEqual(["w1", "w2", "w3", "w4", "x1"])
      for (const id of ["w1", "w2", "w3", "w4", "x1"]) yield* HumanLoop.decide(id, { approved: false, reason: "no" })
      expect((yield* Fiber.join(run)).output).toBe("Asked.")
      expect(yield* Effect.orDie(workspace.readText("notes.md"))).toBe("n\n")
      expect(yield* Ref.get(ran)).toEqual([["ls"]])
      expect(yield* Effect.flip(workspace.readText("deploy/prod.yaml"))).toMatchObject({ reason: "not_found" })
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { id: "w1", name: "write_file", arguments: { path: "./deploy/prod.yaml", content: "p\n" } },
            { id: "w2", name: "write_file", arguments: { path: "deploy//prod.yaml", content: "p\n" } },
            { id: "w3", name: "write_file", arguments: { path: "deploy/./prod.yaml", content: "p\n" } },
            { id: "w4", name: "write_file", arguments: { path: "../deploy/prod.yaml", content: "p\n" } },
            { id: "w5", name: "write_file", arguments: { path: "./notes.md", content: "n\n" } },
            { id: "x1", name: "execute", arguments: { command: ["/usr/bin/python3", "-c", "print(1)"] } },
            { id: "x2", name: "execute", arguments: { command: ["ls"] } }
          ]
        },
        "Asked."
      ]))
    ))

  it.effect("approvalTimeout: a call nobody decides is rejected when it passes (TestClock), and did not run", () =>
    Effect.gen(function*() {
      const ran = yield* Ref.make<ReadonlyArray<ReadonlyArray<string>>>([])
      const workspace = yield* recordingWorkspace(ran)
      const agent = Agent.make({ name: "coder", instructions: "", architecture: DeepAgent.makeUnsafe({ approvals: { execute: true }, approvalTimeout: "1 minute" }) })
      const run = yield* Effect.forkChild(Agent.run(agent, "Run it").pipe(Effect.provideService(Workspace.Workspace, workspace)))
      yield* HumanLoop.awaitPending(1)
      yield* TestClock.adjust("1 minute")
      expect((yield* Fiber.join(run)).output).toBe("No decision.")
      expect(toolResults((yield* ScriptedModel.calls).at(-1)!)).toEqual(["ERROR: rejected: no decision within 1m"])
      expect(yield* Ref.get(ran)).toEqual([])
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ id: "c1", name: "execute", arguments: { command: ["make"] } }] },
        "No decision."
      ]))
    ))

  it("a rule's matches reads execute's command as its words joined by spaces", () => {
    const rule = { when: { argument: "command", matches: "^(rm|git push) " } }
    expect(ApprovalPolicy.needsApproval(rule, JSON.stringify({ command: ["rm", "-rf", "build"] }))).toBe(true)
    expect(ApprovalPolicy.needsApproval(rule, JSON.stringify({ command: ["git", "push", "origin"] }))).toBe(true)
    expect(ApprovalPolicy.needsApproval(rule, JSON.stringify({ command: ["python3", "-m", "pytest"] }))).toBe(false)
    // A list that is not all text cannot be read as a line: a person decides.
    expect(ApprovalPolicy.needsApproval(rule, JSON.stringify({ command: ["ls", 1] }))).toBe(true)
  })

  it.effect("a policy naming a tool DeepAgent does not have is refused, naming it and the tools it has", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(DeepAgent.make({ approvals: { shell: true } }))
      expect(error.message).toContain(`names the tool "shell", which is not one of ls, read_file, write_file, edit_file, glob, grep, execute`)
    }))
})

/** Waits (really) until `predicate` holds, polling every 20 ms: a latch on something outside the fiber world (a process). */
const waitUntil = (predicate: () => boolean) =>
  Effect.gen(function*() {
    for (let tries = 0; !predicate(); tries++) {
      if (tries > 1_000) return yield* Effect.die(new Error("condition not reached"))
      yield* Effect.sleep("20 millis")
    }
  })

/**
 * A model that gives the lead's first turn `calls` and makes every call of a sub-agent (its prompt starts with `Sub`)
 * wait for ever, counting the calls that wait and those interrupted.
 */
const hangingSubAgents = (calls: ReadonlyArray<ScriptedModel.ScriptedToolCall>) =>
  Effect.gen(function*() {
    const waiting = yield* Ref.make(0)
    const stopped = yield* Ref.make(0)
    const allWaiting = yield* Deferred.make<void>()
    const subs = calls.filter((call) => call.name === "task").length
    const model = ScriptedModel.layer((request) => {
      const prompt = Model.textOf((request.messages ?? []).find((message) => message.role === "user")?.content ?? "")
      if (!prompt.startsWith("Sub")) return Effect.succeed<ScriptedModel.Turn>({ toolCalls: calls })
      return Effect.gen(function*() {
        if ((yield* Ref.updateAndGet(waiting, (n) => n + 1)) === subs) yield* Deferred.succeed(allWaiting, undefined)
        return yield* Effect.never as Effect.Effect<ScriptedModel.Turn>
      }).pipe(Effect.onInterrupt(() => Ref.update(stopped, (n) => n + 1)))
    })
    return { waiting, stopped, allWaiting, model }
  })

const lead = Agent.make({ name: "lead", instructions: "", architecture: DeepAgent.makeUnsafe({ maxTurns: 5 }) })

describe("interrupting a DeepAgent run", () => {
  it.effect("stops its concurrent task sub-agents at once: every model call they wait on is interrupted", () =>
    Effect.gen(function*() {
      const { allWaiting, model, stopped, waiting } = yield* hangingSubAgents([
        { id: "t1", name: "task", arguments: { description: "Sub A" } },
        { id: "t2", name: "task", arguments: { description: "Sub B" } }
      ])
      const fiber = yield* Agent.run(lead, "Main").pipe(Effect.provide(model), Effect.provide(Workspace.layerMemory()), Effect.forkChild)
      // Both sub-agents are running at once, each waiting on its model call.
      yield* Deferred.await(allWaiting)
      yield* Fiber.interrupt(fiber)
      expect(Exit.hasInterrupts(yield* Fiber.await(fiber))).toBe(true)
      expect(yield* Ref.get(waiting)).toBe(2)
      expect(yield* Ref.get(stopped)).toBe(2)
    }))
})

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

describe("interrupting a DeepAgent run in a real sandbox (bubblewrap)", () => {
  const name = "kills its long execute (the process gone) and stops the sub-agents started in the same turn"
  if (!bwrapWorks) {
    it.skip(`${name}${skippedWithoutBwrap}`, () => {})
    return
  }
  it.live(name, () => {
    const workRoot = mkdtempSync(join(tmpdir(), "valet-deep-interrupt-"))
    roots.push(workRoot)
    const mark = marker()
    return Effect.gen(function*() {
      const { allWaiting, model, stopped, waiting } = yield* hangingSubAgents([
        // A command that ignores SIGTERM and would sleep for 30 s: only the kill ends it.
        { id: "x1", name: "execute", arguments: { command: ["python3", "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(30)", mark] } },
        { id: "t1", name: "task", arguments: { description: "Sub A" } },
        { id: "t2", name: "task", arguments: { description: "Sub B" } }
      ])
      const fiber = yield* Agent.run(lead, "Main").pipe(Effect.provide(model), Effect.forkChild)
      yield* Deferred.await(allWaiting)
      yield* waitUntil(() => processesWith(mark).length > 0)
      yield* Fiber.interrupt(fiber)
      expect(Exit.hasInterrupts(yield* Fiber.await(fiber))).toBe(true)
      // The interruption completed only once the command was killed: nothing of it is left.
      expect(processesWith(mark)).toEqual([])
      expect(yield* Ref.get(stopped)).toBe(yield* Ref.get(waiting))
    }).pipe(
      Effect.provide(Workspace.layerSandbox("interrupted")),
      Effect.provide(Sandbox.layerProcess({ isolation: "bwrap", workRoot, allow: ["python3"] }))
    )
  }, 60_000)
})
