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

/** The test services, with the sandbox noting each workspace a command runs in. */
const seeingWorkspaces = (seen: Array<Sandbox.Workspace>) =>
  Layer.mergeAll(
    ScriptedModel.layer(() => answer("again")),
    Sandbox.layerTest(({ workspace }) => {
      seen.push(workspace)
      return { stdout: "" }
    }),
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

  // The step reward fails (its check could not run) on the steps whose answer says "broken", else scores 1.
  const flaky = Reward.layer(Reward.make("check", (step) =>
    step.output.includes("broken")
      ? Effect.fail(new Reward.RewardFailed({ reward: "check", reason: "sandbox_error", message: "the check could not run" }))
      : Effect.succeed(1)))
  const failedEnd = (aggregate: Reward.Aggregate, answers: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 2, aggregate })
      const last = episode.records.at(-1)!
      return { failed: last.episodeRewardFailed, line: encode(last) as Record<string, unknown>, reward: last.episodeReward }
    }).pipe(Effect.provide(Layer.merge(testLayers(answers), flaky)))

  it.effect("episode_reward_failed: the episode's reward counted a step reward that had a part fail (with last, the last step only)", () =>
    Effect.gen(function*() {
      // Step 1's reward failed (counted 0), step 2's is 1.
      const summed = yield* failedEnd("sum", [answer("broken"), answer("fine")])
      expect(summed).toMatchObject({ failed: true, reward: 1, line: { episode_reward: 1, episode_reward_failed: true } })
      expect((yield* failedEnd("mean", [answer("broken"), answer("fine")])).failed).toBe(true)
      // With last, step 1 does not count: the episode's reward is exact.
      const last = yield* failedEnd("last", [answer("broken"), answer("fine")])
      expect(last).toMatchObject({ failed: undefined, reward: 1 })
      expect(last.line).not.toHaveProperty("episode_reward_failed")
      expect((yield* failedEnd("last", [answer("fine"), answer("broken")])).failed).toBe(true)
      expect((yield* failedEnd("sum", [answer("fine"), answer("fine")])).failed).toBeUndefined()
    }))

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

/** A `Vllm` pool of one actor at `url` (its config file in a temp dir removed with the test's scope). */
const vllmPool = (url: string) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "valet-actor-group-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    writeFileSync(join(dir, "vllm_actors.yaml"), `actors:\n  - name: a\n    base_url: ${url}\n    api: openai\n`)
    return Vllm.layer({ configPath: join(dir, "vllm_actors.yaml") }).pipe(
      Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer))
    )
  })

