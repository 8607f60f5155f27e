/**
 * `--shard i/n`: the part of a tasks file one process runs, so that one file can be spread over processes (`valet
 * rollout --processes n` starts n of them) or machines. A task belongs to shard `hash(task_id) mod n`: by its id, not
 * its line, so that every line of one task id lands in the same process (a task's trajectory file and state have one
 * writer), and a task keeps its shard when lines are added or removed around it. Seeds are a task's own (its `seed`
 * and its group member), so a sharded run writes what one process would.
 */
import { Option } from "effect"

/** Shard `index` of `count` (0 ≤ index < count). */
export interface Shard {
  readonly index: number
  readonly count: number
}

/** The most shards a file is split into: more processes than that would not fit on one machine's cores anyway. */
export const maxShards = 1024

/** `"2/8"` → `{ index: 2, count: 8 }`; `None` when it is not `i/n` with 0 ≤ i < n ≤ 1024. */
export const parseShard = (text: string): Option.Option<Shard> => {
  const match = /^(\d{1,4})\/(\d{1,4})$/.exec(text.trim())
  if (match === null) return Option.none()
  const index = Number(match[1])
  const count = Number(match[2])
  return count >= 1 && count <= maxShards && index < count ? Option.some({ index, count }) : Option.none()
}

/** Why a `--shard` value was refused. */
export const shardProblem = (text: string): string =>
  `--shard takes i/n with 0 <= i < n <= ${maxShards} (shard i of n, e.g. 0/4), got ${JSON.stringify(text)}`

/**
 * The shard of a task id among `count`: FNV-1a (32 bits) of its UTF-16 code units, mod `count`. Stable across
 * processes, machines and valet versions (the split is a contract: shards run apart must not overlap).
 */
export const shardOf = (taskId: string, count: number): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < taskId.length; i++) {
    hash ^= taskId.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash % count
}

/** Whether the task with this id is the shard's. */
export const inShard = (shard: Shard | undefined, taskId: string): boolean =>
  shard === undefined || shard.count === 1 || shardOf(taskId, shard.count) === shard.index
