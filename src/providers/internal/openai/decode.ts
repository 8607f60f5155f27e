/**
 * Wire → domain. Tolerant of what servers send (`null` content is "", a missing index is the position, a missing
 * tool-call id is made up the same way in both paths, unknown finish reasons are `other`), strict in what it
 * answers: a `Model.Response`, or `Model.Chunk`s that `Model.accumulate` folds into the same `Response`.
 */
import type * as Model from "../../../core/Model.js"
import type * as Wire from "./wire.js"

/** A wire finish reason → the domain's; `undefined` when the server gave none. */
export const finishReason = (reason: string | null | undefined): Model.FinishReason | undefined => {
  switch (reason) {
    case null:
    case undefined:
      return undefined
    case "stop":
    case "eos":
    case "end_turn":
      return "stop"
    case "length":
    case "max_tokens":
      return "length"
    case "tool_calls":
    case "function_call":
    case "tool_use":
      return "tool_calls"
    case "content_filter":
      return "content_filter"
    default:
      return "other"
  }
}

/**
 * Token counts; a missing total is the sum. The cached part of the input is DeepSeek's `prompt_cache_hit_tokens`
 * when sent (DeepSeek also sends `prompt_tokens_details`; its own field is the one it bills by), else OpenAI's
 * `prompt_tokens_details.cached_tokens`; both are parts of `prompt_tokens`, as `cachedInputTokens` is of
 * `inputTokens`. Absent when the server said nothing.
 */
export const usage = (wire: Wire.Usage | null | undefined): Model.Usage | undefined => {
  if (wire === null || wire === undefined) return undefined
  const inputTokens = wire.prompt_tokens ?? 0
  const outputTokens = wire.completion_tokens ?? 0
  const out: { -readonly [K in keyof Model.Usage]: Model.Usage[K] } = {
    inputTokens,
    outputTokens,
    totalTokens: wire.total_tokens ?? inputTokens + outputTokens
  }
  const details = wire.prompt_tokens_details
  const cached = wire.prompt_cache_hit_tokens ?? details?.cached_tokens
  if (cached !== null && cached !== undefined) out.cachedInputTokens = cached
  const written = details?.cache_write_tokens
  if (written !== null && written !== undefined) out.cacheWriteTokens = written
  return out
}

/** The id given to a tool call the server sent without one. */
export const toolCallId = (choice: number, toolIndex: number): string => `call_${choice}_${toolIndex}`

// Token ids are stored as int32 (`TrajectoryStore.encodeTokens`): a larger one would wrap to another token, silently.
const maxTokenId = 2 ** 31 - 1

/** `"token_id:123"` (vLLM with `return_tokens_as_token_ids`) → 123; any other token text → `undefined`. */
export const tokenIdOf = (token: string): number | undefined => {
  const match = /^token_id:(\d+)$/.exec(token)
  if (match === null) return undefined
  const id = Number(match[1])
  return id <= maxTokenId ? id : undefined
}

/** A token as the domain holds it: `tokenId` only when the server named it. */
const tokenOf = (token: string, logprob: number): Model.TokenLogprob => {
  const id = tokenIdOf(token)
  return id === undefined ? { token, logprob } : { token, logprob, tokenId: id }
}

/**
 * A list of token ids as sent; anything that is not a list of integers in [0, 2^31) (what an int32 holds, as
 * records store them) is absent, never repaired.
 */
export const tokenIds = (wire: ReadonlyArray<number> | null | undefined): Array<number> | undefined => {
  if (wire === null || wire === undefined) return undefined
  for (const id of wire) if (!Number.isInteger(id) || id < 0 || id > maxTokenId) return undefined
  return [...wire]
}

/**
 * vLLM's `prompt_logprobs` → one log-probability per prompt token: the entry of the prompt token itself (found by
 * its id in `promptIds`; without ids, only an entry holding a single token is taken), `null` where the server has
 * none (the first token) or where which entry is the prompt token cannot be told.
 */
