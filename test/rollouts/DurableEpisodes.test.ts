/**
 * Durable actor-loop episodes and groups (`Durable.ActorLoopEpisode`): the records of `ActorLoop.run` but for what it
 * draws (ids, seeds, session ids), derived from the loop's key; a group's member killed (SIGKILL) mid-episode on a
 * SQLite engine and resumed sends no stored call again, appends no record twice, sees the state and the workspace its
 * replayed steps left, and writes the records of an uninterrupted run.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Durable from "../../src/rollouts/Durable.js"
import * as Reward from "../../src/rollouts/Reward.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import { linesUntilKilled as linesUntilKilledBy, testIsolation } from "../support/processes.js"

// Answers from the prompt alone: the number of `did` lines the state shows, plus one; `<done/>` at the third.
const reply = (prompt: string): string => {
  const did = (prompt.match(/did \d+/g) ?? []).length + 1
  return `<action>{"command": ["python3", "-c", "print(${did})"]}</action>\n<state_update>{"history": ["did ${did}"]}</state_update>` +
    (did === 3 ? "\n<done/>" : "")
}

/** A record without what differs between two runs of the same episode: its ids, times and durations. */
const stable = (record: TrajectoryStore.TrajectoryRecord) => {
  const { createdAt: _c, sessionId: _s, episodeId: _e, groupId: _g, seed: _seed, metrics, ...rest } = record
  const { actorLatencySec: _l, sandboxDurationSec: _d, ...otherMetrics } = metrics
  return { ...rest, metrics: otherMetrics, sandboxResult: rest.sandboxResult === null ? null : { ...rest.sandboxResult, durationMs: 0 } }
}

const recordsOf = (outcomes: ReadonlyArray<ActorLoop.Outcome>) =>
  outcomes.flatMap((outcome) => (outcome._tag === "Recorded" ? outcome.episode?.records ?? [] : []))

