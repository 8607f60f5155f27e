/**
 * The OpenAI-compatible wire format, as servers actually send it. Tolerant on purpose: every field a server may
 * leave out or set to `null` is optional and nullable, unknown fields are ignored, and numbers that some servers
 * send as strings are not relied on. The mapping into the strict domain types lives in `decode.ts`.
 */
import { Schema } from "effect"

const Nullable = <S extends Schema.Top>(schema: S) => Schema.optional(Schema.NullOr(schema))

/** Token counts (`prompt_tokens`, `completion_tokens`, `total_tokens`, and the prompt-cache counts). */
export const Usage = Schema.Struct({
  prompt_tokens: Nullable(Schema.Number),
  completion_tokens: Nullable(Schema.Number),
  total_tokens: Nullable(Schema.Number),
  /** OpenAI (and vLLM with `--enable-prompt-tokens-details`): the cached part of `prompt_tokens`. */
  prompt_tokens_details: Nullable(Schema.Struct({
    cached_tokens: Nullable(Schema.Number),
    cache_write_tokens: Nullable(Schema.Number)
  })),
  /** DeepSeek: the part of `prompt_tokens` served from its disk cache (the rest is `prompt_cache_miss_tokens`). */
  prompt_cache_hit_tokens: Nullable(Schema.Number),
  prompt_cache_miss_tokens: Nullable(Schema.Number)
})
export type Usage = typeof Usage.Type

const TopLogprob = Schema.Struct({ token: Schema.String, logprob: Schema.Number })

/** Chat log-probabilities: `{ content: [{ token, logprob, top_logprobs }] }`. */
export const ChatLogprobs = Schema.Struct({
  content: Nullable(Schema.Array(Schema.Struct({
    token: Schema.String,
    logprob: Schema.Number,
    top_logprobs: Nullable(Schema.Array(TopLogprob))
  })))
})
export type ChatLogprobs = typeof ChatLogprobs.Type

/** Completion log-probabilities: parallel arrays, alternatives as `{ token: logprob }` maps. */
export const CompletionLogprobs = Schema.Struct({
  tokens: Nullable(Schema.Array(Schema.String)),
  token_logprobs: Nullable(Schema.Array(Schema.NullOr(Schema.Number))),
  top_logprobs: Nullable(Schema.Array(Schema.NullOr(Schema.Record(Schema.String, Schema.Number))))
})
export type CompletionLogprobs = typeof CompletionLogprobs.Type

/** vLLM's token ids (`return_token_ids`, vLLM ≥ 0.10.2). */
const TokenIds = Nullable(Schema.Array(Schema.Number))

/**
 * vLLM's `prompt_logprobs`: per prompt token, `null` (the first token) or `{ "<token id>": { logprob, rank,
 * decoded_token } }` holding the prompt token and the top alternatives asked for.
 */
export const PromptLogprobs = Nullable(Schema.Array(Schema.NullOr(Schema.Record(
  Schema.String,
  Schema.Struct({ logprob: Schema.Number, rank: Nullable(Schema.Number), decoded_token: Nullable(Schema.String) })
))))
export type PromptLogprobs = typeof PromptLogprobs.Type

const StopReason = Nullable(Schema.Union([Schema.String, Schema.Number]))

/** A complete tool call in a non-streamed message. */
const ToolCall = Schema.Struct({
  id: Nullable(Schema.String),
  function: Schema.Struct({
    name: Nullable(Schema.String),
    // Some servers send the arguments as an object instead of JSON text.
    arguments: Nullable(Schema.Union([Schema.String, Schema.Record(Schema.String, Schema.Unknown)]))
  })
})

