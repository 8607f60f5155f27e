/**
 * The events of a streamed `POST /v1/responses` → `Model.Chunk`s (one choice, index 0), which `Model.accumulate`
 * folds into a `Model.Response` as it does the chat wire's.
 *
 * - `response.output_text.delta` → text; `response.reasoning_summary_text.delta` / `response.reasoning_text.delta`
 *   → reasoning (the parts of a summary, and the texts of two messages, joined by a blank line).
 * - `response.output_item.added` of a `function_call` → a tool call's header (`call_id`, `name`);
 *   `response.function_call_arguments.delta` → its arguments. A server that sends an item's text or arguments only
 *   whole, in `response.output_item.done`, is read there.
 * - `response.output_item.done` of a `reasoning` item → the item, verbatim from the raw JSON (its `encrypted_content`
 *   is the provider's), carried on the `Finish` chunk as the choice's `reasoningItems`.
 * - `response.completed` / `response.incomplete` → the finish reason and the usage; the stream is then complete.
 *   `response.failed` and `error` → the `ModelError` of their code (the caller turns `errorOf` into it).
 */
import type * as Model from "../../../core/Model.js"
import type * as Wire from "./wire.js"

/** What ends a stream: an answer, or the error fields of a failed response. */
export type Terminal =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Failed"; readonly code: string | number | undefined; readonly message: string }