export const promptLogprobs = (
  wire: Wire.PromptLogprobs,
  promptIds: ReadonlyArray<number> | undefined
): Array<number | null> | undefined => {
  if (wire === null || wire === undefined) return undefined
  return wire.map((entry, i) => {
    if (entry === null) return null
    const id = promptIds?.[i]
    if (id !== undefined) return entry[String(id)]?.logprob ?? null
    const keys = Object.keys(entry)
    return keys.length === 1 ? entry[keys[0]!]!.logprob : null
  })
}

const chatLogprobs = (wire: Wire.ChatLogprobs | null | undefined): Array<Model.TokenLogprob> | undefined => {
  const content = wire?.content
  if (content === null || content === undefined) return undefined
  return content.map((entry) =>
    entry.top_logprobs !== null && entry.top_logprobs !== undefined && entry.top_logprobs.length > 0
      ? {
        ...tokenOf(entry.token, entry.logprob),
        topLogprobs: entry.top_logprobs.map((top) => ({ token: top.token, logprob: top.logprob }))
      }
      : tokenOf(entry.token, entry.logprob)
  )
}

const completionLogprobs = (
  wire: Wire.CompletionLogprobs | null | undefined
): Array<Model.TokenLogprob> | undefined => {
  const tokens = wire?.tokens
  if (wire === null || wire === undefined || tokens === null || tokens === undefined) return undefined
  const out: Array<Model.TokenLogprob> = []
  for (let i = 0; i < tokens.length; i++) {
    const logprob = wire.token_logprobs?.[i]
    // `null` only for the first token of an echoed prompt: it has no probability to report.
    if (logprob === null || logprob === undefined) continue
    const top = wire.top_logprobs?.[i]
    out.push(
      top !== null && top !== undefined && Object.keys(top).length > 0
        ? {
          ...tokenOf(tokens[i]!, logprob),
          topLogprobs: Object.entries(top).sort((a, b) => b[1] - a[1]).map(([token, lp]) => ({ token, logprob: lp }))
        }
        : tokenOf(tokens[i]!, logprob)
    )
  }
  return out
}

const nonEmpty = (text: string | null | undefined): string | undefined =>
  text === null || text === undefined || text === "" ? undefined : text

const argumentsText = (value: string | Readonly<Record<string, unknown>> | null | undefined): string =>
  value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value)