describe("Durable.actorLoop with maxSteps and group (ActorLoopEpisode)", () => {
  const tasks = [{ taskId: "t1", prompt: "Count.", seed: 40 }, { taskId: "t2", prompt: "Count too." }]

  it.live("episodes as workflows: ActorLoop.run's records, ids and unseeded seeds derived from the loop key; run again, nothing is sent, scored or appended", () =>
    Effect.gen(function*() {
      const counts = { calls: 0, commands: 0, scored: 0 }
      const services = () =>
        Layer.mergeAll(
          ScriptedModel.layer((request) => (counts.calls++, reply(request.prompt ?? ""))),
          Sandbox.layerTest(() => (counts.commands++, { stdout: "ok\n" })),
          StateStore.layerMemory(),
          TrajectoryStore.layerMemory,
          Reward.layer(Reward.make("one", () => Effect.sync(() => (counts.scored++, 1))))
        )
      const options = { group: 2, maxSteps: 4, concurrency: 1 } as const
      const plain = yield* ActorLoop.run(Stream.fromIterable(tasks), options).pipe(Stream.runCollect, Effect.provide(services()))
      counts.calls = counts.commands = counts.scored = 0

      const engine = () => Durable.layerActorLoop.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(services()))
      const { first, second, stored } = yield* Effect.gen(function*() {
        const first = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, loop: "loop-1" }))
        const second = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, loop: "loop-1" }))
        const stored = yield* Stream.runCollect(TrajectoryStore.read("t1"))
        return { first, second, stored }
      }).pipe(Effect.provide(engine()))
      // 2 tasks × 2 rollouts, each done at its third step: 12 calls, commands and scores, once.
      expect(counts).toEqual({ calls: 12, commands: 12, scored: 12 })
      expect(second).toEqual(first)
      expect(stored).toHaveLength(6)

      // The records of the run in process, the state carried from step to step, each member's own.
      expect(recordsOf(first).map(stable)).toEqual(recordsOf(plain).map(stable))
      expect(recordsOf(first).map((r) => [r.taskId, r.episodeStep, r.seed, r.stateAfter.history, r.episodeEnd])).toEqual([
        ["t1", 1, 40, ["did 1"], undefined],
        ["t1", 2, 42, ["did 1", "did 2"], undefined],
        ["t1", 3, 44, ["did 1", "did 2", "did 3"], "done"],
        ["t1", 1, 41, ["did 1"], undefined],
        ["t1", 2, 43, ["did 1", "did 2"], undefined],
        ["t1", 3, 45, ["did 1", "did 2", "did 3"], "done"],
        ...[0, 1].flatMap(() => [1, 2, 3].map((step) => ["t2", step, expect.any(Number), expect.any(Array), step === 3 ? "done" : undefined]))
      ])
      for (const outcome of first) expect(outcome._tag === "Recorded" && outcome.reward?.value).toBe(3)
      // One group id per task, an episode id per rollout, a session per step: derived from the key, so another
      // engine (another process, a fresh store) with the same key writes the same ones, and the same drawn seeds.
      const ids = (outcomes: ReadonlyArray<ActorLoop.Outcome>) =>
        recordsOf(outcomes).map((r) => [r.groupId, r.episodeId, r.sessionId, r.seed])
      const again = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, loop: "loop-1" })).pipe(
        Effect.provide(engine())
      )
      expect(ids(again)).toEqual(ids(first))
      const t1 = recordsOf(first).slice(0, 6)
      expect(new Set(t1.map((r) => r.groupId)).size).toBe(1)
      expect(new Set(t1.map((r) => r.episodeId)).size).toBe(2)
      expect(new Set(recordsOf(first).map((r) => r.sessionId)).size).toBe(12)
      expect(t1[0]!.sessionId).toBe(`actor-${t1[0]!.episodeId}-1`)
      // t2 has no seed: its group's base is derived, in the range a drawn one has, member i's step s `base + (s-1)·2 + i`.
      const t2 = recordsOf(first).slice(6)
      const base = t2[0]!.seed!
      expect(base).toBeGreaterThanOrEqual(0)
      expect(base).toBeLessThan(2 ** 31)
      expect(t2.map((r) => r.seed! - base)).toEqual([0, 2, 4, 1, 3, 5])
      // Another key: other ids.
      const other = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, loop: "loop-2" })).pipe(
        Effect.provide(engine())
      )
      expect(recordsOf(other)[0]!.groupId).not.toBe(recordsOf(first)[0]!.groupId)
      // The same key with other settings (a bigger group, another maxSteps): new episodes, sent again with new ids,
      // never the stored ones of the first settings mixed into one group (review of issue 31).
      counts.calls = 0
      const { bigger, longer } = yield* Effect.gen(function*() {
        yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, loop: "loop-1" }))
        const before = counts.calls
        const bigger = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, group: 3, loop: "loop-1" }))
        expect(counts.calls - before).toBe(18)
        const longer = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { ...options, maxSteps: 2, loop: "loop-1" }))
        return { bigger, longer }
      }).pipe(Effect.provide(engine()))
      const firstGroups = new Set(recordsOf(first).map((r) => r.groupId))
      expect(recordsOf(bigger).filter((r) => firstGroups.has(r.groupId))).toEqual([])
      expect(new Set(recordsOf(bigger).filter((r) => r.taskId === "t1").map((r) => r.groupId)).size).toBe(1)
      expect(recordsOf(longer).filter((r) => firstGroups.has(r.groupId))).toEqual([])
      expect(Math.max(...recordsOf(longer).map((r) => r.episodeStep ?? 0))).toBe(2)
    }))

  it.live("a lone episode (maxSteps without group): the task's own state, no group id; a seed too large for a group is a Failed outcome per episode, no workflow run", () =>
    Effect.gen(function*() {
      let calls = 0
      const services = Layer.mergeAll(
        ScriptedModel.layer((request) => (calls++, reply(request.prompt ?? ""))),
        Sandbox.layerTest(() => ({ stdout: "ok\n" })),
        StateStore.layerMemory(),
        TrajectoryStore.layerMemory
      )
      const engine = Durable.layerActorLoop.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(services))
      const { lone, state, tooLarge } = yield* Effect.gen(function*() {
        const lone = yield* Stream.runCollect(Durable.actorLoop(Stream.make({ taskId: "solo", prompt: "Count." }), { loop: "l", maxSteps: 2 }))
        const state = yield* StateStore.load("solo")
        const tooLarge = yield* Stream.runCollect(
          Durable.actorLoop(Stream.make({ taskId: "big", prompt: "Count.", seed: Number.MAX_SAFE_INTEGER - 2 }), { loop: "l", group: 2, maxSteps: 2 })
        )
        return { lone, state, tooLarge }
      }).pipe(Effect.provide(engine))
      const records = recordsOf(lone)
      expect(records.map((r) => [r.episodeStep, r.groupId, r.episodeEnd])).toEqual([[1, undefined, undefined], [2, undefined, "max_steps"]])
      expect(state.history).toEqual(["did 1", "did 2"])
      // One failure per episode the group would have run (outcomes count episodes), as in ActorLoop.run.
      expect(tooLarge).toHaveLength(2)
      expect(tooLarge.map((outcome) => outcome._tag === "Failed" && outcome.error._tag)).toEqual(["InvalidOptions", "InvalidOptions"])
      expect(tooLarge[0]!._tag === "Failed" && tooLarge[0]!.error.message).toContain("seed must be at most")
      expect(calls).toBe(2)
      // Options it cannot use fail before anything runs, naming the field.
      const refused = yield* Stream.runCollect(Durable.actorLoop(Stream.make({ taskId: "x", prompt: "." }), { loop: "l", group: 0 })).pipe(
        Effect.flip,
        Effect.provide(WorkflowEngine.layerMemory)
      )
      expect(refused._tag).toBe("InvalidOptions")
      expect(refused.message).toContain("group must be")
      expect(calls).toBe(2)
    }))
})

