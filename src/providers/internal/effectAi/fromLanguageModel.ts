/**
 * `@effect/ai` `LanguageModel` → valet `Model`: requests out, responses and stream parts back (see
 * `src/EffectAi.ts`). Only `EffectAi.ts` imports this file, so `@effect/ai` stays an optional peer.
 */
import { type AiError, LanguageModel, Prompt, type Response, Tool, type Toolkit } from "@effect/ai"
import { Clock, Effect, Schema, Stream } from "effect"
import * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import * as Errors from "../openai/errors.js"
import { paramsOf } from "./toLanguageModel.js"


/** Any JSON object: the parameters of a tool known only by its JSON schema. */
const AnyObject = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))

/**
 * A toolkit of the request's tool definitions. valet runs the tools itself (the calls go back to the
 * architecture: `disableToolCallResolution`), so no handler is ever called; the JSON schema goes to the provider
 * unchanged through the `jsonSchema` annotation.
 */
const toolkitOf = (definitions: ReadonlyArray<Model.ToolDefinition>): Toolkit.WithHandler<Record<string, Tool.Any>> => {
  const tools: Record<string, Tool.Any> = {}
  for (const definition of definitions) {
    tools[definition.name] = Tool.make(definition.name, { description: definition.description }).setParameters(
      AnyObject.annotations({ jsonSchema: definition.parameters })
    ) as unknown as Tool.Any
  }
  return {
    tools,
    handle: (name) => Effect.dieMessage(`valet/EffectAi: the tool ${String(name)} is run by the valet architecture, not by @effect/ai`)
  }
}

/** valet messages (or a raw prompt) as an `@effect/ai` prompt. */
const toPrompt = (request: Model.Request): Prompt.Prompt => {
  if (request.messages === undefined) return Prompt.make(request.prompt ?? "")
  const encoded: Array<Prompt.MessageEncoded> = []
  for (const message of request.messages) {
    switch (message.role) {
      case "system":
        encoded.push({ role: "system", content: message.content })
        break
      case "user":
        encoded.push({ role: "user", content: message.content })
        break
      case "assistant": {
        const parts: Array<Prompt.AssistantMessagePartEncoded> = []
        if (message.reasoning !== undefined && message.reasoning !== "") parts.push({ type: "reasoning", text: message.reasoning })
        if (message.content !== "") parts.push({ type: "text", text: message.content })
        for (const call of message.toolCalls ?? []) {
          parts.push({ type: "tool-call", id: call.id, name: call.name, params: paramsOf(call.arguments), providerExecuted: false })
        }
        encoded.push({ role: "assistant", content: parts })
        break
      }
      case "tool":
        encoded.push({
          role: "tool",
          content: [{ type: "tool-result", id: message.toolCallId, name: message.name, isFailure: false, result: message.content, providerExecuted: false }]
        })
        break
    }
  }
  return Prompt.make(encoded)
}

const toolChoiceOf = (choice: Model.ToolChoice | undefined): LanguageModel.ToolChoice<string> =>
  choice === undefined ? "auto" : typeof choice === "string" ? choice : { tool: choice.name }

const fromFinishReason = (reason: Response.FinishReason): Model.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool-calls":
      return "tool_calls"
    case "content-filter":
      return "content_filter"
    default:
      return "other"
  }
}

const fromUsage = (usage: Response.Usage): Model.Usage => {
  const inputTokens = usage.inputTokens ?? 0
  const outputTokens = usage.outputTokens ?? 0
  return { inputTokens, outputTokens, totalTokens: usage.totalTokens ?? inputTokens + outputTokens }
}

/** An `@effect/ai` error as the `ModelError` it means (HTTP statuses as `OpenAiCompatible` maps them). */
const toModelError = (error: AiError.AiError, now: number): ModelError.ModelError => {
  switch (error._tag) {
    case "HttpRequestError":
      return new ModelError.Transport({ message: error.message })
    case "HttpResponseError":
      return Errors.fromResponse({
        status: error.response.status,
        headers: error.response.headers,
        body: error.body ?? error.description ?? "",
        model: "",
        now
      })
    case "MalformedOutput":
      return new ModelError.MalformedResponse({ message: error.message, body: error.description ?? "" })
    case "MalformedInput":
      return new ModelError.InvalidRequest({ status: 0, message: error.message })
    case "UnknownError":
      return ModelError.isModelError(error.cause) ? error.cause : new ModelError.ServerError({ status: 0, message: error.message })
  }
}

