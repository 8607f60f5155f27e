/**
 * A trajectory record's JSON form, written by hand for the shapes the actor loop appends: what
 * `Schema.encodeResult(TrajectoryRecord)` answers (the same keys, renamed, in the same order), without walking the
 * schema. That walk cost ~40 µs a record, 7 % of a rollout step's CPU (bench/rollout.ts). Every value is checked
 * at least as strictly as the schema checks it; anything this does not know for certain (a sandbox error kind, a
 * value of an unexpected type, an out-of-range number) answers `undefined`, and the caller encodes with the schema,
 * which also words the error. test/environment/TrajectoryStore.test.ts holds the two to the same text.
 */
import { isPacked } from "./packedTokens.js"

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const isFinite = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)
const isInt = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)
const isStringOrNull = (value: unknown): boolean => value === null || typeof value === "string"
const isStrings = (value: unknown): value is ReadonlyArray<string> => {
  if (!Array.isArray(value)) return false
  for (const item of value) if (typeof item !== "string") return false
  return true
}

/** Thrown inside `encodeRecord` when a value needs the schema; caught there (never escapes). */
const unknownShape: unique symbol = Symbol("unknownShape")
const need = (ok: boolean): void => {
  if (!ok) throw unknownShape
}

const state = (value: unknown): Json => {
  need(isObject(value))
  const s = value as Json
  need(
    isStrings(s.goals) && isStrings(s.constraints) && isStrings(s.decisions) && isStrings(s.hypotheses) &&
      isStrings(s.history) && isStrings(s.openIssues) && typeof s.nextFocus === "string"
  )
  return {
    goals: s.goals,
    constraints: s.constraints,
    decisions: s.decisions,
    hypotheses: s.hypotheses,
    history: s.history,
    open_issues: s.openIssues,
    next_focus: s.nextFocus
  }
}

const modelOutput = (value: unknown): Json => {
  need(isObject(value))
  const m = value as Json
  need(typeof m.raw === "string" && isStringOrNull(m.think) && isStringOrNull(m.parseError) && "action" in m && "stateUpdate" in m)
  need(m.parseErrorDetail === undefined || isStringOrNull(m.parseErrorDetail))
  const out: Json = {
    raw: m.raw,
    think: m.think,
    action: m.action,
    state_update: m.stateUpdate,
    parse_error: m.parseError
  }
  if (m.parseErrorDetail !== undefined) out.parse_error_detail = m.parseErrorDetail
  return out
}

const isolations = new Set(["bwrap", "process", "none", "test"])

const sandboxResult = (value: unknown): Json | null => {
  if (value === null) return null
  need(isObject(value))
  const r = value as Json
  need(
    isStrings(r.command) && isInt(r.exitCode) && typeof r.stdout === "string" && typeof r.stderr === "string" &&
      isFinite(r.durationMs) && typeof r.timedOut === "boolean" && typeof r.isolation === "string" &&
      isolations.has(r.isolation)
  )
  // The rare fields (a refused or failed command) are left to the schema.
  need(r.error === undefined && r.signal === undefined)
  need(r.stdoutTruncated === undefined || typeof r.stdoutTruncated === "boolean")
  need(r.stderrTruncated === undefined || typeof r.stderrTruncated === "boolean")
  need(r.diff === undefined || typeof r.diff === "string")
  need(r.changedFiles === undefined || isStrings(r.changedFiles))
  const out: Json = {
    command: r.command,
    exit_code: r.exitCode,
    stdout: r.stdout,
    stderr: r.stderr,
    duration_ms: r.durationMs,
    timed_out: r.timedOut,
    isolation: r.isolation
  }
  if (r.stdoutTruncated !== undefined) out.stdout_truncated = r.stdoutTruncated
  if (r.stderrTruncated !== undefined) out.stderr_truncated = r.stderrTruncated
  if (r.diff !== undefined) out.diff = r.diff
  if (r.changedFiles !== undefined) out.changed_files = r.changedFiles
  return out
}

const rewardParts = (value: unknown): Array<Json> => {
  need(Array.isArray(value))
  // `Array.from`, not `map`: a hole is `undefined` (refused: the schema's encoding words it), not skipped.
  return Array.from(value as Array<unknown>, (part) => {
    need(isObject(part))
    const p = part as Json
    need(typeof p.name === "string" && (p.value === null || isFinite(p.value)) && isFinite(p.weight))
    const out: Json = { name: p.name, value: p.value, weight: p.weight }
    if (p.error !== undefined) {
      need(isObject(p.error))
      const e = p.error as Json
      need(typeof e.reason === "string" && typeof e.message === "string")
      out.error = { reason: e.reason, message: e.message }
    }
    return out
  })
}