/** `POST /v1/chat/completions`, not streamed. */
export const ChatCompletion = Schema.Struct({
  id: Nullable(Schema.String),
  model: Nullable(Schema.String),
  choices: Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    message: Schema.Struct({
      content: Nullable(Schema.String),
      reasoning: Nullable(Schema.String),
      reasoning_content: Nullable(Schema.String),
      tool_calls: Nullable(Schema.Array(ToolCall))
    }),
    logprobs: Nullable(ChatLogprobs),
    finish_reason: Nullable(Schema.String),
    stop_reason: StopReason,
    token_ids: TokenIds
  })),
  usage: Nullable(Usage),
  /** vLLM: the prompt's ids, for the whole response (chat). */
  prompt_token_ids: TokenIds,
  prompt_logprobs: PromptLogprobs
})
export type ChatCompletion = typeof ChatCompletion.Type

/** `POST /v1/completions`, not streamed (also one streamed chunk of it: the same shape). */
export const Completion = Schema.Struct({
  id: Nullable(Schema.String),
  model: Nullable(Schema.String),
  choices: Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    text: Nullable(Schema.String),
    logprobs: Nullable(CompletionLogprobs),
    finish_reason: Nullable(Schema.String),
    stop_reason: StopReason,
    token_ids: TokenIds,
    /** vLLM: the prompt's ids and log-probabilities, on each choice (completions). */
    prompt_token_ids: TokenIds,
    prompt_logprobs: PromptLogprobs
  })),
  usage: Nullable(Usage)
})
export type Completion = typeof Completion.Type

/** A piece of a tool call in a streamed delta: `index` says which call it continues. */
const ToolCallDelta = Schema.Struct({
  index: Nullable(Schema.Number),
  id: Nullable(Schema.String),
  function: Nullable(Schema.Struct({
    name: Nullable(Schema.String),
    arguments: Nullable(Schema.String)
  }))
})

/** One `data:` event of a streamed chat completion. */
export const ChatChunk = Schema.Struct({
  id: Nullable(Schema.String),
  model: Nullable(Schema.String),
  choices: Nullable(Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    delta: Nullable(Schema.Struct({
      content: Nullable(Schema.String),
      reasoning: Nullable(Schema.String),
      reasoning_content: Nullable(Schema.String),
      tool_calls: Nullable(Schema.Array(ToolCallDelta))
    })),
    logprobs: Nullable(ChatLogprobs),
    finish_reason: Nullable(Schema.String),
    stop_reason: StopReason,
    token_ids: TokenIds
  }))),
  usage: Nullable(Usage),
  /** vLLM: on the first event only. */
  prompt_token_ids: TokenIds,
  prompt_logprobs: PromptLogprobs
})
export type ChatChunk = typeof ChatChunk.Type

/** One `data:` event of a streamed completion. */
export const CompletionChunk = Schema.Struct({
  id: Nullable(Schema.String),
  model: Nullable(Schema.String),
  choices: Nullable(Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    text: Nullable(Schema.String),
    logprobs: Nullable(CompletionLogprobs),
    finish_reason: Nullable(Schema.String),
    stop_reason: StopReason,
    token_ids: TokenIds,
    /** vLLM: on the first event of each choice. */
    prompt_token_ids: TokenIds,
    prompt_logprobs: PromptLogprobs
  }))),
  usage: Nullable(Usage)
})
export type CompletionChunk = typeof CompletionChunk.Type

/** The fields of an error, nested (`{"error": {...}}`) or flat (`{"object": "error", ...}`). */
export const ErrorFields = Schema.Struct({
  message: Nullable(Schema.String),
  type: Nullable(Schema.String),
  param: Nullable(Schema.Unknown),
  code: Nullable(Schema.Union([Schema.String, Schema.Number]))
})
export type ErrorFields = typeof ErrorFields.Type

/** `{"error": {...}}` (OpenAI, vLLM from 0.10.1) or `{"error": "text"}` (some servers). */
export const NestedError = Schema.Struct({ error: Schema.Union([ErrorFields, Schema.String]) })

/** `{"object": "error", "message": ..., "code": 400}` (vLLM before 0.10.1). */
export const FlatError = Schema.Struct({ object: Schema.Literal("error"), ...ErrorFields.fields })

