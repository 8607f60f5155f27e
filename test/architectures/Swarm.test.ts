/**
 * Swarm: handoffs end the agent's turn (its other calls never run, no further model call), the target gets the
 * conversation, `maxHandoffs` is exact (0, 1 and N), cycles end the run, failures and budgets, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Swarm from "../../src/architectures/Swarm.js"
import * as Agent from "../../src/core/Agent.js"
import * as Journal from "../../src/core/Journal.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const lastUser = (request: Model.Request) => request.messages?.filter((m) => m.role === "user").at(-1)?.content ?? ""
const system = (request: Model.Request) => request.messages?.find((m) => m.role === "system")?.content ?? ""

let refunds = 0
const refund = Tool.make({
  name: "refund",
  description: "Issues a refund.",
  parameters: Schema.Struct({}),
  handler: () => Effect.sync(() => (refunds++, "refunded"))
})

const triage = Agent.make({ name: "triage", instructions: "You are triage.", tools: [refund] })
const billing = Agent.make({ name: "billing", instructions: "You are billing." })
const tech = Agent.make({ name: "tech", instructions: "You are tech." })

const handoff = (target: string, message?: string) => ({
  name: "handoff",
  arguments: { target, ...(message !== undefined ? { message } : {}) }
})

const desk = (options: { readonly maxHandoffs?: number } = {}) =>
  Agent.make({ name: "desk", instructions: "", architecture: Swarm.makeUnsafe({ agents: [triage, billing, tech], entry: "triage", ...options }) })

/** Every agent answers by its system prompt: `scripts[name]` turn by turn. */
const byAgent = (scripts: Readonly<Record<string, ReadonlyArray<ScriptedModel.Turn>>>) => {
  const seen = new Map<string, number>()
  return ScriptedModel.layer((request) => {
    const who = /You are (\w+)\./.exec(system(request))?.[1] ?? "?"
    const i = seen.get(who) ?? 0
    seen.set(who, i + 1)
    const turns = scripts[who] ?? []
    return turns[Math.min(i, turns.length - 1)] ?? "(no script)"
  })
}