describe("ActorLoop groups", () => {
  for (const concurrency of [3, 1]) {
    it.effect(`run with group against vLLM (concurrency ${concurrency}): one request with n and the group's seed serves the first steps, then a seed per step`, () =>
      Effect.gen(function*() {
        const server = yield* Server.make({ api: "openai" })
        const pool = yield* vllmPool(server.url)
        // The shared request's three choices, each a different answer: member i must take choice i.
        const choice = (index: number) => ({ index, text: answer(`member ${index}`), logprobs: null, finish_reason: "stop", stop_reason: null })
        server.enqueue("/v1/completions", Server.json({
          id: "cmpl-n",
          object: "text_completion",
          created: 1_700_000_000,
          model: "loopback-model",
          choices: [choice(0), choice(1), choice(2)],
          usage: { prompt_tokens: 10, completion_tokens: 30, total_tokens: 40 }
        }))
        const outcomes = yield* Stream.runCollect(
          ActorLoop.run(Stream.make(task({ seed: 40 })), { group: 3, maxSteps: 2, concurrency })
        ).pipe(
          Effect.provide(Layer.mergeAll(pool, Sandbox.layerTest(() => ({ stdout: "" })), StateStore.layerMemory(), TrajectoryStore.layerMemory))
        )
        const bodies = server.requests.filter((r) => r.path === "/v1/completions").map((r) => r.body)
        expect(bodies).toHaveLength(4)
        expect(bodies[0]).toMatchObject({ n: 3, seed: 40 })
        expect(bodies.slice(1).map((b) => b.seed).sort()).toEqual([43, 44, 45])
        expect(bodies.slice(1).every((b) => b.n === undefined)).toBe(true)
        const recorded = Array.from(outcomes).flatMap((o) => (o._tag === "Recorded" ? [o] : []))
        expect(recorded).toHaveLength(3)
        expect(new Set(recorded.map((o) => o.record.groupId)).size).toBe(1)
        expect(recorded[0]!.record.groupId).toMatch(/^[0-9a-f-]{36}$/)
        expect(new Set(recorded.map((o) => o.record.episodeId)).size).toBe(3)
        const firsts = recorded.map((o) => o.episode!.records[0]!)
        // Each member took its own choice; each records the request's seed and its share of the tokens.
        expect(firsts.map((r) => r.modelOutput.raw).sort()).toEqual([0, 1, 2].map((i) => answer(`member ${i}`)))
        for (const r of firsts) expect(r).toMatchObject({ seed: 40, episodeStep: 1, metrics: { inputTokens: 10, outputTokens: 10 } })
        const seconds = recorded.map((o) => o.record)
        expect(seconds.map((r) => r.seed).sort()).toEqual([43, 44, 45])
        for (const o of recorded) {
          const member = Number(/member (\d)/.exec(o.episode!.records[0]!.modelOutput.raw)![1])
          expect(o.record.seed).toBe(40 + 3 + member)
        }
      }))
  }

  it.effect("a vLLM answer with fewer choices than n: the member left without one sends its own request with its own seed", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const pool = yield* vllmPool(server.url)
      const completion = (indexes: ReadonlyArray<number>) =>
        Server.json({
          id: "cmpl-n",
          object: "text_completion",
          created: 1_700_000_000,
          model: "loopback-model",
          choices: indexes.map((index) => ({ index, text: answer(`choice ${index}`), logprobs: null, finish_reason: "stop", stop_reason: null })),
          usage: { prompt_tokens: 10, completion_tokens: 20, total_tokens: 30 }
        })
      server.enqueue("/v1/completions", completion([0, 1]))
      server.enqueue("/v1/completions", completion([0]))
      const episodes = yield* ActorLoop.group(task({ seed: 40 }), { n: 3 }).pipe(
        Effect.provide(Layer.mergeAll(pool, Sandbox.layerTest(() => ({ stdout: "" })), StateStore.layerMemory(), TrajectoryStore.layerMemory))
      )
      const bodies = server.requests.filter((r) => r.path === "/v1/completions").map((r) => r.body)
      expect(bodies.map((b) => [b.n, b.seed])).toEqual([[3, 40], [undefined, 42]])
      // Every member has an answer: none is left with an empty one.
      expect(episodes.map((e) => e.records[0]!.modelOutput.raw)).toEqual([answer("choice 0"), answer("choice 1"), answer("choice 0")])
      // Each record names the seed its request went out with, and the shared answer's tokens are split between the
      // two choices it holds (20 / 2), not between the three asked for.
      expect(episodes.map((e) => e.records[0]!.seed)).toEqual([40, 40, 42])
      expect(episodes.map((e) => e.records[0]!.metrics.outputTokens)).toEqual([10, 10, 20])
    }))

  it.effect("a model that cannot serve n choices in one request gets a request per member, seeds distinct", () =>
    Effect.gen(function*() {
      const episodes = yield* ActorLoop.group(task({ seed: 5 }), { n: 3 })
      const calls = yield* ScriptedModel.calls
      expect(calls.map((c) => [c.seed, c.n])).toEqual([[5, undefined], [6, undefined], [7, undefined]])
      expect(episodes.map((e) => e.records[0]!.seed)).toEqual([5, 6, 7])
    }).pipe(Effect.provide(testLayers(() => answer("x")))))

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
      // Rollout i's step s: base + (s - 1) × n + i — a seed per step, none shared in the group.
      const calls = yield* ScriptedModel.calls
      const base = episodes[0]!.seed!
      expect(calls.map((c) => c.seed)).toEqual([base, base + 2, base + 1, base + 3])
      expect(yield* StateStore.load("fix-1")).toMatchObject({ history: ["from an earlier run"] })
    }).pipe(Effect.provide(testLayers(() => answer("again")))))
})

