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
  /** `msg_…`: the id of its `n`-th output message (from 0). */
  readonly messageId: (n: number) => string
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

/** An output message: its id and its text. */
export interface OutputItem {
  readonly id: string
  readonly text: string
}

/** An output message item. */
export const message = (id: string, status: "in_progress" | "completed" | "incomplete", text: string | undefined) => ({
  id,
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
    /** The output messages, the last one the answer (its status is the response's). */
    readonly items?: ReadonlyArray<OutputItem> | undefined
    readonly result?: AgentEvent.RunResult | undefined
    readonly error?: { readonly type?: string | undefined; readonly code: string; readonly message: string } | undefined
  }
) => {
  const request = asked.request
  const items = end.status === "in_progress" || end.status === "failed" ? [] : end.items ?? []
  const output = items.map((item, i) =>
    message(item.id, i < items.length - 1 || end.status === "completed" ? "completed" : "incomplete", item.text)
  )
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
    // As OpenAI's: every output message's text, in order (what the deltas of a stream add up to).
    output_text: items.map((item) => item.text).join(""),
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
 *
 * Each root model call whose text is streamed is an output message of its own, added at its first delta and done
 * when the call replies with tool calls (its text was not the answer), or when the next call's text begins. At the
 * end, the message still open is the answer's when its text is the run's answer; else it is done as it is, and the
 * answer follows as a message of its own, sent whole (a structured answer, one made by sub-agents, a rewrite). So
 * the deltas, the output messages and `output_text` always agree. Used for a response not streamed too (its frames
 * dropped): both list the same messages.
 */
export const framer = (asked: Asked) => {
  let sequence = 0
  const frame = (type: string, body: Record<string, unknown>): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...body })}\n\n`
  const done: Array<OutputItem> = []
  let open: { readonly step: string; readonly id: string; text: string } | undefined
  const at = (id: string) => ({ item_id: id, output_index: done.length, content_index: 0 })
  const openItem = (step: string): string => {
    const id = asked.messageId(done.length)
    open = { step, id, text: "" }
    return frame("response.output_item.added", { output_index: done.length, item: message(id, "in_progress", undefined) }) +
      frame("response.content_part.added", { ...at(id), part: textPart("") })
  }
  const delta = (text: string): string => frame("response.output_text.delta", { ...at(open!.id), delta: text, logprobs: [] })
  /** The open message's text, its part and itself done. */
  const closeItem = (status: "completed" | "incomplete"): string => {
    const { id, text } = open!
    const frames = frame("response.output_text.done", { ...at(id), text, logprobs: [] }) +
      frame("response.content_part.done", { ...at(id), part: textPart(text) }) +
      frame("response.output_item.done", { output_index: done.length, item: message(id, status, text) })
    done.push({ id, text })
    open = undefined
    return frames
  }
  return {
    /** `response.created`, then `response.in_progress`. */
    start: (): string => {
      const response = responseObject(asked, { status: "in_progress" })
      return frame("response.created", { response }) + frame("response.in_progress", { response })
    },
    /** A piece of the text of the root model call `step`. */
    delta: (step: string, text: string): string => {
      let frames = open !== undefined && open.step !== step ? closeItem("completed") : ""
      if (open === undefined) frames += openItem(step)
      open!.text += text
      return frames + delta(text)
    },
    /** The root model call `step` replied: with tool calls, its text was said on the way, not the answer. */
    replied: (step: string, toolCalls: boolean): string => open !== undefined && open.step === step && toolCalls ? closeItem("completed") : "",
    /** The answer's message done, then `response.completed`, or `response.incomplete` (a cancelled response too). */
    end: (ending: Ending, answer: string, result: AgentEvent.RunResult): string => {
      let frames = open !== undefined && open.text !== answer ? closeItem("completed") : ""
      // A run stopped (a budget) after a call that said its answer and called tools: that message is the answer.
      const said = open === undefined && answer !== "" && done.at(-1)?.text === answer
      if (open === undefined && !said) {
        frames += openItem("")
        if (answer !== "") {
          open!.text = answer
          frames += delta(answer)
        }
      }
      if (!said) frames += closeItem(ending.status === "completed" ? "completed" : "incomplete")
      // The `openai` package's accumulator knows no `response.cancelled` event.
      return frames + frame(ending.status === "completed" ? "response.completed" : "response.incomplete", {
        response: responseObject(asked, { status: ending.status, reason: ending.reason, items: done, result })
      })
    },
    /** The output messages done so far (all of them after `end`). */
    items: (): ReadonlyArray<OutputItem> => done,
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
