/**
 * Blackboard: a coordinator picks each round's contributor over a shared board, `"terminate": "false"` is not
 * true, a bad answer is asked again once then falls back to round robin, round robin without a coordinator, the
 * board cut to its newest entries, the decider, failures and budgets, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Blackboard from "../../src/architectures/Blackboard.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const lastUser = (request: Model.Request) => Model.textOf(request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? "")
const system = (request: Model.Request) => request.messages?.find((m) => m.role === "system")?.content ?? ""

const researcher = Agent.make({ name: "researcher", instructions: "You are researcher. You find facts." })
const writer = Agent.make({ name: "writer", instructions: "You are writer. You write prose." })
const coordinator = Agent.make({ name: "lead", instructions: "You are coordinator." })
const decider = Agent.make({ name: "editor", instructions: "You are decider." })

const team = <R>(architecture: Architecture.Architecture<R>) => Agent.make({ name: "team", instructions: "", architecture })

/** Each role answers by its system prompt, turn by turn. */
const byRole = (scripts: Readonly<Record<string, ReadonlyArray<ScriptedModel.Turn>>>) => {
  const seen = new Map<string, number>()
  return ScriptedModel.layer((request) => {
    const who = /You are (\w+)\./.exec(system(request))?.[1] ?? "?"
    const i = seen.get(who) ?? 0
    seen.set(who, i + 1)
    const turns = scripts[who] ?? ["(no script)"]
    return turns[Math.min(i, turns.length - 1)]!
  })
}