/** A non-streamed chat completion. */
export const chatResponse = (wire: Wire.ChatCompletion, fallbackModel: string): Model.Response => ({
  id: wire.id ?? "",
  model: wire.model ?? fallbackModel,
  choices: wire.choices
    .map((choice, position): Model.Choice => {
      const index = choice.index ?? position
      const toolCalls = (choice.message.tool_calls ?? []).map((call, i): Model.ToolCall => ({
        id: call.id ?? toolCallId(index, i),
        name: call.function.name ?? "",
        arguments: argumentsText(call.function.arguments)
      }))
      const reasoning = nonEmpty(choice.message.reasoning) ?? nonEmpty(choice.message.reasoning_content)
      const logprobs = chatLogprobs(choice.logprobs)
      const ids = tokenIds(choice.token_ids)
      return {
        index,
        text: choice.message.content ?? "",
        toolCalls,
        ...(reasoning !== undefined ? { reasoning } : {}),
        finishReason: finishReason(choice.finish_reason) ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
        ...(choice.stop_reason !== null && choice.stop_reason !== undefined ? { stopReason: choice.stop_reason } : {}),
        ...(logprobs !== undefined ? { logprobs } : {}),
        ...(ids !== undefined ? { tokenIds: ids } : {})
      }
    })
    .sort((a, b) => a.index - b.index),
  usage: usage(wire.usage) ?? { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
  ...promptTokens(wire.prompt_token_ids, wire.prompt_logprobs)
})

/** The response's `promptTokenIds` / `promptLogprobs`, each only when sent. */
const promptTokens = (
  ids: ReadonlyArray<number> | null | undefined,
  logprobs: Wire.PromptLogprobs
): { promptTokenIds?: Array<number>; promptLogprobs?: Array<number | null> } => {
  const promptIds = tokenIds(ids)
  const promptLps = promptLogprobs(logprobs, promptIds)
  return {
    ...(promptIds !== undefined ? { promptTokenIds: promptIds } : {}),
    ...(promptLps !== undefined ? { promptLogprobs: promptLps } : {})
  }
}

/** A completion's prompt data: vLLM repeats it on every choice; the first choice carrying it is taken. */
const firstPromptOf = (
  choices: ReadonlyArray<{ readonly prompt_token_ids?: ReadonlyArray<number> | null | undefined; readonly prompt_logprobs?: Wire.PromptLogprobs }>
) => {
  const carrier = choices.find((choice) =>
    (choice.prompt_token_ids !== null && choice.prompt_token_ids !== undefined) ||
    (choice.prompt_logprobs !== null && choice.prompt_logprobs !== undefined)
  )
  return carrier === undefined ? {} : promptTokens(carrier.prompt_token_ids, carrier.prompt_logprobs)
}

/** A non-streamed text completion. */
export const completionResponse = (wire: Wire.Completion, fallbackModel: string): Model.Response => ({
  id: wire.id ?? "",
  model: wire.model ?? fallbackModel,
  choices: wire.choices
    .map((choice, position): Model.Choice => {
      const logprobs = completionLogprobs(choice.logprobs)
      const ids = tokenIds(choice.token_ids)
      return {
        index: choice.index ?? position,
        text: choice.text ?? "",
        toolCalls: [],
        finishReason: finishReason(choice.finish_reason) ?? "stop",
        ...(choice.stop_reason !== null && choice.stop_reason !== undefined ? { stopReason: choice.stop_reason } : {}),
        ...(logprobs !== undefined ? { logprobs } : {}),
        ...(ids !== undefined ? { tokenIds: ids } : {})
      }
    })
    .sort((a, b) => a.index - b.index),
  usage: usage(wire.usage) ?? { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
  ...firstPromptOf(wire.choices)
})

const textDelta = (
  index: number,
  text: string,
  logprobs: Array<Model.TokenLogprob> | undefined,
  ids: Array<number> | undefined
): Model.Chunk => ({
  _tag: "TextDelta",
  index,
  text,
  ...(logprobs !== undefined ? { logprobs } : {}),
  ...(ids !== undefined ? { tokenIds: ids } : {})
})

/**
 * Turns the decoded events of one stream into chunks. Usage is held back and sent once at the end (`finish`):
 * vLLM repeats it on every event, and only the last count is the call's.
 */
export class ChunkDecoder {
  private metadataSent = false
  private promptSent = false
  private latestUsage: Model.Usage | undefined = undefined
  /** `choice * 65536 + toolIndex` of the tool calls already started: their later pieces carry no id. */
  private readonly startedTools = new Set<number>()
  /** Whether some event carried a choice: a stream without any has no answer (usage alone is none). */
  sawChoice = false

  constructor(private readonly fallbackModel: string) {}

  private id = ""
  private model = ""

  /**
   * The `Metadata` chunk, once; prompt token data (vLLM: on the first event) rides on it. Prompt data arriving
   * after it (a completion choice whose first event came later) is sent in a second `Metadata` of the same id.
   */
  private metadata(
    out: Array<Model.Chunk>,
    id: string | null | undefined,
    model: string | null | undefined,
    prompt: { promptTokenIds?: Array<number>; promptLogprobs?: Array<number | null> }
  ): void {
    const hasPrompt = !this.promptSent && (prompt.promptTokenIds !== undefined || prompt.promptLogprobs !== undefined)
    if (this.metadataSent && !hasPrompt) return
    if (!this.metadataSent) {
      this.id = id ?? ""
      this.model = model ?? this.fallbackModel
    }
    this.metadataSent = true
    if (hasPrompt) this.promptSent = true
    out.push({ _tag: "Metadata", id: this.id, model: this.model, ...(hasPrompt ? prompt : {}) })
  }

  private finish(
    out: Array<Model.Chunk>,
    index: number,
    reason: string | null | undefined,
    stopReason: string | number | null | undefined
  ): void {
    const finish = finishReason(reason)
    if (finish === undefined) return
    out.push(
      stopReason !== null && stopReason !== undefined
        ? { _tag: "Finish", index, finishReason: finish, stopReason }
        : { _tag: "Finish", index, finishReason: finish }
    )
  }

  /** The chunks of one chat event, appended to `out`. */
  chat(wire: Wire.ChatChunk, out: Array<Model.Chunk>): void {
    this.metadata(out, wire.id, wire.model, this.promptSent ? {} : promptTokens(wire.prompt_token_ids, wire.prompt_logprobs))
    const choices = wire.choices ?? []
    if (choices.length > 0) this.sawChoice = true
    for (let position = 0; position < choices.length; position++) {
      const choice = choices[position]!
      const index = choice.index ?? position
      const delta = choice.delta
      const ids = tokenIds(choice.token_ids)
      if (delta !== null && delta !== undefined) {
        const reasoning = nonEmpty(delta.reasoning) ?? nonEmpty(delta.reasoning_content)
        if (reasoning !== undefined) out.push({ _tag: "ReasoningDelta", index, text: reasoning })
        const logprobs = chatLogprobs(choice.logprobs)
        const text = delta.content ?? ""
        if (text !== "" || (logprobs !== undefined && logprobs.length > 0) || (ids !== undefined && ids.length > 0)) {
          out.push(textDelta(index, text, logprobs, ids))
        }
        const calls = delta.tool_calls
        if (calls !== null && calls !== undefined) {
          for (let i = 0; i < calls.length; i++) {
            const call = calls[i]!
            const toolIndex = call.index ?? i
            const key = index * 65536 + toolIndex
            const first = !this.startedTools.has(key)
            if (first) this.startedTools.add(key)
            const id = call.id ?? (first ? toolCallId(index, toolIndex) : undefined)
            const name = call.function?.name ?? undefined
            out.push({
              _tag: "ToolCallDelta",
              index,
              toolIndex,
              ...(id !== undefined ? { id } : {}),
              ...(name !== undefined ? { name } : {}),
              arguments: call.function?.arguments ?? ""
            })
          }
        }
      } else if (ids !== undefined && ids.length > 0) {
        out.push(textDelta(index, "", chatLogprobs(choice.logprobs), ids))
      }
      this.finish(out, index, choice.finish_reason, choice.stop_reason)
    }
    const counted = usage(wire.usage)
    if (counted !== undefined) this.latestUsage = counted
  }

  /** The chunks of one completion event, appended to `out`. */
  completion(wire: Wire.CompletionChunk, out: Array<Model.Chunk>): void {
    const choices = wire.choices ?? []
    this.metadata(out, wire.id, wire.model, this.promptSent ? {} : firstPromptOf(choices))
    if (choices.length > 0) this.sawChoice = true
    for (let position = 0; position < choices.length; position++) {
      const choice = choices[position]!
      const index = choice.index ?? position
      const logprobs = completionLogprobs(choice.logprobs)
      const ids = tokenIds(choice.token_ids)
      const text = choice.text ?? ""
      if (text !== "" || (logprobs !== undefined && logprobs.length > 0) || (ids !== undefined && ids.length > 0)) {
        out.push(textDelta(index, text, logprobs, ids))
      }
      this.finish(out, index, choice.finish_reason, choice.stop_reason)
    }
    const counted = usage(wire.usage)
    if (counted !== undefined) this.latestUsage = counted
  }

  /** The chunks after the last event: the usage, when the server sent any. */
  end(out: Array<Model.Chunk>): void {
    if (this.latestUsage !== undefined) out.push({ _tag: "Usage", usage: this.latestUsage })
  }
}
