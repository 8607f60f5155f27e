import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import { parquetReadObjects } from "hyparquet"
import { appendFileSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as Export from "../../src/rollouts/Export.js"

const dir = mkdtempSync(join(tmpdir(), "valet-export-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

type Fields = Partial<TrajectoryStore.NewRecord> & { readonly taskId: string; readonly raw: string }

const newRecord = ({ raw, ...fields }: Fields): TrajectoryStore.NewRecord => ({
  prompt: `Task ${fields.taskId}, state: (empty)`,
  stateBefore: StateStore.empty,
  stateAfter: StateStore.empty,
  modelOutput: { raw, think: null, action: null, stateUpdate: null, parseError: null },
  sandboxResult: null,
  reward: null,
  metrics: { actorLatencySec: 0.5, sandboxFailed: true },
  ...fields
})

/** Appends the records to a file store under `root` (the store numbers the steps), as the actor loop does. */
const store = (root: string, records: ReadonlyArray<Fields>) =>
  Effect.scoped(Effect.gen(function*() {
    const built: Array<TrajectoryStore.TrajectoryRecord> = []
    for (const fields of records) built.push(yield* TrajectoryStore.append(newRecord(fields)))
    return built
  }).pipe(Effect.provide(TrajectoryStore.layerFile({ root }).pipe(Layer.provide(NodeServices.layer)))))

/** The records appended to a memory store, read back as a stream in store order. */
const recorded = (records: ReadonlyArray<Fields>) =>
  Effect.gen(function*() {
    const built: Array<TrajectoryStore.TrajectoryRecord> = []
    for (const fields of records) built.push(yield* TrajectoryStore.append(newRecord(fields)))
    const tasks = [...new Set(built.map((record) => record.taskId))]
    const stream = Stream.fromIterable(tasks).pipe(Stream.flatMap((task) => TrajectoryStore.read(task)))
    return { built, stream: Stream.fromIterable(yield* Stream.runCollect(stream)) }
  }).pipe(Effect.provide(TrajectoryStore.layerMemory))

/** Exports and parses every JSONL line back with the format's schema. */
const roundTrip = <F extends Export.Format>(format: F, records: Stream.Stream<TrajectoryStore.TrajectoryRecord>, options?: Export.Options) =>
  Effect.gen(function*() {
    const items = yield* Stream.runCollect(Export.rows(format, options)(records))
    const lines = yield* Stream.runCollect(Export.jsonl(Export.rowsOf(Stream.fromIterable(items))))
    const decode = Schema.decodeUnknownSync(Schema.fromJsonString(Export.rowSchema[format] as unknown as Schema.Codec<Export.Row<F>>))
    return {
      rows: lines.map((line) => {
        expect(line.endsWith("\n")).toBe(true)
        return decode(line.slice(0, -1)) as Export.Row<F>
      }),
      skipped: items.filter((item) => item._tag === "Skipped")
    }
  })

/** The Parquet bytes of rows, read back with hyparquet (int64 columns come back as bigint: made numbers). */
const parquetRoundTrip = <F extends Export.Format>(format: F, rows: ReadonlyArray<Export.Row<F>>) =>
  Effect.gen(function*() {
    const chunks = yield* Stream.runCollect(Export.parquet(format)(Stream.fromIterable(rows)))
    const bytes = Buffer.concat(chunks.map((chunk) => Buffer.from(chunk)))
    const file = new Uint8Array(bytes).buffer
    const read = yield* Effect.promise(() => parquetReadObjects({ file }))
    return JSON.parse(JSON.stringify(read, (_, value) => (typeof value === "bigint" ? Number(value) : value))) as Array<unknown>
  })

describe("Export sft-chat", () => {
  it.effect("one row per step: the recorded prompt as the user turn, the model's raw answer as the assistant's", () =>
    Effect.gen(function*() {
      const { built, stream } = yield* recorded([
        { taskId: "a", raw: "<action>{\"command\": [\"ls\"]}</action>" },
        { taskId: "b", raw: "first" },
        { taskId: "b", raw: "second", prompt: "Task b, state: goals: ship" }
      ])
      const { rows, skipped } = yield* roundTrip("sft-chat", stream)
      expect(skipped).toEqual([])
      expect(rows).toEqual(built.map((record) => ({
        messages: [{ role: "user", content: record.prompt }, { role: "assistant", content: record.modelOutput.raw }]
      })))
      expect(yield* parquetRoundTrip("sft-chat", rows)).toEqual(rows)
    }))

  it.effect("--min-reward keeps the steps of episodes whose reward reaches it (an episode is kept or left whole)", () =>
    Effect.gen(function*() {
      const { stream } = yield* recorded([
        { taskId: "m", raw: "e1 s1", episodeId: "e1", episodeStep: 1, reward: 0 },
        { taskId: "m", raw: "e1 s2", episodeId: "e1", episodeStep: 2, reward: 1, episodeEnd: "done", episodeReward: 1 },
        { taskId: "m", raw: "e2 s1", episodeId: "e2", episodeStep: 1, reward: 0, episodeEnd: "max_steps", episodeReward: 0 },
        { taskId: "m", raw: "lone, rewarded", reward: 0.7 },
        { taskId: "m", raw: "lone, no reward" }
      ])
      const { rows, skipped } = yield* roundTrip("sft-chat", stream, { minReward: 0.5 })
      expect(rows.map((row) => row.messages[1]!.content)).toEqual(["e1 s1", "e1 s2", "lone, rewarded"])
      expect(skipped).toEqual([{ _tag: "Skipped", reason: "below_min_reward", taskId: "m", records: 2 }])
    }))
})

describe("Export system", () => {
  it.effect("a system message given to the export goes first in sft-chat messages and grpo prompts (records do not keep it)", () =>
    Effect.gen(function*() {
      const { built, stream } = yield* recorded([
        { taskId: "s", raw: "answer", episodeId: "e", episodeStep: 1, groupId: "G", reward: 1, episodeEnd: "done", episodeReward: 1 }
      ])
      const records = Stream.fromIterable(yield* Stream.runCollect(stream))
      const system = { role: "system", content: "You are terse." } as const
      const user = { role: "user", content: built[0]!.prompt } as const
      const sft = yield* roundTrip("sft-chat", records, { system: system.content })
      expect(sft.rows).toEqual([{ messages: [system, user, { role: "assistant", content: "answer" }] }])
      const grpo = yield* roundTrip("grpo", records, { system: system.content })
      expect(grpo.rows.map((row) => row.prompt)).toEqual([[system, user]])
      expect(yield* parquetRoundTrip("sft-chat", sft.rows)).toEqual(sft.rows)
    }))
})

describe("Export grpo", () => {
  const group = [
    // Two rollouts of task g in group G1 (interleaved, as concurrent rollouts append), one interrupted.
    { taskId: "g", raw: "r1 s1", episodeId: "r1", episodeStep: 1, groupId: "G1", seed: 11, reward: 0 },
    { taskId: "g", raw: "r2 s1", episodeId: "r2", episodeStep: 1, groupId: "G1", seed: 12, reward: 0, episodeEnd: "done", episodeReward: 0 },
    { taskId: "g", raw: "r3 s1", episodeId: "r3", episodeStep: 1, groupId: "G1", seed: 13, reward: 0 },
    { taskId: "g", raw: "r1 s2", episodeId: "r1", episodeStep: 2, groupId: "G1", seed: 11, reward: 1, episodeEnd: "done", episodeReward: 1 },
    { taskId: "g", raw: "r4 s1", episodeId: "r4", episodeStep: 1, groupId: "G1", seed: 14, reward: 0.5, episodeEnd: "max_steps", episodeReward: 0.5 },
    // A second group of the same task.
    { taskId: "g", raw: "q1 s1", episodeId: "q1", episodeStep: 1, groupId: "G2", seed: 21, reward: 1, episodeEnd: "done", episodeReward: 1 },
    // A step of no group (a plain actor-loop run).
    { taskId: "g", raw: "plain" }
  ] satisfies ReadonlyArray<Fields>

  it.effect("complete episodes of a group together, steps in order, the episode's reward and GRPO's advantage", () =>
    Effect.gen(function*() {
      const { built, stream } = yield* recorded(group)
      const { rows, skipped } = yield* roundTrip("grpo", stream)
      expect(rows.map((row) => [row.group_id, row.extra_info.episode_id, row.extra_info.episode_step, row.completion[0]!.content])).toEqual([
        ["G1", "r1", 1, "r1 s1"],
        ["G1", "r1", 2, "r1 s2"],
        ["G1", "r2", 1, "r2 s1"],
        ["G1", "r4", 1, "r4 s1"],
        ["G2", "q1", 1, "q1 s1"]
      ])
      // Rewards 1, 0, 0.5: mean 0.5, sample std 0.5 → advantages ±0.5/0.5001 and 0.
      const g1 = rows.filter((row) => row.group_id === "G1")
      expect(g1.map((row) => row.reward)).toEqual([1, 1, 0, 0.5])
      expect(g1.map((row) => row.advantage)).toEqual([0.5 / 0.5001, 0.5 / 0.5001, -0.5 / 0.5001, 0])
      expect(g1.every((row) => row.group_size === 3 && row.uid === "G1")).toBe(true)
      expect(rows.at(-1)).toMatchObject({ group_size: 1, advantage: 0, reward: 1 })
      const first = built[0]!
      expect(rows[0]).toEqual({
        prompt: [{ role: "user", content: first.prompt }],
        completion: [{ role: "assistant", content: "r1 s1" }],
        reward: 1,
        advantage: 0.5 / 0.5001,
        group_id: "G1",
        uid: "G1",
        group_size: 3,
        data_source: "valet",
        reward_model: { style: "valet", ground_truth: null },
        extra_info: {
          index: 0,
          task_id: "g",
          step: first.step,
          episode_id: "r1",
          episode_step: 1,
          episode_end: "done",
          seed: 11,
          step_reward: 0
        }
      })
      expect(rows.map((row) => row.extra_info.index)).toEqual([0, 1, 2, 3, 4])
      expect(skipped).toEqual([
        { _tag: "Skipped", reason: "no_group", taskId: "g", records: 1 },
        { _tag: "Skipped", reason: "interrupted_episode", taskId: "g", records: 1, episodes: 1 }
      ])
      expect(yield* parquetRoundTrip("grpo", rows)).toEqual(rows)
    }))
})

describe("Export: a reward that failed", () => {
  // A reward part that failed (its command could not run): the stored sum counts it 0, which is not a real 0.
  const failedParts = [
    { name: "tests", value: null, weight: 1, error: { reason: "sandbox_error", message: "no such command" } }
  ] satisfies TrajectoryStore.NewRecord["rewardParts"]
  const okParts = (value: number) => [{ name: "tests", value, weight: 1 }]
  const episodes: ReadonlyArray<Fields> = [
    { taskId: "f", raw: "a1", groupId: "G", episodeId: "a", episodeStep: 1, reward: 1, rewardParts: okParts(1), episodeEnd: "done", episodeReward: 1 },
    { taskId: "f", raw: "b1", groupId: "G", episodeId: "b", episodeStep: 1, reward: 0, rewardParts: okParts(0), episodeEnd: "done", episodeReward: 0 },
    // Episode c: its first step's reward failed, and the episode's reward (summed) counted it: the last line says so.
    { taskId: "f", raw: "c1", groupId: "G", episodeId: "c", episodeStep: 1, reward: 0, rewardParts: failedParts },
    {
      taskId: "f",
      raw: "c2",
      groupId: "G",
      episodeId: "c",
      episodeStep: 2,
      reward: 1,
      rewardParts: okParts(1),
      episodeEnd: "done",
      episodeReward: 1,
      episodeRewardFailed: true,
      tokens: TrajectoryStore.encodeTokens({ promptIds: [1], completionIds: [2] })!
    },
    { taskId: "f", raw: "lone", reward: 0, rewardParts: failedParts, tokens: TrajectoryStore.encodeTokens({ promptIds: [3], completionIds: [4] })! }
  ]

  it.effect("grpo leaves the episode out, and out of its group's advantage; the skip names the episodes", () =>
    Effect.gen(function*() {
      const { stream } = yield* recorded(episodes)
      const { rows, skipped } = yield* roundTrip("grpo", stream)
      expect(rows.map((row) => [row.extra_info.episode_id, row.reward, row.advantage, row.group_size])).toEqual([
        // Rewards 1 and 0 (c's is unknown): mean 0.5, sample std 0.7071…
        ["a", 1, 0.5 / (Math.SQRT1_2 + 1e-4), 2],
        ["b", 0, -0.5 / (Math.SQRT1_2 + 1e-4), 2]
      ])
      expect(skipped).toEqual([
        { _tag: "Skipped", reason: "no_group", taskId: "f", records: 1 },
        { _tag: "Skipped", reason: "reward_failed", taskId: "f", records: 2, episodes: 1 }
      ])
    }))

  it.effect("an episode whose failed step its reward did not count (the last aggregate: no flag) is kept whole", () =>
    Effect.gen(function*() {
      const { stream } = yield* recorded([
        { taskId: "l", raw: "d1", groupId: "H", episodeId: "d", episodeStep: 1, reward: 0, rewardParts: failedParts },
        { taskId: "l", raw: "d2", groupId: "H", episodeId: "d", episodeStep: 2, reward: 1, rewardParts: okParts(1), episodeEnd: "done", episodeReward: 1 }
      ])
      const { rows, skipped } = yield* roundTrip("grpo", stream)
      expect(rows.map((row) => [row.extra_info.episode_id, row.reward, row.extra_info.step_reward])).toEqual([["d", 1, 0], ["d", 1, 1]])
      expect(skipped).toEqual([])
      expect((yield* roundTrip("sft-chat", stream, { minReward: 1 })).rows).toHaveLength(2)
    }))

  it.effect("sft-chat and tokens: kept without --min-reward (tokens with the reward unknown: null); left out with it", () =>
    Effect.gen(function*() {
      const { stream } = yield* recorded(episodes)
      const all = yield* roundTrip("sft-chat", stream)
      expect(all.rows.map((row) => row.messages[1]!.content)).toEqual(["a1", "b1", "c1", "c2", "lone"])
      expect(all.skipped).toEqual([])
      const ranked = yield* roundTrip("sft-chat", stream, { minReward: 1 })
      expect(ranked.rows.map((row) => row.messages[1]!.content)).toEqual(["a1"])
      expect(ranked.skipped).toEqual([
        { _tag: "Skipped", reason: "below_min_reward", taskId: "f", records: 1 },
        { _tag: "Skipped", reason: "reward_failed", taskId: "f", records: 3 }
      ])
      const tokens = yield* roundTrip("tokens", stream)
      expect(tokens.rows.map((row) => [row.episode_id, row.reward, row.episode_reward])).toEqual([["c", 1, null], [null, null, null]])
      const tokensRanked = yield* roundTrip("tokens", stream, { minReward: 0 })
      expect(tokensRanked.rows).toEqual([])
      expect(tokensRanked.skipped).toContainEqual({ _tag: "Skipped", reason: "reward_failed", taskId: "f", records: 3 })
    }))
})

describe("Export tokens", () => {
  const promptLogprobs = [null, -0.25, -1.5]
  const records = [
    {
      taskId: "t",
      raw: "with logprobs",
      reward: 1,
      tokens: TrajectoryStore.encodeTokens({
        promptIds: [1, 2, 3],
        completionIds: [7, 8],
        completionLogprobs: [-0.125, -2],
        promptLogprobs
      })!
    },
    // A server that sent ids but no log-probabilities.
    { taskId: "t", raw: "ids only", tokens: TrajectoryStore.encodeTokens({ promptIds: [4], completionIds: [9, 10, 11] })! },
    { taskId: "t", raw: "no token data" },
    { taskId: "t", raw: "completion only", tokens: TrajectoryStore.encodeTokens({ completionIds: [5] })! }
  ] satisfies ReadonlyArray<Fields>

  it.effect("ids, log-probabilities (null where none were sent, not zeros) and the masks; steps without ids are counted", () =>
    Effect.gen(function*() {
      const { stream } = yield* recorded(records)
      const { rows, skipped } = yield* roundTrip("tokens", stream)
      expect(rows).toEqual([
        {
          task_id: "t",
          step: 1,
          episode_id: null,
          episode_step: null,
          group_id: null,
          reward: 1,
          episode_reward: null,
          prompt_ids: [1, 2, 3],
          completion_ids: [7, 8],
          completion_logprobs: [-0.125, -2],
          prompt_logprobs: promptLogprobs,
          input_ids: [1, 2, 3, 7, 8],
          attention_mask: [1, 1, 1, 1, 1],
          loss_mask: [0, 0, 0, 1, 1]
        },
        {
          task_id: "t",
          step: 2,
          episode_id: null,
          episode_step: null,
          group_id: null,
          reward: null,
          episode_reward: null,
          prompt_ids: [4],
          completion_ids: [9, 10, 11],
          completion_logprobs: null,
          prompt_logprobs: null,
          input_ids: [4, 9, 10, 11],
          attention_mask: [1, 1, 1, 1],
          loss_mask: [0, 1, 1, 1]
        }
      ])
      expect(skipped).toEqual([
        { _tag: "Skipped", reason: "no_token_data", taskId: "t", records: 1 },
        { _tag: "Skipped", reason: "partial_token_data", taskId: "t", records: 1 }
      ])
      expect(yield* parquetRoundTrip("tokens", rows)).toEqual(rows)
    }))
})

describe("Export.fromStore", () => {
  it.effect("reads the file store task by task; a corrupt line is skipped with its number and the export goes on", () =>
    Effect.gen(function*() {
      const root = join(dir, "corrupt")
      yield* store(root, [{ taskId: "a", raw: "a1" }, { taskId: "a", raw: "a2" }, { taskId: "b", raw: "b1" }])
      // A line that is not JSON, one that is not a record, then a record after them.
      appendFileSync(join(root, "raw", "a.jsonl"), "{\"task_id\": \"a\", \"step\n{\"task_id\": \"a\"}\n")
      yield* store(root, [{ taskId: "a", raw: "a3" }])
      const items = yield* Stream.runCollect(Export.fromStore("sft-chat", { root }))
      const path = join(root, "raw", "a.jsonl")
      expect(items.map((item) => item._tag === "Row" ? item.row.messages[1]!.content : `${item.reason} ${item.path}:${item.line}`)).toEqual([
        `corrupt_line ${path}:3`,
        `corrupt_line ${path}:4`,
        "a1",
        "a2",
        "a3",
        "b1"
      ])
      const corrupt = items.filter((item) => item._tag === "Skipped")
      expect(corrupt[0]).toMatchObject({ message: expect.stringMatching(/^not JSON \(/) })
      expect(corrupt[1]).toMatchObject({ message: expect.stringMatching(/^not a trajectory record: /) })

      const only = yield* Stream.runCollect(Export.rowsOf(Export.fromStore("sft-chat", { root, tasks: ["b"] })))
      expect(only.map((row) => row.messages[1]!.content)).toEqual(["b1"])
      const missing = yield* Effect.flip(Stream.runCollect(Export.fromStore("grpo", { root: join(dir, "nowhere") })))
      expect(missing.message).toBe(
        `no trajectories at ${join(dir, "nowhere")}: ${join(dir, "nowhere", "raw")} does not exist (records are ${join(dir, "nowhere", "raw")}/<task_id>.jsonl)`
      )
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("Parquet of no rows is a valid empty file", () =>
    Effect.gen(function*() {
      expect(yield* parquetRoundTrip("grpo", [])).toEqual([])
    }))
})