/** Either error body shape. */
export const ErrorBody = Schema.Union([NestedError, FlatError])
export type ErrorBody = typeof ErrorBody.Type

/** `GET /v1/models`. */
export const ModelList = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    id: Schema.String,
    owned_by: Nullable(Schema.String),
    created: Nullable(Schema.Number),
    max_model_len: Nullable(Schema.Number)
  }))
})
export type ModelList = typeof ModelList.Type

/**
 * `POST /v1/embeddings`: `{ data: [{ index, embedding }], model, usage }`. An embedding is a list of numbers
 * (`encoding_format: "float"`) or base64 of float32 little-endian bytes (`"base64"`). A missing index is the position.
 */
export const EmbeddingList = Schema.Struct({
  data: Schema.Array(Schema.Struct({
    index: Nullable(Schema.Number),
    embedding: Schema.Union([Schema.Array(Schema.Number), Schema.String])
  })),
  model: Nullable(Schema.String),
  usage: Nullable(Usage)
})
export type EmbeddingList = typeof EmbeddingList.Type

// ---------------------------------------------------------------------------------------------------------
// The Responses API (`POST /v1/responses`, streamed): events named by their `type`, as OpenAI sends them. Only the
// fields valet reads are declared; the rest (`sequence_number`, `obfuscation`, `phase`, `logprobs`...) are ignored.
// ---------------------------------------------------------------------------------------------------------

/** The usage of a response: `input_tokens` (its cached part in `input_tokens_details`), `output_tokens`. */
export const ResponsesUsage = Schema.Struct({
  input_tokens: Nullable(Schema.Number),
  input_tokens_details: Nullable(Schema.Struct({ cached_tokens: Nullable(Schema.Number) })),
  output_tokens: Nullable(Schema.Number),
  output_tokens_details: Nullable(Schema.Struct({ reasoning_tokens: Nullable(Schema.Number) })),
  total_tokens: Nullable(Schema.Number)
})
export type ResponsesUsage = typeof ResponsesUsage.Type

/** An output item: a `message`, a `function_call`, a `reasoning` item (kept whole from the raw JSON), or others. */
export const ResponsesItem = Schema.Struct({
  type: Schema.String,
  id: Nullable(Schema.String),
  call_id: Nullable(Schema.String),
  name: Nullable(Schema.String),
  arguments: Nullable(Schema.String),
  content: Nullable(Schema.Array(Schema.Struct({
    type: Schema.String,
    text: Nullable(Schema.String)
  }))),
  /** A `reasoning` item's summary parts. */
  summary: Nullable(Schema.Array(Schema.Struct({
    type: Schema.String,
    text: Nullable(Schema.String)
  })))
})
export type ResponsesItem = typeof ResponsesItem.Type

/** The response object of `response.created` / `completed` / `incomplete` / `failed`. */
export const ResponsesObject = Schema.Struct({
  id: Nullable(Schema.String),
  model: Nullable(Schema.String),
  status: Nullable(Schema.String),
  error: Nullable(Schema.Struct({
    code: Nullable(Schema.Union([Schema.String, Schema.Number])),
    message: Nullable(Schema.String)
  })),
  incomplete_details: Nullable(Schema.Struct({ reason: Nullable(Schema.String) })),
  usage: Nullable(ResponsesUsage)
})
export type ResponsesObject = typeof ResponsesObject.Type

/** One event of a streamed response. */
export const ResponsesEvent = Schema.Struct({
  type: Schema.String,
  output_index: Nullable(Schema.Number),
  summary_index: Nullable(Schema.Number),
  content_index: Nullable(Schema.Number),
  item_id: Nullable(Schema.String),
  delta: Nullable(Schema.String),
  item: Nullable(ResponsesItem),
  response: Nullable(ResponsesObject)
})
export type ResponsesEvent = typeof ResponsesEvent.Type