/** A state store in memory that remembers which keys were written, to see what a run touched. */
const recordingStates = (written: Array<string>) =>
  Layer.effect(
    StateStore.StateStore,
    Effect.map(StateStore.makeMemory(), (store): StateStore.Service => ({
      ...store,
      save: (key, state) => Effect.andThen(Effect.sync(() => written.push(key)), store.save(key, state)),
      modify: (key, f) => Effect.andThen(Effect.sync(() => written.push(key)), store.modify(key, f)),
      update: (key, u) => Effect.andThen(Effect.sync(() => written.push(key)), store.update(key, u))
    }))
  )

describe("ActorLoop group state and workspaces (review of issue 31)", () => {
  it.effect("a group keeps its rollouts' state apart from every task's: task a.0's state survives a group of task a", () => {
    const written: Array<string> = []
    return Effect.gen(function*() {
      yield* StateStore.save("a.0", { ...StateStore.empty, history: ["a.0's own"] })
      written.length = 0
      const episodes = yield* ActorLoop.group(task({ taskId: "a" }), { n: 2, maxSteps: 2 })
      expect(episodes).toHaveLength(2)
      expect(yield* StateStore.load("a.0")).toMatchObject({ history: ["a.0's own"] })
      // Nothing of the rollouts is left in the store in context: their state lived and died with them.
      expect(written).toEqual([])
      for (const episode of episodes) expect(episode.records[1]!.prompt).toContain("again")
    }).pipe(Effect.provide(Layer.mergeAll(
      ScriptedModel.layer(() => answer("again")),
      Sandbox.layerTest(() => ({ stdout: "" })),
      recordingStates(written),
      TrajectoryStore.layerMemory
    )))
  })

  it.effect("a group of a task whose id has the longest allowed length runs its actions (the rollout's key stays a safe name)", () =>
    Effect.gen(function*() {
      const longId = "t".repeat(128)
      const episodes = yield* ActorLoop.group(task({ taskId: longId }), { n: 2 })
      for (const episode of episodes) {
        expect(episode.records[0]!.metrics.sandboxError).toBeUndefined()
        expect(episode.records[0]!.sandboxResult?.exitCode).toBe(0)
        expect(episode.records[0]!.taskId).toBe(longId)
      }
    }).pipe(Effect.provide(testLayers(() => answer("long")))))

  it.effect("an episode's steps share one workspace, closed when the episode ends", () => {
    const seen: Array<Sandbox.Workspace> = []
    return Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 3 })
      expect(episode.records).toHaveLength(3)
      expect(seen).toHaveLength(3)
      expect(new Set(seen.map((ws) => ws.path)).size).toBe(1)
      expect(seen[0]!.kept).toBe(false)
      const after = yield* Effect.flip(Sandbox.run(seen[0]!, { command: ["python3", "-V"] }))
      expect(after.reason).toBe("workspace_closed")
    }).pipe(Effect.provide(seeingWorkspaces(seen)))
  })

  it.effect("a group's rollouts have a workspace each, never kept (keepWorkspaces aside), removed after their episode", () => {
    const seen: Array<Sandbox.Workspace> = []
    return Effect.gen(function*() {
      yield* ActorLoop.group(task(), { n: 2, maxSteps: 2, keepWorkspaces: true })
      expect(seen).toHaveLength(4)
      expect(seen.every((ws) => !ws.kept)).toBe(true)
      expect(new Set(seen.map((ws) => ws.path)).size).toBe(2)
      for (const ws of seen) {
        expect((yield* Effect.flip(Sandbox.run(ws, { command: ["python3", "-V"] }))).reason).toBe("workspace_closed")
      }
    }).pipe(Effect.provide(seeingWorkspaces(seen)))
  })

  it.effect("group 1 is a group of one: a group id, a fresh state, the task's state untouched", () =>
    Effect.gen(function*() {
      yield* StateStore.save("fix-1", { ...StateStore.empty, history: ["from an earlier run"] })
      const outcomes = Array.from(yield* Stream.runCollect(ActorLoop.run(Stream.make(task()), { group: 1, maxSteps: 2 })))
      expect(outcomes).toHaveLength(1)
      const outcome = outcomes[0]!
      if (outcome._tag !== "Recorded") return expect.fail(`expected a recorded outcome, got ${outcome._tag}`)
      expect(outcome.record.groupId).toMatch(/^[0-9a-f-]{36}$/)
      expect(outcome.episode!.records[0]!.prompt).not.toContain("earlier run")
      expect(yield* StateStore.load("fix-1")).toEqual({ ...StateStore.empty, history: ["from an earlier run"] })
    }).pipe(Effect.provide(testLayers(() => answer("again")))))
})

