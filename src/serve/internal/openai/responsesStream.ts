/**
 * The Responses API's answer: the `response` object (`POST /v1/responses` without `stream`, and inside the lifecycle
 * events), and the `response.*` events of a streamed one, in the order OpenAI sends them (the `openai` package's
 * accumulator refuses a stream whose first event is not `response.created`, or a delta whose item or content part
 * was not `added` before it; the AI SDK's schema needs `annotations` on an output text). Pure builders: the handler in
 * `OpenAiApi` owns the run.
 */
import type * as AgentEvent from "../../../core/AgentEvent.js"
import type { ResponseCreateRequest } from "./responsesRequest.js"

/** What a response is built from: the request, its ids and when it was made. */
export interface Asked {
  readonly request: ResponseCreateRequest
  /** `resp_…`: the response's id. */
  readonly id: string
  /** `msg_…`: the id of its one output message. */
  readonly messageId: string
  readonly created: number
  /** Whether the response is a turn on a thread (`responsesThreads`): its id can be used again. */
  readonly store: boolean
  readonly previousResponseId: string | null
}

/** How a response ended. */
export type Status = "in_progress" | "completed" | "incomplete" | "cancelled" | "failed"

/**
 * How a run that ended (not failed) is reported: `completed`; `incomplete` when a budget stopped it (`reason`
 * `max_output_tokens` for the output-token one, which is OpenAI's; valet's own `budget:<limit>` for the others); or
 * `cancelled` (reason `cancelled`) when it was cancelled (`POST /runs/:id/cancel`, the viewer).
 */
export interface Ending {
  readonly status: "completed" | "incomplete" | "cancelled"
  readonly reason?: string | undefined
}

/** An output text part: `annotations` and `logprobs` are always there (the AI SDK requires `annotations`). */
export const textPart = (text: string) => ({ type: "output_text", text, annotations: [], logprobs: [] })

/** The one output message. */
export const message = (asked: Asked, status: "in_progress" | "completed" | "incomplete", text: string | undefined) => ({
  id: asked.messageId,
  type: "message",
  status,
  role: "assistant",
  content: text === undefined ? [] : [textPart(text)]
})

/** OpenAI's usage of a run (every sub-agent's calls included); valet's models report no reasoning tokens apart. */
export const usageOf = (result: AgentEvent.RunResult) => ({
  input_tokens: result.usage.inputTokens,
  input_tokens_details: { cached_tokens: result.usage.cachedInputTokens ?? 0 },
  output_tokens: result.usage.outputTokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: result.usage.totalTokens
})

/**
 * The `response` object. `error` is `null` unless failed: the `openai` package's stream reader fails on any event
 * carrying a truthy top-level `error`, and a response nested in an event is not top-level, but the object is the
 * same for both. `store` is `true` only when the response is a thread turn whose id can be used again.
 */
export const responseObject = (
  asked: Asked,
  end: {
    readonly status: Status
    /** Why it is incomplete or cancelled (`incomplete_details.reason`). */
    readonly reason?: string | undefined
    readonly text?: string | undefined
    readonly result?: AgentEvent.RunResult | undefined
    readonly error?: { readonly type?: string | undefined; readonly code: string; readonly message: string } | undefined
  }
) => {
  const request = asked.request
  const output = end.status === "in_progress" || end.status === "failed" || end.text === undefined
    ? []
    : [message(asked, end.status === "completed" ? "completed" : "incomplete", end.text)]
  return {
    id: asked.id,
    object: "response",
    created_at: asked.created,
    status: end.status,
    // `type` and `param` too: the AI SDK's schema of a response needs `type` (OpenAI's own objects carry code and message).
    error: end.error === undefined
      ? null
      : { type: end.error.type ?? "server_error", code: end.error.code, message: end.error.message, param: null },
    incomplete_details: end.reason !== undefined && (end.status === "incomplete" || end.status === "cancelled") ? { reason: end.reason } : null,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    model: request.model,
    output,
    output_text: end.text ?? "",
    parallel_tool_calls: false,
    previous_response_id: asked.previousResponseId,
    store: asked.store,
    temperature: null,
    top_p: null,
    text: { format: request.text?.format ?? { type: "text" } },
    tool_choice: "auto",
    tools: [],
    truncation: "disabled",
    metadata: request.metadata ?? {},
    usage: end.result === undefined ? null : usageOf(end.result)
  }
}

/**
 * The frames of a streamed response, numbered as they are made (`sequence_number` from 0, strictly increasing):
 * `event: <type>` and `data: <the event as JSON>`. There is no `[DONE]`: the stream ends after the last event.
 */
export const framer = (asked: Asked) => {
  let sequence = 0
  const frame = (type: string, body: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...body })}\n\n`
  const at = { item_id: asked.messageId, output_index: 0, content_index: 0 }
  return {
    /** `response.created`, `response.in_progress`, then the output message and its text part, added empty. */
    start: (): string => {
      const response = responseObject(asked, { status: "in_progress" })
      return frame("response.created", { response }) +
        frame("response.in_progress", { response }) +
        frame("response.output_item.added", { output_index: 0, item: message(asked, "in_progress", undefined) }) +
        frame("response.content_part.added", { ...at, part: textPart("") })
    },
    delta: (text: string): string => frame("response.output_text.delta", { ...at, delta: text, logprobs: [] }),
    /**
     * The text, its part and its item done, then `response.completed`, or `response.incomplete` (a cancelled
     * response too: it has no event of its own, and the `openai` package's accumulator knows no other).
     */
    end: (ending: Ending, text: string, result: AgentEvent.RunResult): string =>
      frame("response.output_text.done", { ...at, text, logprobs: [] }) +
      frame("response.content_part.done", { ...at, part: textPart(text) }) +
      frame("response.output_item.done", { output_index: 0, item: message(asked, ending.status === "completed" ? "completed" : "incomplete", text) }) +
      frame(ending.status === "completed" ? "response.completed" : "response.incomplete", {
        response: responseObject(asked, { status: ending.status, reason: ending.reason, text, result })
      }),
    /**
     * A run that failed: `error`, then `response.failed`, as OpenAI sends them after a 200 (the `openai` package's
     * stream then rejects with an `APIError` carrying the message).
     */
    failed: (type: string, code: string, message: string): string =>
      // The error's fields at the top too (openai 6.49's `ResponseErrorEvent`: code, message, param), and nested as
      // OpenAI's recorded streams send it (the AI SDK reads either).
      frame("error", { code, message, param: null, error: { type, code, message, param: null } }) +
      frame("response.failed", { response: responseObject(asked, { status: "failed", error: { type, code, message } }) })
  }
}