/** A memory engine whose model fails its second call (a 500), in a process sandbox of its own work root. */
const failingSecondCall = () => {
  const workRoot = mkdtempSync(join(tmpdir(), "valet-durable-episode-ws-"))
  const counted = { calls: 0 }
  const services = Layer.mergeAll(
    ScriptedModel.layer((request) =>
      ++counted.calls === 2 ? { error: new ModelError.ServerError({ status: 500, message: "boom" }) } : reply(request.prompt ?? "")),
    Sandbox.layerProcess({ isolation: "process", workRoot, allow: ["python3"] }),
    StateStore.layerMemory(),
    TrajectoryStore.layerMemory
  )
  return { workRoot, counted, engine: Durable.layerActorLoop.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(services)) }
}

describe("Durable episodes: a failed episode", () => {
  it.live("is a Failed outcome naming its episode and group, its lines without episode_end, its kept workspace removed", () =>
    Effect.gen(function*() {
      const { workRoot, engine, counted } = failingSecondCall()
      try {
        const { outcomes, lines } = yield* Effect.gen(function*() {
          const outcomes = yield* Stream.runCollect(Durable.actorLoop(Stream.make({ taskId: "f1", prompt: "Count." }), { loop: "f", group: 1, maxSteps: 3 }))
          const lines = yield* Stream.runCollect(TrajectoryStore.read("f1"))
          return { outcomes, lines }
        }).pipe(Effect.provide(engine))
        const [outcome] = outcomes
        expect(outcome?._tag).toBe("Failed")
        if (outcome?._tag !== "Failed") return
        expect(outcome.error._tag).toBe("ServerError")
        // Failed in this run: not tried again in it (1 good call, the failing one).
        expect(counted.calls).toBe(2)
        expect(lines.map((line) => [line.episodeId, line.groupId, line.episodeEnd])).toEqual([[outcome.episodeId, outcome.groupId, undefined]])
        expect(outcome.groupId).toEqual(expect.any(String))
        expect(readdirSync(join(workRoot, "kept"))).toEqual([])
      } finally {
        rmSync(workRoot, { recursive: true, force: true })
      }
    }))

  it.live("run again, an episode recorded as failed by an earlier run runs as a new attempt (a new episode id, the same group); once recorded, a third run sends nothing", () =>
    Effect.gen(function*() {
      const { workRoot, engine, counted } = failingSecondCall()
      try {
        const runs = yield* Effect.gen(function*() {
          const once = () => Stream.runCollect(Durable.actorLoop(Stream.make({ taskId: "f1", prompt: "Count." }), { loop: "f", group: 1, maxSteps: 3 }))
          const first = yield* once()
          const second = yield* once()
          const callsAfterSecond = counted.calls
          const third = yield* once()
          return { first, second, third, callsAfterSecond, lines: yield* Stream.runCollect(TrajectoryStore.read("f1")) }
        }).pipe(Effect.provide(engine))
        const [first] = runs.first
        const [second] = runs.second
        expect(first?._tag).toBe("Failed")
        expect(second?._tag).toBe("Recorded")
        if (first?._tag !== "Failed" || second?._tag !== "Recorded") return
        // The new attempt: 3 more calls (done at its third step), a new episode id, the group's id kept.
        expect(runs.callsAfterSecond).toBe(5)
        expect(second.episode?.episodeId).not.toBe(first.episodeId)
        expect(second.episode?.groupId).toBe(first.groupId)
        expect(second.episode?.end).toBe("done")
        // A third run answers the stored outcome: nothing sent, nothing appended.
        expect(runs.third).toEqual(runs.second)
        expect(counted.calls).toBe(5)
        expect(runs.lines.map((line) => [line.episodeId === first.episodeId, line.episodeEnd])).toEqual([
          [true, undefined],
          [false, undefined],
          [false, undefined],
          [false, "done"]
        ])
      } finally {
        rmSync(workRoot, { recursive: true, force: true })
      }
    }))
})