describe("ActorLoop seeds and observations (review of issue 31)", () => {
  it.effect("each step of an episode has its own seed and sees what the previous step's command did", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task({ seed: 7 }), { maxSteps: 3 })
      const calls = yield* ScriptedModel.calls
      expect(calls.map((c) => c.seed)).toEqual([7, 8, 9])
      expect(episode.records.map((r) => r.seed)).toEqual([7, 8, 9])
      expect(episode.records[0]!.prompt).toBe("Make add() correct.")
      expect(episode.records[1]!.prompt).toBe(
        "Make add() correct.\n\n<observation>\nexit_code: 1\nstdout:\n1 failed\nstderr:\nE assert\n</observation>"
      )
      // Same reply, no state update: only the seed and the observation tell the steps apart.
      expect(new Set(calls.map((c) => c.prompt)).size).toBe(2)
    }).pipe(Effect.provide(Layer.mergeAll(
      ScriptedModel.layer(() => `<think>t</think><action>{"command": ["python3", "-V"]}</action>`),
      Sandbox.layerTest(() => ({ exitCode: 1, stdout: "1 failed", stderr: "E assert" })),
      StateStore.layerMemory(),
      TrajectoryStore.layerMemory
    ))))

  it.effect("an observation cuts long output and says when no command ran", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 3 })
      const second = episode.records[1]!.prompt
      expect(second).toContain("stdout:\n" + "x".repeat(2000) + "\n[truncated: 500 more characters]")
      expect(episode.records[2]!.prompt).toContain("<observation>\nno command ran (parse_error: invalid_action_json)\n</observation>")
    }).pipe(Effect.provide(Layer.mergeAll(
      ScriptedModel.layer([answer("one"), "<action>{not json</action>", answer("three")]),
      Sandbox.layerTest(() => ({ stdout: "x".repeat(2500) })),
      StateStore.layerMemory(),
      TrajectoryStore.layerMemory
    ))))

  it.effect("a seed whose steps would pass Number.MAX_SAFE_INTEGER fails with InvalidOptions naming seed before any call", () =>
    Effect.gen(function*() {
      const big = Number.MAX_SAFE_INTEGER
      const grouped = yield* Effect.flip(ActorLoop.group(task({ seed: big }), { n: 2 }))
      expect(grouped._tag).toBe("InvalidOptions")
      expect(grouped.message).toContain("seed must be at most")
      expect(grouped.message).toContain(`got ${big}`)
      const lone = yield* Effect.flip(ActorLoop.episode(task({ seed: big - 1 }), { maxSteps: 3 }))
      expect(lone._tag).toBe("InvalidOptions")
      expect(lone.message).toContain("seed")
      expect(yield* ScriptedModel.calls).toHaveLength(0)
      // In a run the task is a failed outcome per episode of its group (outcomes count episodes), the others go on.
      const outcomes = Array.from(
        yield* Stream.runCollect(ActorLoop.run(Stream.make(task({ seed: big }), task({ taskId: "ok", seed: 1 })), { group: 2 }))
      )
      expect(outcomes.map((o) => [o.task.taskId, o._tag])).toEqual([["fix-1", "Failed"], ["fix-1", "Failed"], ["ok", "Recorded"], ["ok", "Recorded"]])
      // The largest seed that fits is taken.
      const fits = yield* ActorLoop.group(task({ seed: big - 3 }), { n: 2, maxSteps: 2 })
      expect(fits.flatMap((e) => e.records.map((r) => r.seed))).toEqual([big - 3, big - 1, big - 2, big])
    }).pipe(Effect.provide(testLayers(() => answer("x")))))
})