describe("Swarm", () => {
  it.effect("a handoff ends the turn at once (its other calls never run); the target gets the task and the conversation", () =>
    Effect.gen(function*() {
      refunds = 0
      const events = yield* Stream.runCollect(Agent.stream(desk(), "I was charged twice.", { sessionId: "s" }))
      expect(refunds).toBe(0)
      const calls = yield* ScriptedModel.calls
      // Triage: one model call; billing: one.
      expect(calls.map((request) => /You are (\w+)\./.exec(system(request))?.[1])).toEqual(["triage", "billing"])
      expect(lastUser(calls[1]!)).toBe(
        "I was charged twice.\n\nThe conversation so far:\ntriage: Let me pass you to billing.\n[handoff triage → billing] duplicate charge"
      )
      const sessions = events.filter((event) => event._tag === "RunStarted").map((event) => event.sessionId)
      expect(sessions).toEqual(["s", "s__swarm_triage_1", "s__swarm_billing_1"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Refunded the duplicate.", metadata: { handoffs: 1 } } })
      expect(events.filter((event) => event._tag === "Progress").map((event) => event.name)).toEqual(["swarm.active", "swarm.handoff", "swarm.active"])
    }).pipe(Effect.provide(byAgent({
      triage: [{ text: "Let me pass you to billing.", toolCalls: [{ name: "refund" }, handoff("billing", "duplicate charge")] }],
      billing: ["Refunded the duplicate."]
    }))))

  it.effect("maxHandoffs is exact: 0 allows none, 1 allows one, 2 allows two; one more ends it interrupted max_handoffs", () =>
    Effect.gen(function*() {
      // triage → billing → tech → triage → …, each writing something (so no cycle).
      const scripts = {
        triage: [{ text: "t", toolCalls: [handoff("billing")] }],
        billing: [{ text: "b", toolCalls: [handoff("tech")] }],
        tech: [{ text: "c", toolCalls: [handoff("triage")] }]
      }
      for (const maxHandoffs of [0, 1, 2]) {
        const result = yield* Agent.run(desk({ maxHandoffs }), "x").pipe(Effect.provide(byAgent(scripts)))
        expect(result).toMatchObject({ interrupted: true, interruptionReason: "max_handoffs", metadata: { handoffs: maxHandoffs } })
        expect(result.output).toBe(["t", "b", "c"][maxHandoffs])
      }
      const answered = yield* Agent.run(desk({ maxHandoffs: 1 }), "x").pipe(Effect.provide(byAgent({ ...scripts, billing: ["done"] })))
      expect(answered).toMatchObject({ interrupted: false, output: "done", metadata: { handoffs: 1 } })
    }))

  it.effect("agents that hand the conversation back and forth without writing anything: handoff_cycle", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(desk(), "x").pipe(Effect.provide(byAgent({
        triage: [{ toolCalls: [handoff("billing")] }],
        billing: [{ toolCalls: [handoff("triage")] }]
      })))
      expect(result).toMatchObject({ interrupted: true, interruptionReason: "handoff_cycle", metadata: { handoffs: 4 } })
      expect(Swarm.repeats(["a>b", "b>a", "a>b", "b>a"], 3)).toBe(true)
      expect(Swarm.repeats(["a>b", "b>c", "c>a"], 3)).toBe(false)
    }))

  it.effect("a handoff to an agent that does not exist is an ERROR result the agent reads; its turn goes on", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(desk(), "x")
      expect(result.output).toBe("I will answer myself.")
      const calls = yield* ScriptedModel.calls
      const toolMessage = calls[1]!.messages!.find((m) => m.role === "tool")!
      expect(toolMessage.content).toMatch(/^ERROR: invalid arguments for tool "handoff"/)
    }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [handoff("sales")] }, "I will answer myself."]))))

  it.effect("options are checked", () =>
    Effect.gen(function*() {
      const message = (options: Swarm.Options) => Effect.map(Effect.flip(Swarm.make(options)), (e) => e.message)
      expect(yield* message({ agents: [triage, triage], entry: "triage" })).toContain('two agents are named "triage"')
      expect(yield* message({ agents: [triage], entry: "nobody" })).toBe('Swarm: entry names none of the agents, got "nobody"')
      expect(yield* message({ agents: [triage], entry: "triage", maxHandoffs: -1 })).toBe("Swarm: maxHandoffs must be an integer >= 0, got -1")
    }))

  it.effect("a turn that fails fails the run; a spent budget ends it interrupted with the last output", () =>
    Effect.gen(function*() {
      const failed = yield* Effect.flip(Agent.run(desk(), "x").pipe(Effect.provide(ScriptedModel.layer([{ text: "t", toolCalls: [handoff("billing")] }]))))
      expect(failed).toMatchObject({ _tag: "SubAgentFailed", role: "swarm", error: { _tag: "ScriptExhausted" } })
      expect((failed as { sessionId: string }).sessionId).toMatch(/__swarm_billing_1$/)
      const capped = yield* Agent.run(desk(), "x", { budget: { maxCalls: 1 } }).pipe(
        Effect.provide(ScriptedModel.layer([{ text: "first", toolCalls: [handoff("billing")] }, "never"]))
      )
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "first" })
    }))

  it.effect("a turn stopped at its limit ends the run swarm_<name>_<n>:<reason>, with its text when it wrote one, else the last output", () =>
    Effect.gen(function*() {
      // Billing has a tool and one turn: a reply that asks for the tool stops its turn at max turns.
      const slow = Agent.make({ name: "billing", instructions: "You are billing.", tools: [refund], maxTurns: 1 })
      const desk = Agent.make({ name: "desk", instructions: "", architecture: Swarm.makeUnsafe({ agents: [triage, slow], entry: "triage" }) })
      const toBilling = { text: "t", toolCalls: [handoff("billing")] }
      const wrote = yield* Agent.run(desk, "x", { sessionId: "s" }).pipe(
        Effect.provide(byAgent({ triage: [toBilling], billing: [{ text: "Checking the charge.", toolCalls: [{ name: "refund" }] }] }))
      )
      expect(wrote).toMatchObject({
        interrupted: true,
        interruptionReason: "swarm_billing_1:max_turns_exceeded",
        output: "Checking the charge.",
        metadata: { handoffs: 1, last: "billing" }
      })
      const silent = yield* Agent.run(desk, "x").pipe(Effect.provide(byAgent({ triage: [toBilling], billing: [{ toolCalls: [{ name: "refund" }] }] })))
      expect(silent).toMatchObject({ interrupted: true, interruptionReason: "swarm_billing_1:max_turns_exceeded", output: "t" })
    }))

  it.effect("record / replay", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-swarm-"))
      try {
        const cassette = join(dir, "swarm.jsonl")
        const script = [{ text: "to billing", toolCalls: [handoff("billing", "refund")] }, "Refunded."]
        const recorded = yield* Agent.run(desk(), "x", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(ScriptedModel.layer(script))))
        )
        const replayed = yield* Agent.run(desk(), "x", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe("Refunded.")
        expect(replayed.metadata).toEqual(recorded.metadata)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