/** The lines a child prints until it exits, SIGKILLing it at the first line starting with `killAt`. */
const linesUntilKilled = (child: string, args: ReadonlyArray<string>, killAt: string): Promise<Array<string>> =>
  linesUntilKilledBy(child, args, (line) => line.startsWith(killAt))

describe("Durable episodes on SQLite: a process killed (SIGKILL) mid-episode", () => {
  it.live("resumed: no stored call sent again, no record appended twice, the member's state and workspace as its replayed steps left them; the records of an uninterrupted run", () =>
    Effect.gen(function*() {
      const child = join(import.meta.dirname, "..", "support", "durableEpisodeChild.ts")
      const whole = mkdtempSync(join(tmpdir(), "valet-durable-episode-"))
      const cut = mkdtempSync(join(tmpdir(), "valet-durable-episode-"))
      try {
        const uninterrupted = spawnSync(process.execPath, ["--import", "tsx", child, whole, "0", testIsolation], { encoding: "utf8", timeout: 60_000 })
        const wholeLines = uninterrupted.stdout.trim().split("\n")
        expect(wholeLines.filter((line) => line.startsWith("call"))).toHaveLength(6)
        expect(wholeLines.filter((line) => line.startsWith("score"))).toHaveLength(6)
        const [first, second] = wholeLines.filter((line) => line.startsWith("recorded")).map((line) => line.split(" ")[1]!)

        // Killed while the second rollout's second model call waits: its first step stored, its workspace kept.
        const killed = yield* Effect.promise(() => linesUntilKilled(child, [cut, "5", testIsolation], "call 5"))
        expect(killed).toEqual([
          `call 1 actor-${first}-1`,
          "score 1",
          `call 2 actor-${first}-2`,
          "score 2",
          `call 3 actor-${first}-3`,
          "score 3",
          `recorded ${first} 3`,
          `call 4 actor-${second}-1`,
          "score 4",
          `call 5 actor-${second}-2`
        ])
        const kept = join(cut, "sandbox", "kept")
        expect(readdirSync(kept)).toEqual([`episode-${second}`])

        const resumed = spawnSync(process.execPath, ["--import", "tsx", child, cut, "0", testIsolation], { encoding: "utf8", timeout: 60_000 })
        // Only the call in flight at the kill and the one after it are sent, and only their steps scored; the first
        // rollout answers its outcome.
        // (The trajectory store's warning that it took over the killed writer's lock is logged there too: not counted.)
        expect(resumed.stdout.trim().split("\n").filter((line) => /^(call|score|recorded|failed|error) /.test(line))).toEqual([
          `recorded ${first} 3`,
          `call 1 actor-${second}-2`,
          "score 1",
          `call 2 actor-${second}-3`,
          "score 2",
          `recorded ${second} 3`
        ])
        const read = (dir: string) =>
          readFileSync(join(dir, "trajectories", "raw", "t1.jsonl"), "utf8").trim().split("\n").map((line) => {
            const { created_at: _c, metrics, sandbox_result, ...rest } = JSON.parse(line)
            const { actor_latency_sec: _l, sandbox_duration_sec: _d, ...otherMetrics } = metrics
            return { ...rest, metrics: otherMetrics, sandbox_result: { ...sandbox_result, duration_ms: 0 } }
          })
        const records = read(cut)
        // The same lines, ids and seeds included: 3 steps each, the state and the workspace's file carried across the kill.
        expect(records).toEqual(read(whole))
        expect(records.map((r) => [r.episode_id, r.episode_step, r.seed, r.state_after.history.length, r.sandbox_result.stdout, r.reward, r.episode_end ?? null, r.episode_reward ?? null]))
          .toEqual([
            [first, 1, 10, 1, "1\n", 1, null, null],
            [first, 2, 12, 2, "2\n", 1, null, null],
            [first, 3, 14, 3, "3\n", 1, "max_steps", 3],
            [second, 1, 11, 1, "1\n", 1, null, null],
            [second, 2, 13, 2, "2\n", 1, null, null],
            [second, 3, 15, 3, "3\n", 1, "max_steps", 3]
          ])
        // The episode's workspace went with its end.
        expect(existsSync(kept) ? readdirSync(kept) : []).toEqual([])
      } finally {
        rmSync(whole, { recursive: true, force: true })
        rmSync(cut, { recursive: true, force: true })
      }
    }), 120_000)
})

