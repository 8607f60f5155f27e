/**
 * Issue 12: "a long CPU-bound step inside a run must yield, so timeouts and wall-clock budgets fire". A model
 * reply of `score` + 5,000 blanks used to block the event loop for 53 s in the score parser, and nothing —
 * no timer, no timeout, no budget — could run meanwhile. Here every architecture that parses model text reads
 * 1 MiB adversarial replies while the test counts the turns of the event loop (a `setImmediate` that re-arms
 * itself runs once per turn) and which turn each model call was answered in; then an `Effect.timeout` around a run
 * that would go on for a long time must fire.
 *
 * Linear parsers are not enough on their own: a fiber yields to the event loop only every couple of thousand
 * operations, and with megabyte replies that was 420 ms without a tick (the Ensemble here); the architectures now
 * yield before reading a long reply (`yieldBeforeReading`), so the event loop turns between one reply and the
 * reading of the next. Counted, not timed (a timed bound failed on a loaded machine): without those yields a whole
 * run answers all its calls in one turn (6 to 10 here); with them no turn answers more than two — a reply that is
 * read, and at most one more (a second solver running beside it, or a draft handed on unread).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer } from "effect"
import * as ActorCritic from "../../src/architectures/ActorCritic.js"
import * as PlanAndExecute from "../../src/architectures/PlanAndExecute.js"
import * as ReAct from "../../src/architectures/ReAct.js"
import * as Reflexion from "../../src/architectures/Reflexion.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Supervisor from "../../src/architectures/Supervisor.js"
import * as Agent from "../../src/core/Agent.js"
import type * as Architecture from "../../src/core/Architecture.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Ensemble from "../../src/architectures/Ensemble.js"
import * as ToolVote from "../../src/architectures/ToolVote.js"

const MiB = 1024 * 1024

/** 1 MiB replies built against each parser: the inputs, scaled up. */
const hostile = [
  `score${" ".repeat(MiB)}`,
  "{".repeat(MiB),
  `FINAL: ${"1".repeat(MiB)}x`,
  "[".repeat(MiB / 2) + "]".repeat(MiB / 2),
  `lesson${" ".repeat(MiB)}x`,
  `<action>${"[".repeat(MiB)}`,
  "```".repeat(MiB / 3),
  `${"$".repeat(MiB)}x`
]
/** The turn of the event loop now, counted by a `setImmediate` that re-arms itself (see `countingTurns`). */
let turn = 0
/** The turn in which each model call was answered, in call order. */
const answeredIn: Array<number> = []

/** A scripted model answering every call with the next hostile reply, round-robin, noting the turn of each call. */
const hostileModel = (offset = 0) =>
  ScriptedModel.layer((_request: Model.Request, index: number) => {
    answeredIn.push(turn)
    return hostile[(index + offset) % hostile.length]!
  })

/** Runs `effect` while the turns of the event loop are counted: its exit, and the most calls answered in one turn. */
const countingTurns = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    turn = 0
    answeredIn.length = 0
    let next: NodeJS.Immediate | undefined
    const tick = () => {
      turn++
      next = setImmediate(tick)
    }
    next = setImmediate(tick)
    const exit = yield* Effect.exit(effect).pipe(Effect.ensuring(Effect.sync(() => clearImmediate(next))))
    const perTurn = new Map<number, number>()
    for (const at of answeredIn) perTurn.set(at, (perTurn.get(at) ?? 0) + 1)
    return { exit, calls: answeredIn.length, turns: turn, mostInOneTurn: Math.max(0, ...perTurn.values()) }
  })

const agentWith = <R>(architecture: Architecture.Architecture<R>) =>
  Agent.make({ name: "team", instructions: "", architecture, maxTurns: 3 })

const actor = Agent.make({ name: "actor", instructions: "" })
const critic = Agent.make({ name: "critic", instructions: "" })

