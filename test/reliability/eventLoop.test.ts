/**
 * Issue 12: "a long CPU-bound step inside a run must yield, so timeouts and wall-clock budgets fire". A model
 * reply of `score` + 5,000 blanks used to block the event loop for 53 s in the score parser, and nothing —
 * no timer, no timeout, no budget — could run meanwhile. Here a real 100 ms `setInterval` ticks while every
 * architecture that parses model text reads 1 MiB adversarial replies, run after run for 700 ms, and the largest
 * gap between ticks must stay well under 400 ms; then an `Effect.timeout` around a run that would go on for a long
 * time must fire on time. Live clock throughout.
 *
 * Linear parsers are not enough on their own: a fiber yields to the event loop only every couple of thousand
 * operations, and with megabyte replies that was 420 ms without a tick (the Ensemble here); the architectures now
 * yield before reading a long reply (`yieldBeforeReading`), and the gaps stay near the timer's own 100 ms.
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
import * as Ensemble from "../../src/rollouts/Ensemble.js"
import * as ToolVote from "../../src/rollouts/ToolVote.js"

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
/** A scripted model answering every call with the next hostile reply, round-robin. */
const hostileModel = (offset = 0) => ScriptedModel.layer((_request: Model.Request, index: number) => hostile[(index + offset) % hostile.length]!)

/** Runs `effect` while a real 100 ms interval ticks; the largest gap between ticks (and to the end), in ms. */
const largestGap = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const ticks: Array<number> = [performance.now()]
    const timer = setInterval(() => ticks.push(performance.now()), 100)
    const exit = yield* Effect.exit(effect).pipe(Effect.ensuring(Effect.sync(() => clearInterval(timer))))
    ticks.push(performance.now())
    let gap = 0
    for (let i = 1; i < ticks.length; i++) gap = Math.max(gap, ticks[i]! - ticks[i - 1]!)
    return { exit, gap, ticks: ticks.length }
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
      const calls = ScriptedModel.layer((_request: Model.Request, index: number) =>
        index % 3 === 2
          ? hostile[index % hostile.length]!
          : { toolCalls: [{ name: index % 3 === 0 ? "delegate" : "forward_message", arguments: deep }] }
      )
      return Effect.gen(function*() {
        yield* Agent.run(agentWith(ReAct.architecture), "task")
        const supervisor = yield* Supervisor.make({ workers: [Agent.make({ name: "worker", instructions: "" })] })
        yield* Agent.run(agentWith(supervisor), "task")
      }).pipe(Effect.provide(calls))
    }]
  ]

  for (const [name, run] of cases) {
    it.live(`${name}: a 100 ms timer never waits 400 ms`, () =>
      Effect.gen(function*() {
        // Runs one after the other for 700 ms, so the timer has several ticks to miss.
        let runs = 0
        const started = performance.now()
        const { exit, gap, ticks } = yield* largestGap(Effect.gen(function*() {
          do {
            yield* run()
            runs++
          } while (performance.now() - started < 700)
        }))
        // Every run ended with a result (typed failures would end the loop above: there are none here).
        expect(Exit.isSuccess(exit) ? "ok" : String(exit.cause)).toBe("ok")
        expect(runs).toBeGreaterThan(0)
        expect(ticks).toBeGreaterThanOrEqual(4)
        expect(gap).toBeLessThan(400)
      }), 120_000)
  }

  it.live("an Effect.timeout around a run that parses 1 MiB replies round after round fires on time", () =>
    Effect.gen(function*() {
      // Scored 0 every round (a run of blanks is no score), so without the timeout it would go on for 10,000
      // rounds; before the fix the first critique alone took hours.
      const architecture = yield* ActorCritic.make({ actor, critic, maxRounds: 10_000 })
      const started = performance.now()
      const { exit, gap } = yield* largestGap(
        Agent.run(agentWith(architecture), "task").pipe(
          Effect.provide(ScriptedModel.layer((_request: Model.Request, index: number) => index % 2 === 0 ? "draft" : hostile[0]!)),
          Effect.timeout("500 millis")
        )
      )
      const elapsed = performance.now() - started
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("TimeoutError")
      expect(elapsed).toBeLessThan(500 + 400)
      expect(gap).toBeLessThan(400)
    }), 60_000)
})