describe("Blackboard", () => {
  it.effect("the coordinator picks each round's contributor over the board; terminate: true ends it; the decider answers", () =>
    Effect.gen(function*() {
      const architecture = Blackboard.makeUnsafe({ agents: [researcher, writer], coordinator, decider })
      const events = yield* Stream.runCollect(Agent.stream(team(architecture), "A paragraph on otters.", { sessionId: "bb" }))
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      expect(sessions).toEqual([
        "bb",
        "bb__bb_coordinator_1", "bb__bb_researcher_1",
        "bb__bb_coordinator_2", "bb__bb_writer_2",
        "bb__bb_coordinator_3",
        "bb__bb_decider"
      ])
      const calls = yield* ScriptedModel.calls
      const writerCall = calls.find((request) => system(request).includes("You are writer."))!
      expect(lastUser(writerCall)).toContain("[task] user: A paragraph on otters.\n[contribution] researcher: Otters hold hands while sleeping.")
      expect(lastUser(writerCall)).toContain("Your instruction: Write it up.")
      const coordinatorCall = calls.find((request) => system(request).includes("You are coordinator."))!
      expect(lastUser(coordinatorCall)).toContain("- researcher: You are researcher. You find facts.")
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Final: otters hold hands.", metadata: { decided_by: "decider", rounds: 2 } } })
    }).pipe(Effect.provide(byRole({
      coordinator: ['{"agent": "researcher", "instruction": "Find a fact."}', '{"agent": "Writer", "instruction": "Write it up."}', '{"terminate": true}'],
      researcher: ["Otters hold hands while sleeping."],
      writer: ["Otters, it turns out, hold hands."],
      decider: ["Final: otters hold hands."]
    }))))

  it("terminate counts only as the JSON boolean true; other answers are named", () => {
    const names = ["researcher", "writer"]
    expect(Blackboard.parseDecision('{"terminate": true}', names)).toEqual({ _tag: "Terminate" })
    expect(Blackboard.parseDecision('```json\n{"agent": "writer"}\n```', names)).toEqual({ _tag: "Agent", agent: "writer", instruction: "" })
    expect(Blackboard.parseDecision('{"terminate": "false"}', names)).toMatchObject({ _tag: "Invalid", problem: expect.stringContaining('"terminate" must be the JSON boolean true, got "false"') })
    expect(Blackboard.parseDecision('{"terminate": "true"}', names)._tag).toBe("Invalid")
    expect(Blackboard.parseDecision('{"agent": "reseacher"}', names)).toMatchObject({ _tag: "Invalid", problem: 'there is no agent "reseacher" (agents: researcher, writer)' })
    expect(Blackboard.parseDecision("Let the writer go next.", names)._tag).toBe("Invalid")
  })

  it.effect("an answer that cannot be used is asked again once; a second miss falls back to round robin for that round", () =>
    Effect.gen(function*() {
      const architecture = Blackboard.makeUnsafe({ agents: [researcher, writer], coordinator, maxRounds: 2 })
      const events = yield* Stream.runCollect(Agent.stream(team(architecture), "task", { sessionId: "bb" }))
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      expect(sessions).toEqual([
        "bb",
        "bb__bb_coordinator_1", "bb__bb_coordinator_1_retry", "bb__bb_writer_1",
        "bb__bb_coordinator_2", "bb__bb_coordinator_2_retry", "bb__bb_researcher_2"
      ])
      const retry = (yield* ScriptedModel.calls).find((request) => lastUser(request).includes("Your last answer could not be used"))!
      expect(lastUser(retry)).toContain("there is no agent")
      const fallbacks = events.filter((event) => event._tag === "Progress" && event.name === "blackboard.fallback")
      expect(fallbacks).toHaveLength(1)
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "facts", metadata: { decided_by: "last_contribution" } } })
    }).pipe(Effect.provide(byRole({
      // Round 1: a bad name, then a good one on the retry. Round 2: "terminate": "false" twice → round robin.
      coordinator: ['{"agent": "nobody"}', '{"agent": "writer"}', '{"terminate": "false"}', '{"terminate": "false"}'],
      researcher: ["facts"],
      writer: ["prose"]
    }))))

  it.effect("without a coordinator the agents take turns for maxRounds rounds; the last contribution is the answer", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(team(Blackboard.makeUnsafe({ agents: [researcher, writer], maxRounds: 3 })), "task")
      expect(result).toMatchObject({ output: "facts again", metadata: { rounds: 3, decided_by: "last_contribution" } })
      const board = (result.metadata as { board: ReadonlyArray<Blackboard.Entry> }).board
      expect(board.map((entry) => entry.author)).toEqual(["user", "researcher", "writer", "researcher"])
    }).pipe(Effect.provide(byRole({ researcher: ["facts", "facts again"], writer: ["prose"] }))))

  it("an agent reads the task and the newest entries that fit in boardLimit", () => {
    const board: Array<Blackboard.Entry> = [{ kind: "task", author: "user", content: "T" }]
    for (let i = 1; i <= 5; i++) board.push({ kind: "contribution", author: "a", content: `entry ${i} ${"x".repeat(40)}` })
    const text = Blackboard.render(board, 200)
    expect(text.split("\n")[0]).toBe("[task] user: T")
    // Each entry is 67 characters: the task and two entries fit in 200.
    expect(text).toContain("(3 older entries left out)")
    expect(text).not.toContain("entry 3 ")
    expect(text).toContain("entry 4 ")
    expect(text).toContain("entry 5 ")
  })

  it.effect("options are checked; a contributor that fails fails the run; a spent budget ends it with the last contribution", () =>
    Effect.gen(function*() {
      const message = (options: Blackboard.Options) => Effect.map(Effect.flip(Blackboard.make(options)), (e) => e.message)
      expect(yield* message({ agents: [writer, writer] })).toContain('two agents are named "writer"')
      expect(yield* message({ agents: [writer], boardLimit: 10 })).toBe("Blackboard: boardLimit must be an integer >= 100, got 10")
      const broken = Agent.make({ name: "broken", instructions: "", model: Layer.orDie(ScriptedModel.layer([])) }) as Agent.Agent<never>
      const failed = yield* Effect.flip(Agent.run(team(Blackboard.makeUnsafe({ agents: [broken] })), "x"))
      expect(failed).toMatchObject({ _tag: "SubAgentFailed", role: "bb_broken" })
      const capped = yield* Agent.run(team(Blackboard.makeUnsafe({ agents: [researcher, writer] })), "x", { budget: { maxCalls: 1 } })
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "facts" })
    }).pipe(Effect.provide(byRole({ researcher: ["facts"], writer: ["prose"] }))))

  it.effect("a role stopped at its limit ends the run bb_<name>:round_<r>:<reason> with the last contribution and the board", () =>
    Effect.gen(function*() {
      // The writer has a tool and one turn: a reply that asks for the tool stops it at max turns.
      const look = Tool.make({ name: "look", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("seen") })
      const slowWriter = Agent.make({ name: "writer", instructions: "You are writer.", tools: [look], maxTurns: 1 })
      const result = yield* Agent.run(team(Blackboard.makeUnsafe({ agents: [researcher, slowWriter], maxRounds: 3 })), "task").pipe(
        Effect.provide(ScriptedModel.layer((request) => system(request).includes("You are writer.") ? { toolCalls: [{ name: "look" }] } : "facts"))
      )
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "bb_writer:round_2:max_turns_exceeded",
        output: "facts",
        metadata: { rounds: 1, decided_by: "last_contribution" }
      })
      const board = (result.metadata as { board: ReadonlyArray<Blackboard.Entry> }).board
      expect(board.map((entry) => entry.author)).toEqual(["user", "researcher"])
    }))

  it.effect("the decider answers for the run: stopped after writing, its partial answer; refused by the budget, the last contribution", () =>
    Effect.gen(function*() {
      const look = Tool.make({ name: "look", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("seen") })
      const slowDecider = Agent.make({ name: "editor", instructions: "You are decider.", tools: [look], maxTurns: 1 })
      const partial = yield* Agent.run(team(Blackboard.makeUnsafe({ agents: [researcher], decider: slowDecider, maxRounds: 1 })), "task").pipe(
        Effect.provide(byRole({ researcher: ["facts"], decider: [{ text: "Otters, mostly.", toolCalls: [{ name: "look" }] }] }))
      )
      expect(partial).toMatchObject({
        interrupted: true,
        interruptionReason: "bb_decider:max_turns_exceeded",
        output: "Otters, mostly.",
        metadata: { rounds: 1, decided_by: "decider" }
      })
      const result = yield* Agent.run(team(Blackboard.makeUnsafe({ agents: [researcher, writer], decider, maxRounds: 2 })), "task", { budget: { maxCalls: 2 } }).pipe(
        Effect.provide(byRole({ researcher: ["facts"], writer: ["prose"], decider: ["never"] }))
      )
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "budget:max_calls",
        output: "prose",
        metadata: { rounds: 2, decided_by: "last_contribution" }
      })
    }))

  it.effect("a decider template with the old {prompt} placeholder still gets the task", () =>
    Effect.gen(function*() {
      const architecture = Blackboard.makeUnsafe({ agents: [researcher], decider, maxRounds: 1, deciderPrompt: "Task: {prompt}\nBoard:\n{board}" })
      expect((yield* Agent.run(team(architecture), "Otters?")).output).toBe("Final.")
      const deciderCall = (yield* ScriptedModel.calls).find((request) => system(request).includes("You are decider."))!
      expect(lastUser(deciderCall)).toBe("Task: Otters?\nBoard:\n[task] user: Otters?\n[contribution] researcher: facts")
    }).pipe(Effect.provide(byRole({ researcher: ["facts"], decider: ["Final."] }))))

  it.effect("record / replay", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-bb-"))
      try {
        const cassette = join(dir, "bb.jsonl")
        const agent = team(Blackboard.makeUnsafe({ agents: [researcher, writer], coordinator, maxRounds: 2 }))
        const script = byRole({ coordinator: ['{"agent": "researcher"}', '{"terminate": true}'], researcher: ["facts"] })
        const recorded = yield* Agent.run(agent, "x", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(script)))
        )
        const replayed = yield* Agent.run(agent, "x", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe("facts")
        expect(replayed.metadata).toEqual(recorded.metadata)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