describe("ActorLoop <done/> (review of issue 31)", () => {
  const cases: ReadonlyArray<readonly [string, string, number]> = [
    ["an empty <done/> after the blocks ends it", answer("a") + "<done/>", 1],
    ["<done></done> ends it", answer("a") + "<done></done>", 1],
    ["<done /> ends it", answer("a") + "<done />", 1],
    ["<done/> inside an unclosed <think> does not", "<think>maybe I am <done/> soon", 2],
    ["<done/> inside the action's JSON does not", `<think>t</think><action>{"command": ["python3", "-c", "print('<done/>')"]}</action>`, 2],
    ["<done/> inside state_update does not", `<think>t</think><state_update>{"history": ["<done/> next"]}</state_update>`, 2],
    ["<done>false</done> does not", answer("a") + "<done>false</done>", 2],
    ["a bare <done> does not", answer("a") + "<done>", 2]
  ]
  for (const [name, first, steps] of cases) {
    it.effect(name, () =>
      Effect.gen(function*() {
        const episode = yield* ActorLoop.episode(task(), { maxSteps: 2 })
        expect(episode.records).toHaveLength(steps)
        expect(episode.end).toBe(steps === 1 ? "done" : "max_steps")
      }).pipe(Effect.provide(testLayers([first, answer("b")].slice(0, steps)))))
  }
})

describe("ActorLoop rewards and failures in episodes (review of issue 31)", () => {
  it.effect("a failed reward never ends an episode by threshold, even at rewardThreshold 0", () =>
    Effect.gen(function*() {
      const episode = yield* ActorLoop.episode(task(), { maxSteps: 2, rewardThreshold: 0 })
      expect(episode.end).toBe("max_steps")
      expect(episode.records).toHaveLength(2)
      expect(episode.records[0]!.rewardParts?.[0]?.error).toBeDefined()
    }).pipe(Effect.provide(Layer.merge(
      testLayers(() => answer("a")),
      Reward.layer(Reward.make("broken", () => Effect.fail(new Reward.RewardFailed({ reward: "broken", reason: "defect", message: "no" }))))
    ))))

  it.effect("a failed episode's outcome names its episode and group, as its written lines do", () =>
    Effect.gen(function*() {
      const outcomes = Array.from(yield* Stream.runCollect(ActorLoop.run(Stream.make(task()), { group: 1, maxSteps: 3 })))
      const failed = outcomes[0]!
      if (failed._tag !== "Failed") return expect.fail("expected a failed outcome")
      const lines = yield* stored("fix-1")
      expect(lines).toHaveLength(1)
      expect(lines[0]!.episodeEnd).toBeUndefined()
      expect(failed.episodeId).toBe(lines[0]!.episodeId)
      expect(failed.groupId).toBe(lines[0]!.groupId)
      expect(failed.groupId).toMatch(/^[0-9a-f-]{36}$/)
    }).pipe(Effect.provide(testLayers([answer("only one")]))))
})