describePostgres("Durable episodes on a PostgreSQL runner", () => {
  it.live("a group's rollouts as workflows of a runner over PostgreSQL: the ids, seeds and records of the same group on the in-memory engine", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const services = () =>
        Layer.mergeAll(
          ScriptedModel.layer((request) => reply(request.prompt ?? "")),
          Sandbox.layerTest(() => ({ stdout: "ok\n" })),
          StateStore.layerMemory(),
          TrajectoryStore.layerMemory
        )
      const tasks = Stream.make({ taskId: "p1", prompt: "Count." })
      const options = { loop: "pg", group: 2, maxSteps: 3, concurrency: 2 } as const
      const onPostgres = yield* Stream.runCollect(Durable.actorLoop(tasks, options)).pipe(
        Effect.provide(Durable.layerActorLoop.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url })), Layer.provideMerge(services())))
      )
      const inMemory = yield* Stream.runCollect(Durable.actorLoop(tasks, options)).pipe(
        Effect.provide(Durable.layerActorLoop.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(services())))
      )
      const byEpisode = (outcomes: ReadonlyArray<ActorLoop.Outcome>) =>
        recordsOf(outcomes).map(({ createdAt: _c, step: _s, metrics: _m, ...rest }) => rest).sort((a, b) => a.seed! - b.seed!)
      expect(onPostgres.map((outcome) => outcome._tag)).toEqual(["Recorded", "Recorded"])
      expect(byEpisode(onPostgres)).toEqual(byEpisode(inMemory))
      expect(recordsOf(onPostgres).map((r) => r.episodeEnd).filter((end) => end !== undefined)).toEqual(["done", "done"])
    }).pipe(Effect.scoped), 120_000)
})
