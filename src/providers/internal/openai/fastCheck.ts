/**
 * Fast structural checks for the shapes that arrive once per streamed token. Each check is stricter than its
 * schema in `wire.ts` (it accepts a subset: anything unusual, log-probabilities included, answers `false`), so
 * `check(u) === true` implies the schema accepts `u` unchanged, and everything else still goes through the schema,
 * which decides and explains. Decoding a chunk with the schema costs ~10 µs, a fifth of the client's CPU on a
 * 200-chunk stream; these cost well under one. `test/providers/internal/openai/wire.test.ts` holds the implication.
 */
import type * as Wire from "./wire.js"

const isNullish = (u: unknown): u is null | undefined => u === null || u === undefined

const optString = (u: unknown): boolean => isNullish(u) || typeof u === "string"

const optNumber = (u: unknown): boolean => isNullish(u) || typeof u === "number"

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const detailsOk = (u: unknown): boolean =>
  isNullish(u) || (isObject(u) && optNumber(u.cached_tokens) && optNumber(u.cache_write_tokens))

const usageOk = (u: unknown): boolean =>
  isNullish(u) ||
  (isObject(u) && optNumber(u.prompt_tokens) && optNumber(u.completion_tokens) && optNumber(u.total_tokens) &&
    detailsOk(u.prompt_tokens_details) && optNumber(u.prompt_cache_hit_tokens) && optNumber(u.prompt_cache_miss_tokens))

// Token data (vLLM's `token_ids`, `prompt_token_ids`, `prompt_logprobs`) is left to the schema, as logprobs are.
const choiceTailOk = (choice: Record<string, unknown>): boolean =>
  optNumber(choice.index) &&
  isNullish(choice.logprobs) &&
  isNullish(choice.token_ids) &&
  isNullish(choice.prompt_token_ids) &&
  isNullish(choice.prompt_logprobs) &&
  optString(choice.finish_reason) &&
  (isNullish(choice.stop_reason) || typeof choice.stop_reason === "string" || typeof choice.stop_reason === "number")

const toolCallDeltaOk = (u: unknown): boolean => {
  if (!isObject(u) || !optNumber(u.index) || !optString(u.id)) return false
  const fn = u.function
  return isNullish(fn) || (isObject(fn) && optString(fn.name) && optString(fn.arguments))
}

const deltaOk = (u: unknown): boolean => {
  if (isNullish(u)) return true
  if (!isObject(u) || !optString(u.content) || !optString(u.reasoning) || !optString(u.reasoning_content)) return false
  const calls = u.tool_calls
  if (isNullish(calls)) return true
  if (!Array.isArray(calls)) return false
  for (const call of calls) if (!toolCallDeltaOk(call)) return false
  return true
}

/** Whether `u` is a chat chunk of the common shape (then `Wire.ChatChunk` accepts it as it is). */
export const isChatChunk = (u: unknown): u is Wire.ChatChunk => {
  if (!isObject(u) || !optString(u.id) || !optString(u.model) || !usageOk(u.usage)) return false
  if (!isNullish(u.prompt_token_ids) || !isNullish(u.prompt_logprobs)) return false
  const choices = u.choices
  if (isNullish(choices)) return true
  if (!Array.isArray(choices)) return false
  for (const choice of choices) {
    if (!isObject(choice) || !choiceTailOk(choice) || !deltaOk(choice.delta)) return false
  }
  return true
}

/** Whether `u` is a completion chunk of the common shape (then `Wire.CompletionChunk` accepts it as it is). */
export const isCompletionChunk = (u: unknown): u is Wire.CompletionChunk => {
  if (!isObject(u) || !optString(u.id) || !optString(u.model) || !usageOk(u.usage)) return false
  const choices = u.choices
  if (isNullish(choices)) return true
  if (!Array.isArray(choices)) return false
  for (const choice of choices) {
    if (!isObject(choice) || !choiceTailOk(choice) || !optString(choice.text)) return false
  }
  return true
}

/**
 * Whether `u` is a non-streamed completion of the common shape (then `Wire.Completion` accepts it as it is): a
 * completion chunk's shape with its `choices` present. Once per request, but the schema's ~15 µs there was a
 * tenth of the client's own work on a loopback call.
 */
export const isCompletion = (u: unknown): u is Wire.Completion => isCompletionChunk(u) && Array.isArray(u.choices)

const messageOk = (u: unknown): boolean =>
  isObject(u) && optString(u.content) && optString(u.reasoning) && optString(u.reasoning_content) &&
  // Complete tool calls (with their object-or-text arguments) are left to the schema.
  isNullish(u.tool_calls)

/** Whether `u` is a non-streamed chat completion of the common shape (then `Wire.ChatCompletion` accepts it as it is). */
export const isChatCompletion = (u: unknown): u is Wire.ChatCompletion => {
  if (!isObject(u) || !optString(u.id) || !optString(u.model) || !usageOk(u.usage)) return false
  if (!isNullish(u.prompt_token_ids) || !isNullish(u.prompt_logprobs)) return false
  const choices = u.choices
  if (!Array.isArray(choices)) return false
  for (const choice of choices) {
    if (!isObject(choice) || !choiceTailOk(choice) || !messageOk(choice.message)) return false
  }
  return true
}
