/**
 * The rows of each export format, built from one task's records (a task's file holds every episode and group of
 * it, so grouping never needs more than one task in memory).
 */
import type * as TrajectoryStore from "../../../environment/TrajectoryStore.js"
import { decodeTokens } from "../../../environment/TrajectoryStore.js"
import * as EpisodeInternal from "../episode.js"

type Record_ = TrajectoryStore.TrajectoryRecord

/** A chat message of an exported row. */
export interface Message {
  readonly role: "system" | "user" | "assistant"
  readonly content: string
}

/** `sft-chat`: one step as a user turn (the prompt, which carries the task's state) and the model's answer. */
export interface SftChatRow {
  readonly messages: ReadonlyArray<Message>
}

/** `grpo`: one step of a complete episode of a group, with the episode's reward and its group-relative advantage. */
export interface GrpoRow {
  readonly prompt: ReadonlyArray<Message>
  readonly completion: ReadonlyArray<Message>
  readonly reward: number | null
  readonly advantage: number | null
  readonly group_id: string
  readonly uid: string
  readonly group_size: number
  readonly data_source: string
  readonly reward_model: { readonly style: string; readonly ground_truth: string | null }
  readonly extra_info: {
    readonly index: number
    readonly task_id: string
    readonly step: number
    readonly episode_id: string
    readonly episode_step: number
    readonly episode_end: string
    readonly seed: number | null
    readonly step_reward: number | null
  }
}

/** `tokens`: one step's token ids, log-probabilities and masks. */
export interface TokensRow {
  readonly task_id: string
  readonly step: number
  readonly episode_id: string | null
  readonly episode_step: number | null
  readonly group_id: string | null
  readonly reward: number | null
  readonly episode_reward: number | null
  readonly prompt_ids: ReadonlyArray<number>
  readonly completion_ids: ReadonlyArray<number>
  readonly completion_logprobs: ReadonlyArray<number | null> | null
  readonly prompt_logprobs: ReadonlyArray<number | null> | null
  readonly input_ids: ReadonlyArray<number>
  readonly attention_mask: ReadonlyArray<number>
  readonly loss_mask: ReadonlyArray<number>
}

/** Why records were left out of an export. */
export type SkipReason =
  | "corrupt_line"
  | "no_token_data"
  | "partial_token_data"
  | "interrupted_episode"
  | "no_group"
  | "below_min_reward"
  | "reward_failed"

/** What an export emits: a row, or records left out (counted, with why). */
export type Item<Row> =
  | { readonly _tag: "Row"; readonly row: Row }
  | {
    readonly _tag: "Skipped"
    readonly reason: SkipReason
    readonly taskId: string
    /** How many records (lines) were left out. */
    readonly records: number
    /** How many episodes, for reasons about episodes. */
    readonly episodes?: number | undefined
    /** For a corrupt line: where it is and what is wrong with it. */
    readonly path?: string | undefined
    readonly line?: number | undefined
    readonly message?: string | undefined
  }

export interface Options {
  /** Keep only steps whose reward (the episode's, for a step of an episode) is at least this. */
  readonly minReward?: number | undefined
  /** The system message the steps were run with (`ActorLoop`'s `system`; records do not keep it), put first. */
  readonly system?: string | undefined
}

/** The running row number across the whole export (verl's `extra_info.index`). */
export interface Counter {
  next: number
}

/** An episode of a task: its records in order and the record that ended it, if one did. */
interface Episode {
  readonly id: string
  readonly records: Array<Record_>
  end: Record_ | undefined
}

/** The key of a record's episode: its `episode_id`, or the record itself when it is a lone step (no episode fields). */
const episodeKey = (record: Record_): string => record.episodeId ?? `${record.taskId}#${record.step}`

const episodesOf = (records: ReadonlyArray<Record_>): Map<string, Episode> => {
  const episodes = new Map<string, Episode>()
  for (const record of records) {
    const key = episodeKey(record)
    let episode = episodes.get(key)
    if (episode === undefined) {
      episode = { id: key, records: [], end: undefined }
      episodes.set(key, episode)
    }
    episode.records.push(record)
    if (record.episodeEnd !== undefined) episode.end = record
  }
  for (const episode of episodes.values()) {
    episode.records.sort((a, b) => (a.episodeStep ?? a.step) - (b.episodeStep ?? b.step))
  }
  return episodes
}

/**
 * The reward a trainer ranks a step by: its episode's reward when it belongs to an episode (undefined while the
 * episode has not ended), else the step's own.
 */
