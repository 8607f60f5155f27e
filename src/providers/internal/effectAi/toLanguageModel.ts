/**
 * valet `Model` → `effect/ai` `LanguageModel`: prompts, tools and sampling options out, parts back (see
 * `providers/EffectAi.ts`). Only `EffectAi.ts` imports this file, so the root entry never loads `effect/ai`.
 */
import { Effect, Result, Stream } from "effect"
import { type AiError, LanguageModel, Prompt, type Response, Tool } from "effect/ai"
import * as Model from "../../../core/Model.js"
import { cacheControlOf } from "./cacheControl.js"
import { Config, mergeSampling, type Sampling } from "./config.js"
import { invalidRequest, toAiError } from "./errors.js"
import { fromFilePart } from "./parts.js"
import { paramsOf } from "./params.js"

/** How `languageModel` builds its service. */
export interface Options {
  /** Sampling options of every call, under any `Config` in the calling context. */
  readonly config?: Sampling | undefined
}

const resultText = (part: Prompt.ToolResultPart): string =>
  typeof part.result === "string" ? part.result : JSON.stringify(part.result) ?? "null"

/**
 * A tool result as a valet tool message: with a `modelOutput` (what effect/ai sends in place of `result`), its text
 * parts are the text and its files (images, audio, PDFs) the message's parts, each named in the text where it was;
 * or what is wrong with one of them.
 */
const toolMessage = (part: Prompt.ToolResultPart): Result.Result<Model.ToolMessage, string> => {
  if (part.modelOutput === undefined || part.modelOutput.length === 0) {
    return Result.succeed(Model.toolResult(part.id, part.name, resultText(part)))
  }
  const lines: Array<string> = []
  const parts: Array<Model.Part> = []
  for (let j = 0; j < part.modelOutput.length; j++) {
    const output = part.modelOutput[j]!
    if (output.type === "text") {
      lines.push(output.text)
      continue
    }
    const converted = fromFilePart(output)
    if (Result.isFailure(converted)) return Result.fail(`tool result ${part.id}, output part ${j}: ${converted.failure}`)
    parts.push(converted.success)
    lines.push(`[${output.mediaType}${output.fileName === undefined ? "" : ` ${output.fileName}`}: attached]`)
  }
  return Result.succeed(Model.toolResult(part.id, part.name, lines.join("\n"), parts))
}

/** An `effect/ai` prompt as valet messages: a user message's files become parts; an assistant's have no place. */
const toMessages = (prompt: Prompt.Prompt, method: string): Result.Result<Array<Model.Message>, AiError.AiError> => {
  const messages: Array<Model.Message> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        messages.push(Model.system(message.content, { cacheControl: cacheControlOf(message.options) }))
        break
      case "user": {
        // Text only and unmarked: one string, as before parts (the common case stays a plain string).
        if (message.content.every((part) => part.type === "text" && cacheControlOf(part.options) === undefined)) {
          messages.push(Model.user(message.content.map((part) => (part.type === "text" ? part.text : "")).join("")))
          break
        }
        const parts: Array<Model.Part> = []
        for (let j = 0; j < message.content.length; j++) {
          const part = message.content[j]!
          if (part.type === "text") {
            parts.push(Model.textPart(part.text, { cacheControl: cacheControlOf(part.options) }))
            continue
          }
          const converted = fromFilePart(part)
          if (Result.isFailure(converted)) {
            return Result.fail(invalidRequest(method, "prompt", `message ${messages.length}, part ${j}: ${converted.failure}`))
          }
          parts.push(converted.success)
        }
        messages.push(Model.user(parts))
        break
      }
      case "assistant": {
        let text = ""
        let reasoning = ""
        const calls: Array<Model.ToolCall> = []
        const results: Array<Model.ToolMessage> = []
        for (const part of message.content) {
          switch (part.type) {
            case "text":
              text += part.text
              break
            case "reasoning":
              reasoning += part.text
              break
            case "tool-call":
              calls.push({ id: part.id, name: part.name, arguments: JSON.stringify(part.params) ?? "{}" })
              break
            case "tool-result": {
              const result = toolMessage(part)
              if (Result.isFailure(result)) return Result.fail(invalidRequest(method, "prompt", result.failure))
              results.push(result.success)
              break
            }
            case "tool-approval-request":
              // Approvals are settled by `LanguageModel` before a provider is called.
              break
            case "file":
              return Result.fail(invalidRequest(method, "prompt", `an assistant message holds a file (${part.mediaType}): valet sends text only`))
          }
        }
        const assistant = Model.assistant(text, calls)
        messages.push(reasoning !== "" ? { ...assistant, reasoning } : assistant, ...results)
        break
      }
      case "tool":
        for (const part of message.content) {
          if (part.type !== "tool-result") continue
          const result = toolMessage(part)
          if (Result.isFailure(result)) return Result.fail(invalidRequest(method, "prompt", result.failure))
          messages.push(result.success)
        }
        break
    }
  }
  return Result.succeed(messages)
}