const mapAiError = <A, R>(effect: Effect.Effect<A, AiError.AiError, R>): Effect.Effect<A, ModelError.ModelError, R> =>
  Effect.catchAll(effect, (error) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(toModelError(error, now))))

const metadataOf = (parts: ReadonlyArray<Response.AnyPart>) => {
  for (const part of parts) {
    if (part.type === "response-metadata") {
      return { id: part.id._tag === "Some" ? part.id.value : "", model: part.modelId._tag === "Some" ? part.modelId.value : "" }
    }
  }
  return { id: "", model: "" }
}

/** The valet `Model` service over the `LanguageModel` in context. */
export const makeModel: Effect.Effect<Model.Service, never, LanguageModel.LanguageModel> = Effect.map(
  LanguageModel.LanguageModel,
  (language) => {
    const optionsOf = (request: Model.Request) => ({
      prompt: toPrompt(request),
      toolkit: toolkitOf(request.tools ?? []),
      toolChoice: toolChoiceOf(request.toolChoice),
      disableToolCallResolution: true as const
    })

    const one = (request: Model.Request, index: number) =>
      Effect.map(language.generateText(optionsOf(request)), (response) => {
        const reasoning = response.reasoningText
        const choice: Model.Choice = {
          index,
          text: response.text,
          toolCalls: response.toolCalls.map((call) => ({ id: call.id, name: call.name, arguments: JSON.stringify(call.params) ?? "{}" })),
          ...(reasoning !== undefined && reasoning !== "" ? { reasoning } : {}),
          finishReason: fromFinishReason(response.finishReason)
        }
        return { choice, usage: fromUsage(response.usage), ...metadataOf(response.content) }
      })

    const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
      mapAiError(
        Effect.map(
          // The interface has no `n`: one call per choice.
          Effect.forEach(Array.from({ length: request.n ?? 1 }, (_, i) => i), (i) => one(request, i), { concurrency: "unbounded" }),
          (answers): Model.Response => ({
            id: answers[0]!.id,
            model: answers[0]!.model,
            choices: answers.map((answer) => answer.choice),
            usage: answers.reduce((sum, answer) => Model.addUsage(sum, answer.usage), Model.emptyUsage)
          })
        )
      )

    const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
      Stream.suspend(() => {
        const toolIndex = new Map<string, number>()
        const toolIndexOf = (id: string) => {
          let index = toolIndex.get(id)
          if (index === undefined) {
            index = toolIndex.size
            toolIndex.set(id, index)
          }
          return index
        }
        return language.streamText(optionsOf(request)).pipe(
          Stream.catchAll((error) => Stream.fromEffect(mapAiError(Effect.fail(error)))),
          Stream.mapConcat((part): Array<Model.Chunk> => {
            switch (part.type) {
              case "response-metadata":
                return [{ _tag: "Metadata", id: part.id._tag === "Some" ? part.id.value : "", model: part.modelId._tag === "Some" ? part.modelId.value : "" }]
              case "text-delta":
                return [{ _tag: "TextDelta", index: 0, text: part.delta }]
              case "reasoning-delta":
                return [{ _tag: "ReasoningDelta", index: 0, text: part.delta }]
              case "tool-call":
                // Whole calls only: `tool-params-*` parts are previews of the same call.
                return [{
                  _tag: "ToolCallDelta",
                  index: 0,
                  toolIndex: toolIndexOf(part.id),
                  id: part.id,
                  name: part.name,
                  arguments: JSON.stringify(part.params) ?? "{}"
                }]
              case "finish":
                return [
                  { _tag: "Finish", index: 0, finishReason: fromFinishReason(part.reason) },
                  { _tag: "Usage", usage: fromUsage(part.usage) }
                ]
              default:
                return []
            }
          })
        )
      })

    return Model.make({ generate, stream })
  }
)