const rankingReward = (record: Record_, episodes: Map<string, Episode>): number | null | undefined => {
  if (record.episodeId === undefined) return record.reward
  const end = episodes.get(record.episodeId)?.end
  return end === undefined ? undefined : end.episodeReward ?? null
}

/** Whether a part of the step's own reward failed (its command could not run, the judge did not answer…). */
const failedReward = (record: Record_): boolean => EpisodeInternal.rewardFailed(record.rewardParts)

/** Whether an ended episode's reward counted a step reward a part of which failed (its last record says so). */
const episodeRewardFailed = (episode: Episode): boolean => episode.end !== undefined && EpisodeInternal.rewardUnknown(episode.end)

/**
 * Whether the reward a trainer ranks `record` by is unknown because a part of it failed: the step's own, or for a
 * step of an episode the episode's (a failed part counts 0 in the stored rewards, so a broken check would read as a
 * real 0).
 */
const rankingRewardFailed = (record: Record_, episodes: Map<string, Episode>): boolean => {
  if (record.episodeId === undefined) return EpisodeInternal.rewardUnknown(record)
  const episode = episodes.get(record.episodeId)
  return episode !== undefined && episodeRewardFailed(episode)
}

const passes = (reward: number | null | undefined, options: Options): boolean =>
  options.minReward === undefined || (typeof reward === "number" && reward >= options.minReward)

const skipped = (reason: SkipReason, taskId: string, records: number, episodes?: number): Item<never> => ({
  _tag: "Skipped",
  reason,
  taskId,
  records,
  ...(episodes !== undefined ? { episodes } : {})
})

/** A step as chat: the prompt (after the system message, when given) and the model's raw answer. */
const chat = (record: Record_, options: Options): { readonly prompt: Array<Message>; readonly assistant: Message } => ({
  prompt: [
    ...(options.system !== undefined ? [{ role: "system" as const, content: options.system }] : []),
    { role: "user", content: record.prompt }
  ],
  assistant: { role: "assistant", content: record.modelOutput.raw }
})

/** `sft-chat` rows of one task's records, in order. */
export const sftChat = (records: ReadonlyArray<Record_>, options: Options): Array<Item<SftChatRow>> => {
  const episodes = episodesOf(records)
  const out: Array<Item<SftChatRow>> = []
  let below = 0
  let failed = 0
  for (const record of records) {
    // Ranked by a reward a part of which failed: not known to reach `minReward` (without it, the reward is not used).
    if (options.minReward !== undefined && rankingRewardFailed(record, episodes)) {
      failed++
      continue
    }
    if (!passes(rankingReward(record, episodes), options)) {
      below++
      continue
    }
    const { assistant, prompt } = chat(record, options)
    out.push({ _tag: "Row", row: { messages: [...prompt, assistant] } })
  }
  if (below > 0) out.push(skipped("below_min_reward", records[0]!.taskId, below))
  if (failed > 0) out.push(skipped("reward_failed", records[0]!.taskId, failed))
  return out
}

const orNull = (values: Float32Array | undefined): Array<number | null> | null =>
  values === undefined ? null : Array.from(values, (value) => (Number.isNaN(value) ? null : value))

/** `tokens` rows of one task's records, in order; records without prompt and completion ids are counted, not made up. */
export const tokens = (records: ReadonlyArray<Record_>, options: Options): Array<Item<TokensRow>> => {
  const episodes = episodesOf(records)
  const out: Array<Item<TokensRow>> = []
  let below = 0
  let none = 0
  let partial = 0
  let failed = 0
  for (const record of records) {
    const reward = rankingReward(record, episodes)
    if (options.minReward !== undefined && rankingRewardFailed(record, episodes)) {
      failed++
      continue
    }
    if (!passes(reward, options)) {
      below++
      continue
    }
    if (record.tokens === undefined) {
      none++
      continue
    }
    const arrays = decodeTokens(record.tokens)
    if (arrays.promptIds === undefined || arrays.completionIds === undefined) {
      partial++
      continue
    }
    const promptIds = Array.from(arrays.promptIds)
    const completionIds = Array.from(arrays.completionIds)
    const length = promptIds.length + completionIds.length
    const episodeEnd = record.episodeId === undefined ? undefined : episodes.get(record.episodeId)?.end
    out.push({
      _tag: "Row",
      row: {
        task_id: record.taskId,
        step: record.step,
        episode_id: record.episodeId ?? null,
        episode_step: record.episodeStep ?? null,
        group_id: record.groupId ?? null,
        // Unknown (null) when a part failed: the stored sum counts a failed part 0, which is not the step's worth.
        reward: failedReward(record) ? null : record.reward,
        episode_reward: episodeEnd === undefined || rankingRewardFailed(record, episodes) ? null : episodeEnd.episodeReward ?? null,
        prompt_ids: promptIds,
        completion_ids: completionIds,
        completion_logprobs: orNull(arrays.completionLogprobs),
        prompt_logprobs: orNull(arrays.promptLogprobs),
        input_ids: [...promptIds, ...completionIds],
        attention_mask: new Array<number>(length).fill(1),
        loss_mask: [...new Array<number>(promptIds.length).fill(0), ...new Array<number>(completionIds.length).fill(1)]
      }
    })
  }
  const taskId = records[0]!.taskId
  if (below > 0) out.push(skipped("below_min_reward", taskId, below))
  if (none > 0) out.push(skipped("no_token_data", taskId, none))
  if (partial > 0) out.push(skipped("partial_token_data", taskId, partial))
  if (failed > 0) out.push(skipped("reward_failed", taskId, failed))
  return out
}

