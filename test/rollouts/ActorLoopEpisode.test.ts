import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Reward from "../../src/rollouts/Reward.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"

const task = (parts: Partial<ActorLoop.Task> = {}): ActorLoop.Task => ({ taskId: "fix-1", prompt: "Make add() correct.", ...parts })

const answer = (note: string, done = false) =>
  `<think>${note}</think><action>{"command": ["python3", "-V"]}</action>` +
  `<state_update>{"history": ["${note}"]}</state_update>${done ? "<done/>" : ""}`

const testLayers = (script: ScriptedModel.Script) =>
  Layer.mergeAll(
    ScriptedModel.layer(script),
    Sandbox.layerTest(() => ({ stdout: "Python 3\n" })),
    StateStore.layerMemory(),
    TrajectoryStore.layerMemory
  )

const encode = Schema.encodeSync(TrajectoryStore.TrajectoryRecord)
const stored = (taskId: string) => Effect.map(Stream.runCollect(TrajectoryStore.read(taskId)), (records) => Array.from(records))

describe("ActorLoop.episode", () => {
  it.effect("ends when the model says <done/>: one episode id, steps 1…n, the state carried, the end on the last line only", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 5 })
      expect(episode.end).toBe("done")
      expect(episode.records).toHaveLength(2)
      const records = yield* stored("fix-1")
      expect(records.map((r) => [r.step, r.episodeStep, r.episodeId])).toEqual([[1, 1, episode.episodeId], [2, 2, episode.episodeId]])
      expect(episode.episodeId).toMatch(/^[0-9a-f-]{36}$/)
      // The state the first step saved is in the second step's prompt.
      expect(records[1]!.prompt).toContain("ran once")
      const lines = records.map((r) => encode(r) as Record<string, unknown>)
      expect(lines[0]).not.toHaveProperty("episode_end")
      expect(lines[1]).toMatchObject({ episode_id: episode.episodeId, episode_step: 2, episode_end: "done", episode_reward: null })
      expect(lines[1]).not.toHaveProperty("group_id")
      // The fields the origin's readers use are all still there.
      for (const key of ["task_id", "step", "prompt", "state_before", "state_after", "model_output", "sandbox_result", "reward", "metrics"]) {
        expect(lines[1]).toHaveProperty(key)
      }
      expect(yield* ScriptedModel.remaining).toBe(1)
    }).pipe(Effect.provide(testLayers([answer("ran once"), answer("ran twice", true), answer("never asked")]))))

  it.effect("ends when a step's reward reaches rewardThreshold; the episode's reward sums its steps'", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 5, rewardThreshold: 1 })
      expect(episode.end).toBe("reward")
      expect(episode.records.map((r) => r.reward)).toEqual([0.25, 1])
      expect(episode.reward?.value).toBe(1.25)
      expect(episode.records[1]).toMatchObject({ episodeEnd: "reward", episodeReward: 1.25 })
      expect(episode.records[0]!.episodeReward).toBeUndefined()
    }).pipe(Effect.provide(Layer.merge(
      testLayers([answer("close"), answer("right"), answer("never asked")]),
      Reward.layer(Reward.make("right", (step) => Effect.succeed(step.output.includes("right") ? 1 : 0.25)))
    ))))

  it.effect("ends at maxSteps when nothing else ends it", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 3 })
      expect(episode.end).toBe("max_steps")
      expect(episode.records.map((r) => [r.episodeStep, r.episodeEnd])).toEqual([[1, undefined], [2, undefined], [3, "max_steps"]])
      expect(episode.reward).toBeUndefined()
    }).pipe(Effect.provide(testLayers(() => answer("again")))))

  it.effect("maxSteps 0 or an unknown option fails with InvalidOptions before any step", () =>
    Effect.gen(function*() {
      const zero = yield* Effect.flip(ActorLoop.episode(task(), { maxSteps: 0 }))
      expect(zero._tag).toBe("InvalidOptions")
      expect(zero.message).toContain("maxSteps")
      const unknown = yield* Effect.flip(ActorLoop.episode(task(), { max_steps: 3 } as unknown as ActorLoop.EpisodeOptions))
      expect(unknown.message).toBe("ActorLoop: max_steps is not a known option")
      expect(yield* ScriptedModel.calls).toHaveLength(0)
    }).pipe(Effect.provide(testLayers([answer("never asked")]))))
})

describe("ActorLoop groups", () => {
  it.effect("run with group: n rollouts of a task, distinct seeds in the request bodies, one group id, an episode each", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const dir = mkdtempSync(join(tmpdir(), "valet-actor-group-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      writeFileSync(join(dir, "vllm_actors.yaml"), `actors:\n  - name: a\n    base_url: ${server.url}\n    api: openai\n`)
      const pool = Vllm.layer({ configPath: join(dir, "vllm_actors.yaml") }).pipe(
        Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
      )
      const outcomes = yield* Stream.runCollect(
        ActorLoop.run(Stream.make(task({ seed: 40 }), task({ taskId: "no-seed" })), { group: 3, concurrency: 3 })
      ).pipe(
        Effect.provide(Layer.mergeAll(pool, Sandbox.layerTest(() => ({ stdout: "" })), StateStore.layerMemory(), TrajectoryStore.layerMemory))
      )
      const recorded = Array.from(outcomes).flatMap((o) => (o._tag === "Recorded" ? [o] : []))
      expect(recorded).toHaveLength(6)
      const seeds = server.requests.filter((r) => r.path === "/v1/completions").map((r) => r.body.seed as number)
      expect(seeds).toHaveLength(6)
      expect(new Set(seeds).size).toBe(6)
      expect(seeds.filter((seed) => seed >= 40 && seed <= 42).sort()).toEqual([40, 41, 42])
      for (const taskId of ["fix-1", "no-seed"]) {
        const members = recorded.filter((o) => o.task.taskId === taskId)
        expect(members).toHaveLength(3)
        expect(new Set(members.map((o) => o.record.groupId)).size).toBe(1)
        expect(members[0]!.record.groupId).toMatch(/^[0-9a-f-]{36}$/)
        expect(new Set(members.map((o) => o.record.episodeId)).size).toBe(3)
        expect(new Set(members.map((o) => o.record.seed)).size).toBe(3)
        for (const o of members) expect(o.record).toMatchObject({ taskId, episodeStep: 1, episodeEnd: "max_steps" })
      }
      expect(new Set(recorded.map((o) => o.record.groupId)).size).toBe(2)
    }))

  it.effect("group: each rollout starts from an empty state of its own, whatever the task's stored state", () =>
    Effect.gen(function*() {
      yield* StateStore.save("fix-1", { ...StateStore.empty, history: ["from an earlier run"] })
      const episodes = yield* ActorLoop.group(task(), { n: 2, maxSteps: 2 })
      expect(episodes.map((e) => e.seed)).toHaveLength(2)
      expect(episodes[0]!.seed! + 1).toBe(episodes[1]!.seed)
      for (const episode of episodes) {
        expect(episode.records[0]!.prompt).not.toContain("earlier run")
        expect(episode.records[0]!.stateBefore).toEqual(StateStore.empty)
        expect(episode.records[1]!.prompt).toContain("again")
      }
      const calls = yield* ScriptedModel.calls
      expect(calls.map((c) => c.seed)).toEqual([episodes[0]!.seed, episodes[0]!.seed, episodes[1]!.seed, episodes[1]!.seed])
      expect(yield* StateStore.load("fix-1")).toMatchObject({ history: ["from an earlier run"] })
    }).pipe(Effect.provide(testLayers(() => answer("again")))))
})