describe("the event loop keeps turning while runs parse 1 MiB replies", () => {
  const cases: ReadonlyArray<readonly [string, () => Effect.Effect<unknown, unknown, never>]> = [
    ["ActorCritic", () =>
      Effect.flatMap(ActorCritic.make({ actor, critic, maxRounds: 3 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(Effect.provide(hostileModel()))],
    ["Reflexion", () =>
      Effect.flatMap(Reflexion.make({ maxAttempts: 3 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(Effect.provide(hostileModel(1)))],
    ["SelfRefine", () =>
      Effect.flatMap(SelfRefine.make({ maxRounds: 3 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(Effect.provide(hostileModel(2)))],
    ["PlanAndExecute", () =>
      Effect.flatMap(PlanAndExecute.make({ maxSteps: 3 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(Effect.provide(hostileModel(3)))],
    ["Ensemble", () =>
      Effect.flatMap(Ensemble.make({ solvers: [{ name: "a", prompt: "Solve." }, { name: "b", prompt: "Solve." }], maxRounds: 2 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(Effect.provide(hostileModel(2)))],
    ["ToolVote", () =>
      Effect.flatMap(ToolVote.make({ attempts: 2, maxTurns: 4 }), (architecture) =>
        Agent.run(agentWith(architecture), "task")).pipe(
          Effect.provide(Layer.mergeAll(hostileModel(1), Sandbox.layerTest(() => ({ stdout: "1\n" }))))
        )],
    ["ActorLoop", () =>
      Effect.forEach([0, 1, 2], (i) =>
        ActorLoop.step({ taskId: `loop-${i}`, prompt: "fix it", workspaceFiles: { "a.py": "print(1)\n" } })).pipe(
          Effect.provide(Layer.mergeAll(hostileModel(5), Sandbox.layerTest(), StateStore.layerMemory(), TrajectoryStore.layerMemory))
        )],
    ["ReAct and Supervisor tool calls with 1 MiB of nested arguments", () => {
      const deep = "[".repeat(MiB / 2) + "]".repeat(MiB / 2)
      const calls = ScriptedModel.layer((_request: Model.Request, index: number) => {
        answeredIn.push(turn)
        return index % 3 === 2
          ? hostile[index % hostile.length]!
          : { toolCalls: [{ name: index % 3 === 0 ? "delegate" : "forward_message", arguments: deep }] }
      })
      return Effect.gen(function*() {
        yield* Agent.run(agentWith(ReAct.architecture), "task")
        const supervisor = yield* Supervisor.make({ workers: [Agent.make({ name: "worker", instructions: "" })] })
        yield* Agent.run(agentWith(supervisor), "task")
      }).pipe(Effect.provide(calls))
    }]
  ]

  for (const [name, run] of cases) {
    it.live(`${name}: the event loop turns between the replies it reads (at most 2 calls answered per turn)`, () =>
      Effect.gen(function*() {
        // Three runs one after the other, so a turn could hold the end of one run and the start of the next.
        const { calls, exit, mostInOneTurn, turns } = yield* countingTurns(Effect.repeat(run(), { times: 2 }))
        // Every run ended with a result (a typed failure would end the repetition: there are none here).
        expect(Exit.isSuccess(exit) ? "ok" : String(exit.cause)).toBe("ok")
        expect(calls).toBeGreaterThan(0)
        expect(turns).toBeGreaterThan(0)
        expect(mostInOneTurn, `calls answered per turn: ${JSON.stringify(answeredIn)}`).toBeLessThanOrEqual(2)
      }), 120_000)
  }

  it.live("an Effect.timeout around a run that parses 1 MiB replies round after round fires", () =>
    Effect.gen(function*() {
      // Scored 0 every round (a run of blanks is no score), so without the timeout it would go on for 10,000
      // rounds; before the fix the first critique alone took hours. The test's own timeout is the bound.
      const architecture = yield* ActorCritic.make({ actor, critic, maxRounds: 10_000 })
      const { calls, exit, mostInOneTurn } = yield* countingTurns(
        Agent.run(agentWith(architecture), "task").pipe(
          Effect.provide(ScriptedModel.layer((_request: Model.Request, index: number) => {
            answeredIn.push(turn)
            return index % 2 === 0 ? "draft" : hostile[0]!
          })),
          Effect.timeout("500 millis")
        )
      )
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("TimeoutError")
      expect(calls).toBeLessThan(20_000)
      expect(mostInOneTurn).toBeLessThanOrEqual(2)
    }), 60_000)
})