/**
 * GRPO's group-relative advantage, as TRL's `GRPOTrainer` computes it: `(r - mean) / (std + 1e-4)` over the
 * group's rewards, `std` with Bessel's correction (torch's default); 0 in a group of one. Null where the reward is.
 */
export const advantages = (rewards: ReadonlyArray<number | null>): Array<number | null> => {
  const known = rewards.filter((reward): reward is number => reward !== null)
  const mean = known.reduce((sum, reward) => sum + reward, 0) / Math.max(known.length, 1)
  const variance = known.length < 2 ? 0 : known.reduce((sum, reward) => sum + (reward - mean) ** 2, 0) / (known.length - 1)
  const std = Math.sqrt(variance)
  return rewards.map((reward) => (reward === null ? null : (reward - mean) / (std + 1e-4)))
}

/** `grpo` rows of one task's records: the complete episodes of each group, a group's rows together. */
export const grpo = (records: ReadonlyArray<Record_>, options: Options, counter: Counter): Array<Item<GrpoRow>> => {
  const taskId = records[0]!.taskId
  const out: Array<Item<GrpoRow>> = []
  const ungrouped = records.filter((record) => record.groupId === undefined).length
  const groups = new Map<string, Array<Record_>>()
  for (const record of records) {
    if (record.groupId === undefined) continue
    const group = groups.get(record.groupId) ?? []
    group.push(record)
    groups.set(record.groupId, group)
  }
  let interruptedEpisodes = 0
  let interruptedRecords = 0
  let failedEpisodes = 0
  let failedRecords = 0
  let below = 0
  for (const [groupId, groupRecords] of groups) {
    const episodes = [...episodesOf(groupRecords).values()]
    // A complete episode whose reward had a part fail is left out, and out of its group's advantage: its reward (a
    // failed part counting 0) is not what the episode was worth, and as a 0 it would move every member's advantage.
    const complete = episodes.filter((episode) => episode.end !== undefined && !episodeRewardFailed(episode))
    for (const episode of episodes) {
      if (episode.end === undefined) {
        interruptedEpisodes++
        interruptedRecords += episode.records.length
      } else if (episodeRewardFailed(episode)) {
        failedEpisodes++
        failedRecords += episode.records.length
      }
    }
    // Over the whole group, before any --min-reward: a kept row's advantage is the one its group gave it.
    const rewards = complete.map((episode) => episode.end!.episodeReward ?? null)
    const advantage = advantages(rewards)
    complete.forEach((episode, i) => {
      const reward = rewards[i]!
      if (!passes(reward, options)) {
        below += episode.records.length
        return
      }
      for (const record of episode.records) {
        const { assistant, prompt } = chat(record, options)
        out.push({
          _tag: "Row",
          row: {
            prompt,
            completion: [assistant],
            reward,
            advantage: advantage[i]!,
            group_id: groupId,
            uid: groupId,
            group_size: complete.length,
            data_source: "valet",
            reward_model: { style: "valet", ground_truth: null },
            extra_info: {
              index: counter.next++,
              task_id: record.taskId,
              step: record.step,
              episode_id: episode.id,
              episode_step: record.episodeStep ?? 1,
              episode_end: episode.end!.episodeEnd!,
              seed: record.seed ?? null,
              step_reward: record.reward
            }
          }
        })
      }
    })
  }
  if (ungrouped > 0) out.push(skipped("no_group", taskId, ungrouped))
  if (interruptedEpisodes > 0) out.push(skipped("interrupted_episode", taskId, interruptedRecords, interruptedEpisodes))
  if (failedEpisodes > 0) out.push(skipped("reward_failed", taskId, failedRecords, failedEpisodes))
  if (below > 0) out.push(skipped("below_min_reward", taskId, below))
  return out
}
