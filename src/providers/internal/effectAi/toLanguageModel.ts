/**
 * valet `Model` → `@effect/ai` `LanguageModel`: prompts and tools out, parts back (see `src/EffectAi.ts`). Only
 * `EffectAi.ts` imports this file, so `@effect/ai` stays an optional peer.
 */
import { AiError, LanguageModel, type Prompt, type Response, Tool } from "@effect/ai"
import { Effect, Either, JSONSchema, Stream } from "effect"
import * as Model from "../../../core/Model.js"
import type * as ModelError from "../../../core/ModelError.js"


const fail = (method: string, description: string) => new AiError.MalformedInput({ module: "valet/EffectAi", method, description })

const toAiError = (method: string) => (error: ModelError.ModelError): AiError.AiError =>
  new AiError.UnknownError({ module: "valet/EffectAi", method, description: `${error._tag}: ${error.message}`, cause: error })

const resultText = (result: unknown): string => (typeof result === "string" ? result : JSON.stringify(result) ?? "null")

/** An `@effect/ai` prompt as valet messages. Files have no place in a chat-completions text message. */
const toMessages = (prompt: Prompt.Prompt, method: string): Either.Either<Array<Model.Message>, AiError.MalformedInput> => {
  const messages: Array<Model.Message> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        messages.push(Model.system(message.content))
        break
      case "user": {
        let text = ""
        for (const part of message.content) {
          if (part.type === "file") return Either.left(fail(method, `a user message holds a file (${part.mediaType}): valet sends text only`))
          text += part.text
        }
        messages.push(Model.user(text))
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
            case "tool-result":
              results.push(Model.toolResult(part.id, part.name, resultText(part.result)))
              break
            case "file":
              return Either.left(fail(method, `an assistant message holds a file (${part.mediaType}): valet sends text only`))
          }
        }
        const assistant = Model.assistant(text, calls)
        messages.push(reasoning !== "" ? { ...assistant, reasoning } : assistant, ...results)
        break
      }
      case "tool":
        for (const part of message.content) messages.push(Model.toolResult(part.id, part.name, resultText(part.result)))
        break
    }
  }
  return Either.right(messages)
}

/** The valet request for what `LanguageModel` asks of a provider. */
const toRequest = (options: LanguageModel.ProviderOptions, method: string): Either.Either<Model.Request, AiError.MalformedInput> =>
  Either.flatMap(toMessages(options.prompt, method), (messages) => {
    const tools: Array<Model.ToolDefinition> = []
    for (const tool of options.tools) {
      if (Tool.isProviderDefined(tool)) {
        return Either.left(fail(method, `the provider-defined tool ${tool.name} exists only on its own provider's API`))
      }
      tools.push({
        name: tool.name,
        description: Tool.getDescription(tool as Tool.Any & Parameters<typeof Tool.getDescription>[0]) ?? "",
        parameters: Tool.getJsonSchema(tool as Tool.Any & Parameters<typeof Tool.getJsonSchema>[0]) as unknown as Model.JsonObject
      })
    }
    const choice = options.toolChoice
    const toolChoice: Model.ToolChoice | undefined = tools.length === 0
      ? undefined
      : typeof choice === "string"
      ? choice
      : "tool" in choice
      ? { name: choice.tool }
      : choice.mode === "required"
      ? "required"
      : "auto"
    const format = options.responseFormat
    return Either.right({
      messages,
      ...(tools.length > 0 ? { tools } : {}),
      ...(toolChoice !== undefined ? { toolChoice } : {}),
      ...(format.type === "json"
        ? {
          responseFormat: {
            type: "json_schema" as const,
            name: format.objectName,
            schema: JSONSchema.make(format.schema) as unknown as Model.JsonObject
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

/** The params of a tool call: its JSON, `{}` for an empty text, the text itself when it is not JSON (then the tool's schema refuses it, with a parse error naming it). */
export const paramsOf = (text: string): unknown => {
  if (text.trim() === "") return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const usageOf = (usage: Model.Usage) => ({
  inputTokens: usage.inputTokens,
  outputTokens: usage.outputTokens,
  totalTokens: usage.totalTokens
})

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

/** Turns valet chunks (choice 0) into `@effect/ai` stream parts: start / delta / end blocks, whole tool calls, one `finish`. */
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
export const makeLanguageModel: Effect.Effect<LanguageModel.Service, never, Model.Model> = Effect.flatMap(
  Model.Model,
  (model) =>
    LanguageModel.make({
      generateText: (options) =>
        Either.match(toRequest(options, "generateText"), {
          onLeft: (error) => Effect.fail(error),
          onRight: (request) =>
            model.generate(request).pipe(Effect.mapBoth({ onFailure: toAiError("generateText"), onSuccess: toParts }))
        }),
      streamText: (options) =>
        Either.match(toRequest(options, "streamText"), {
          onLeft: (error) => Stream.fail(error),
          onRight: (request) =>
            Stream.suspend(() => {
              const writer = new PartWriter()
              return model.stream(request).pipe(
                Stream.mapError(toAiError("streamText")),
                Stream.mapConcat((chunk) => {
                  const out: Array<Response.StreamPartEncoded> = []
                  writer.write(chunk, out)
                  return out
                }),
                Stream.concat(Stream.suspend(() => {
                  const out: Array<Response.StreamPartEncoded> = []
                  writer.end(out)
                  return Stream.fromIterable(out)
                }))
              )
            })
        })
    })
)