const usageOf = (wire: Wire.ResponsesUsage | null | undefined): Model.Usage | undefined => {
  if (wire === null || wire === undefined) return undefined
  const inputTokens = wire.input_tokens ?? 0
  const outputTokens = wire.output_tokens ?? 0
  const cached = wire.input_tokens_details?.cached_tokens
  return {
    inputTokens,
    outputTokens,
    totalTokens: wire.total_tokens ?? inputTokens + outputTokens,
    ...(cached !== null && cached !== undefined ? { cachedInputTokens: cached } : {})
  }
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Turns the decoded events of one streamed response into chunks (mutable state: one decoder per stream). */
export class ResponsesDecoder {
  private metadataSent = false
  /** A tool call's index by its output index (or item id when a server leaves the index out). */
  private readonly tools = new Map<string, { readonly toolIndex: number; streamed: boolean }>()
  /** Items whose text (or reasoning) came in deltas: their `output_item.done` says it again, not to be added twice. */
  private readonly streamedText = new Set<string>()
  private readonly reasoningItems: Array<Model.ReasoningItem> = []
  private textItem: string | undefined = undefined
  private reasoningKey: string | undefined = undefined
  private sawText = false
  private sawReasoning = false
  /** Set once the stream has said how it ends (`response.completed`, `incomplete` or `failed`, or `error`). */
  terminal: Terminal | undefined = undefined

  constructor(private readonly fallbackModel: string) {}

  private metadata(out: Array<Model.Chunk>, response: Wire.ResponsesObject | null | undefined): void {
    if (this.metadataSent) return
    this.metadataSent = true
    out.push({ _tag: "Metadata", id: response?.id ?? "", model: response?.model ?? this.fallbackModel })
  }

  private text(out: Array<Model.Chunk>, item: string, text: string): void {
    if (text === "") return
    // Two messages of one response (a commentary, then the answer) are one text, a paragraph apart.
    const separator = this.sawText && this.textItem !== item ? "\n\n" : ""
    this.textItem = item
    this.sawText = true
    out.push({ _tag: "TextDelta", index: 0, text: separator + text })
  }

  private reasoning(out: Array<Model.Chunk>, key: string, text: string): void {
    if (text === "") return
    const separator = this.sawReasoning && this.reasoningKey !== key ? "\n\n" : ""
    this.reasoningKey = key
    this.sawReasoning = true
    out.push({ _tag: "ReasoningDelta", index: 0, text: separator + text })
  }

  private toolKey(event: Wire.ResponsesEvent): string {
    return event.output_index !== null && event.output_index !== undefined
      ? `#${event.output_index}`
      : `id:${event.item_id ?? event.item?.id ?? ""}`
  }

  /**
   * The chunks of one event, appended to `out`; `raw` is the event's JSON, for the items kept verbatim. Answers how
   * the stream ended once an event said so.
   */
  event(event: Wire.ResponsesEvent, raw: Record<string, unknown>, out: Array<Model.Chunk>): Terminal | undefined {
    if (this.terminal === undefined) this.onEvent(event, raw, out)
    return this.terminal
  }

  private onEvent(event: Wire.ResponsesEvent, raw: Record<string, unknown>, out: Array<Model.Chunk>): void {
    this.metadata(out, event.response)
    switch (event.type) {
      case "response.output_text.delta":
        this.streamedText.add(event.item_id ?? "")
        return this.text(out, event.item_id ?? "", event.delta ?? "")
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta":
        this.streamedText.add(event.item_id ?? "")
        return this.reasoning(out, `${event.item_id ?? ""}/${event.summary_index ?? event.content_index ?? 0}`, event.delta ?? "")
      case "response.output_item.added": {
        const item = event.item
        if (item?.type !== "function_call") return
        const toolIndex = this.tools.size
        const args = item.arguments ?? ""
        this.tools.set(this.toolKey(event), { toolIndex, streamed: args !== "" })
        out.push({
          _tag: "ToolCallDelta",
          index: 0,
          toolIndex,
          ...(item.call_id !== null && item.call_id !== undefined ? { id: item.call_id } : {}),
          ...(item.name !== null && item.name !== undefined ? { name: item.name } : {}),
          arguments: args
        })
        return
      }
      case "response.function_call_arguments.delta": {
        const tool = this.tools.get(this.toolKey(event))
        if (tool === undefined || event.delta === null || event.delta === undefined) return
        tool.streamed = true
        out.push({ _tag: "ToolCallDelta", index: 0, toolIndex: tool.toolIndex, arguments: event.delta })
        return
      }
      case "response.output_item.done": {
        const item = event.item
        if (item === null || item === undefined) return
        if (item.type === "reasoning") {
          // Verbatim: valet cannot read the encrypted content, only send it back.
          if (isObject(raw.item)) this.reasoningItems.push(raw.item)
          if (!this.streamedText.has(item.id ?? "")) {
            const parts = item.summary ?? []
            for (let i = 0; i < parts.length; i++) this.reasoning(out, `${item.id ?? ""}/${i}`, parts[i]!.text ?? "")
          }
          return
        }
        if (item.type === "message" && !this.streamedText.has(item.id ?? "")) {
          const whole = (item.content ?? []).map((part) => (part.type === "output_text" ? part.text ?? "" : "")).join("")
          return this.text(out, item.id ?? "", whole)
        }
        if (item.type === "function_call") {
          const key = this.toolKey(event)
          const tool = this.tools.get(key)
          if (tool === undefined) {
            // A call announced only when done.
            const toolIndex = this.tools.size
            this.tools.set(key, { toolIndex, streamed: true })
            out.push({
              _tag: "ToolCallDelta",
              index: 0,
              toolIndex,
              ...(item.call_id !== null && item.call_id !== undefined ? { id: item.call_id } : {}),
              ...(item.name !== null && item.name !== undefined ? { name: item.name } : {}),
              arguments: item.arguments ?? ""
            })
          } else if (!tool.streamed && item.arguments !== null && item.arguments !== undefined && item.arguments !== "") {
            tool.streamed = true
            out.push({ _tag: "ToolCallDelta", index: 0, toolIndex: tool.toolIndex, arguments: item.arguments })
          }
        }
        return
      }
      case "response.completed":
      case "response.incomplete": {
        const response = event.response
        const reason = response?.incomplete_details?.reason
        const finishReason: Model.FinishReason = reason === "max_output_tokens"
          ? "length"
          : reason === "content_filter"
          ? "content_filter"
          : this.tools.size > 0
          ? "tool_calls"
          : event.type === "response.incomplete"
          ? "other"
          : "stop"
        out.push({
          _tag: "Finish",
          index: 0,
          finishReason,
          ...(this.reasoningItems.length > 0 ? { reasoningItems: this.reasoningItems } : {})
        })
        const usage = usageOf(response?.usage)
        if (usage !== undefined) out.push({ _tag: "Usage", usage })
        this.terminal = { _tag: "Done" }
        return
      }
      case "response.failed": {
        const error = event.response?.error
        this.terminal = {
          _tag: "Failed",
          code: error?.code ?? undefined,
          message: error?.message ?? "the response failed, and the server said no more"
        }
        return
      }
    }
  }
}