/** The valet request for what `LanguageModel` asks of a provider, with the sampling options in force. */
const toRequest = (
  options: LanguageModel.ProviderOptions,
  sampling: Sampling,
  method: string
): Result.Result<Model.Request, AiError.AiError> =>
  Result.flatMap(toMessages(options.prompt, method), (messages) => {
    const tools: Array<Model.ToolDefinition> = []
    for (const tool of options.tools) {
      if (Tool.isProviderDefined(tool)) {
        return Result.fail(invalidRequest(method, "tools", `the provider-defined tool ${tool.name} exists only on its own provider's API`))
      }
      tools.push({ name: tool.name, description: Tool.getDescription(tool) ?? "", parameters: Tool.getJsonSchema(tool) })
    }
    const choice = options.toolChoice
    const toolChoice: Model.ToolChoice | undefined = tools.length === 0
      ? undefined
      : typeof choice === "string"
      ? choice
      : "tool" in choice
      ? { name: choice.tool }
      // `oneOf`: `LanguageModel` already left only the allowed tools in `options.tools`.
      : choice.mode === "required"
      ? "required"
      : "auto"
    const format = options.responseFormat
    const { extra, maxTokens, seed, stop, temperature, topP } = sampling
    return Result.succeed({
      messages,
      ...(tools.length > 0 ? { tools } : {}),
      ...(toolChoice !== undefined ? { toolChoice } : {}),
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { topP } : {}),
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...(stop !== undefined ? { stop } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(extra !== undefined ? { extra } : {}),
      ...(format.type === "json"
        ? {
          responseFormat: {
            type: "json_schema" as const,
            name: format.objectName,
            schema: LanguageModel.defaultCodecTransformer(format.schema).jsonSchema
          }
        }
        : {})
    })
  })

const finishReasonOf = (reason: Model.FinishReason): Response.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
      return "tool-calls"
    case "content_filter":
      return "content-filter"
    case "other":
      return "other"
  }
}

const usageOf = (usage: Model.Usage): Response.FinishPartEncoded["usage"] =>
  usage.cachedInputTokens === undefined && usage.cacheWriteTokens === undefined
    ? { inputTokens: { total: usage.inputTokens }, outputTokens: { total: usage.outputTokens } }
    : {
      inputTokens: {
        total: usage.inputTokens,
        uncached: usage.inputTokens - (usage.cachedInputTokens ?? 0) - (usage.cacheWriteTokens ?? 0),
        ...(usage.cachedInputTokens !== undefined ? { cacheRead: usage.cachedInputTokens } : {}),
        ...(usage.cacheWriteTokens !== undefined ? { cacheWrite: usage.cacheWriteTokens } : {})
      },
      outputTokens: { total: usage.outputTokens }
    }

const toParts = (response: Model.Response): Array<Response.PartEncoded> => {
  const choice = response.choices[0]
  const parts: Array<Response.PartEncoded> = [{ type: "response-metadata", id: response.id, modelId: response.model }]
  if (choice !== undefined) {
    if (choice.reasoning !== undefined && choice.reasoning !== "") parts.push({ type: "reasoning", text: choice.reasoning })
    if (choice.text !== "") parts.push({ type: "text", text: choice.text })
    for (const call of choice.toolCalls) {
      parts.push({ type: "tool-call", id: call.id, name: call.name, params: paramsOf(call.arguments), providerExecuted: false })
    }
  }
  parts.push({
    type: "finish",
    reason: choice !== undefined ? finishReasonOf(choice.finishReason) : "unknown",
    usage: usageOf(response.usage)
  })
  return parts
}

/** Turns valet chunks (choice 0) into `effect/ai` stream parts: start / delta / end blocks, whole tool calls, one `finish`. */
class PartWriter {
  private textOpen = false
  private reasoningOpen = false
  private readonly tools = new Map<number, { id: string; name: string; args: string; started: boolean }>()
  private finish: Model.FinishReason | undefined = undefined
  private usage: Model.Usage = Model.emptyUsage
  private closed = false