const metrics = (value: unknown): Json => {
  need(isObject(value))
  const m = value as Json
  need(isFinite(m.actorLatencySec) && typeof m.sandboxFailed === "boolean")
  need(m.inputTokens === undefined || isInt(m.inputTokens))
  need(m.outputTokens === undefined || isInt(m.outputTokens))
  need(m.finishReason === undefined || typeof m.finishReason === "string")
  need(m.model === undefined || typeof m.model === "string")
  need(m.sandboxDurationSec === undefined || isFinite(m.sandboxDurationSec))
  need(m.sandboxError === undefined || typeof m.sandboxError === "string")
  const out: Json = { actor_latency_sec: m.actorLatencySec, sandbox_failed: m.sandboxFailed }
  if (m.inputTokens !== undefined) out.input_tokens = m.inputTokens
  if (m.outputTokens !== undefined) out.output_tokens = m.outputTokens
  if (m.finishReason !== undefined) out.finish_reason = m.finishReason
  if (m.model !== undefined) out.model = m.model
  if (m.sandboxDurationSec !== undefined) out.sandbox_duration_sec = m.sandboxDurationSec
  if (m.sandboxError !== undefined) out.sandbox_error = m.sandboxError
  return out
}

const packed = (value: unknown): boolean => value === undefined || (typeof value === "string" && isPacked(value))

const tokens = (value: unknown): Json => {
  need(isObject(value))
  const t = value as Json
  need(packed(t.promptIds) && packed(t.completionIds) && packed(t.completionLogprobs) && packed(t.promptLogprobs))
  const out: Json = {}
  if (t.promptIds !== undefined) out.prompt_ids = t.promptIds
  if (t.completionIds !== undefined) out.completion_ids = t.completionIds
  if (t.completionLogprobs !== undefined) out.completion_logprobs = t.completionLogprobs
  if (t.promptLogprobs !== undefined) out.prompt_logprobs = t.promptLogprobs
  return out
}

const episodeEnds = new Set(["done", "reward", "max_steps"])

/**
 * The JSON form of a trajectory record (the `TrajectoryRecord` schema's encoded side), or `undefined` when the
 * record holds something only the schema should judge.
 */
export const encodeRecord = (record: unknown): Json | undefined => {
  try {
    need(isObject(record))
    const r = record as Json
    need(typeof r.taskId === "string" && isInt(r.step) && (r.step as number) > 0 && typeof r.prompt === "string")
    need(r.reward === null || isFinite(r.reward))
    need(r.sessionId === undefined || typeof r.sessionId === "string")
    need(r.createdAt === undefined || isFinite(r.createdAt))
    need(r.episodeId === undefined || typeof r.episodeId === "string")
    need(r.episodeStep === undefined || (isInt(r.episodeStep) && r.episodeStep > 0))
    need(r.groupId === undefined || typeof r.groupId === "string")
    need(r.seed === undefined || isInt(r.seed))
    need(r.episodeEnd === undefined || (typeof r.episodeEnd === "string" && episodeEnds.has(r.episodeEnd)))
    need(r.episodeReward === undefined || r.episodeReward === null || isFinite(r.episodeReward))
    need(r.episodeRewardFailed === undefined || typeof r.episodeRewardFailed === "boolean")
    // In the schema's field order, which is the order of the JSON line's keys.
    const out: Json = {
      task_id: r.taskId,
      step: r.step,
      prompt: r.prompt,
      state_before: state(r.stateBefore),
      state_after: state(r.stateAfter),
      model_output: modelOutput(r.modelOutput),
      sandbox_result: sandboxResult(r.sandboxResult),
      reward: r.reward
    }
    if (r.rewardParts !== undefined) out.reward_parts = rewardParts(r.rewardParts)
    out.metrics = metrics(r.metrics)
    if (r.sessionId !== undefined) out.session_id = r.sessionId
    if (r.createdAt !== undefined) out.created_at = r.createdAt
    if (r.tokens !== undefined) out.tokens = tokens(r.tokens)
    if (r.episodeId !== undefined) out.episode_id = r.episodeId
    if (r.episodeStep !== undefined) out.episode_step = r.episodeStep
    if (r.groupId !== undefined) out.group_id = r.groupId
    if (r.seed !== undefined) out.seed = r.seed
    if (r.episodeEnd !== undefined) out.episode_end = r.episodeEnd
    if (r.episodeReward !== undefined) out.episode_reward = r.episodeReward
    if (r.episodeRewardFailed !== undefined) out.episode_reward_failed = r.episodeRewardFailed
    return out
  } catch (error) {
    if (error === unknownShape) return undefined
    throw error
  }
}