  write(chunk: Model.Chunk, out: Array<Response.StreamPartEncoded>): void {
    switch (chunk._tag) {
      case "Metadata":
        out.push({ type: "response-metadata", id: chunk.id, modelId: chunk.model })
        return
      case "TextDelta":
        if (chunk.index !== 0 || chunk.text === "") return
        if (!this.textOpen) out.push({ type: "text-start", id: "text_0" })
        this.textOpen = true
        out.push({ type: "text-delta", id: "text_0", delta: chunk.text })
        return
      case "ReasoningDelta":
        if (chunk.index !== 0) return
        if (!this.reasoningOpen) out.push({ type: "reasoning-start", id: "reasoning_0" })
        this.reasoningOpen = true
        out.push({ type: "reasoning-delta", id: "reasoning_0", delta: chunk.text })
        return
      case "ToolCallDelta": {
        if (chunk.index !== 0) return
        let tool = this.tools.get(chunk.toolIndex)
        if (tool === undefined) {
          tool = { id: chunk.id ?? `call_0_${chunk.toolIndex}`, name: chunk.name ?? "", args: "", started: false }
          this.tools.set(chunk.toolIndex, tool)
        }
        if (tool.name === "" && chunk.name !== undefined) tool.name = chunk.name
        if (!tool.started && tool.name !== "") {
          tool.started = true
          out.push({ type: "tool-params-start", id: tool.id, name: tool.name, providerExecuted: false })
          if (tool.args !== "") out.push({ type: "tool-params-delta", id: tool.id, delta: tool.args })
        }
        tool.args += chunk.arguments
        if (tool.started && chunk.arguments !== "") out.push({ type: "tool-params-delta", id: tool.id, delta: chunk.arguments })
        return
      }
      case "Finish":
        if (chunk.index !== 0) return
        this.finish = chunk.finishReason
        this.close(out)
        return
      case "Usage":
        this.usage = chunk.usage
        return
    }
  }

  /** Ends the open blocks and sends the assembled tool calls (once). */
  private close(out: Array<Response.StreamPartEncoded>): void {
    if (this.closed) return
    this.closed = true
    if (this.reasoningOpen) out.push({ type: "reasoning-end", id: "reasoning_0" })
    if (this.textOpen) out.push({ type: "text-end", id: "text_0" })
    for (const tool of this.tools.values()) {
      if (tool.started) out.push({ type: "tool-params-end", id: tool.id })
      out.push({ type: "tool-call", id: tool.id, name: tool.name, params: paramsOf(tool.args), providerExecuted: false })
    }
  }

  end(out: Array<Response.StreamPartEncoded>): void {
    this.close(out)
    out.push({
      type: "finish",
      reason: this.finish !== undefined ? finishReasonOf(this.finish) : this.tools.size > 0 ? "tool-calls" : "stop",
      usage: usageOf(this.usage)
    })
  }
}

/** The `LanguageModel` service over the valet `Model` in context. */
export const makeLanguageModel = (options: Options = {}): Effect.Effect<LanguageModel.LanguageModel, never, Model.Model> =>
  Effect.flatMap(Model.Model, (model) => {
    const defaults = options.config ?? {}
    /** The request for this call: the layer's sampling defaults under the calling fiber's `Config`. */
    const requestOf = (provider: LanguageModel.ProviderOptions, method: string) =>
      Effect.flatMap(Config, (config) => Effect.fromResult(toRequest(provider, mergeSampling(defaults, config), method)))
    return LanguageModel.make({
      generateText: (provider) =>
        Effect.flatMap(requestOf(provider, "generateText"), (request) =>
          model.generate(request).pipe(Effect.mapBoth({ onFailure: toAiError("generateText"), onSuccess: toParts }))),
      streamText: (provider) =>
        Stream.unwrap(Effect.map(requestOf(provider, "streamText"), (request) => {
          const writer = new PartWriter()
          return model.stream(request).pipe(
            Stream.mapError(toAiError("streamText")),
            Stream.map((chunk) => {
              const out: Array<Response.StreamPartEncoded> = []
              writer.write(chunk, out)
              return out
            }),
            Stream.concat(Stream.suspend(() => {
              const out: Array<Response.StreamPartEncoded> = []
              writer.end(out)
              return Stream.make(out)
            })),
            Stream.flattenIterable
          )
        }))
    })
  })
