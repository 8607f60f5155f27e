/**
 * `effect/ai` `LanguageModel` → valet `Model`: requests out, responses and stream parts back (see
 * `providers/EffectAi.ts`). Only `EffectAi.ts` imports this file, so the root entry never loads `effect/ai`.
 */
import { Clock, Effect, Stream } from "effect"
import { type AiError, LanguageModel, Prompt, type Response, Tool, type Toolkit } from "effect/ai"
import type { JsonSchema } from "effect/JsonSchema"
import * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import * as Errors from "../openai/errors.js"
import { cacheOptions } from "./cacheControl.js"
import { type Override, type SamplingAdapter, samplingOf, streamWith } from "./config.js"
import { fromAiError } from "./errors.js"
import { toPromptContent, toPromptPart } from "./parts.js"
import { paramsOf } from "./params.js"

/** How `fromLanguageModel` reaches what the generic `LanguageModel` interface has no room for. */
export interface Options {
  /**
   * Runs a call with the request's sampling options in force: typically the provider's `withConfigOverride`
   * mapped to its field names. Without it the options are not sent (the interface has no place for them).
   */
  readonly sampling?: SamplingAdapter | undefined
}

/** A tool known only by its JSON schema (its parameters decode as `unknown`, so a call needs no services). */
const dynamicTool = (definition: Model.ToolDefinition) =>
  Tool.dynamic(definition.name, { description: definition.description, parameters: definition.parameters as JsonSchema })

type Tools = Record<string, ReturnType<typeof dynamicTool>>

/**
 * A toolkit of the request's tool definitions: dynamic tools whose JSON schema goes to the provider unchanged.
 * valet runs the tools itself (the calls go back to the architecture: `disableToolCallResolution`), so no handler
 * is ever called.
 */
const toolkitOf = (definitions: ReadonlyArray<Model.ToolDefinition>): Toolkit.WithHandler<Tools> => {
  const tools: Tools = {}
  for (const definition of definitions) {
    tools[definition.name] = dynamicTool(definition)
  }
  return {
    tools,
    handle: (name) => Effect.die(new Error(`valet/EffectAi: the tool ${String(name)} is run by the valet architecture, not by effect/ai`))
  }
}

/** valet messages (or a raw prompt) as an `effect/ai` prompt. */
const toPrompt = (request: Model.Request): Prompt.Prompt => {
  if (request.messages === undefined) return Prompt.make(request.prompt ?? "")
  const encoded: Array<Prompt.MessageEncoded> = []
  for (const message of request.messages) {
    switch (message.role) {
      case "system":
        encoded.push({ role: "system", content: message.content, ...cacheOptions(message.cacheControl) })
        break
      case "user":
        encoded.push({ role: "user", content: toPromptContent(message.content) })
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
          content: [{
            type: "tool-result",
            id: message.toolCallId,
            name: message.name,
            isFailure: false,
            result: message.content,
            providerExecuted: false,
            // A result with images: `modelOutput` is what effect/ai sends the model in place of `result`.
            ...(message.parts !== undefined && message.parts.length > 0
              ? { modelOutput: [{ type: "text" as const, text: message.content }, ...message.parts.map(toPromptPart)] }
              : {})
          }]
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
  const inputTokens = usage.inputTokens.total ?? 0
  const outputTokens = usage.outputTokens.total ?? 0
  const out: { -readonly [K in keyof Model.Usage]: Model.Usage[K] } = {
    inputTokens,
    outputTokens,
    totalTokens: inputTokens + outputTokens
  }
  // effect/ai's `cacheRead` / `cacheWrite` are parts of `total`, as valet's are of `inputTokens`.
  if (usage.inputTokens.cacheRead !== undefined) out.cachedInputTokens = usage.inputTokens.cacheRead
  if (usage.inputTokens.cacheWrite !== undefined) out.cacheWriteTokens = usage.inputTokens.cacheWrite
  return out
}

const argumentsOf = (params: unknown): string => JSON.stringify(params) ?? "{}"

const mapAiError = <A, R>(effect: Effect.Effect<A, AiError.AiError, R>): Effect.Effect<A, ModelError.ModelError, R> =>
  Effect.catch(effect, (error) => Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(fromAiError(error, now))))

/**
 * An `error` part inside a stream: the provider's error object (the whole event, `{"error": {...}}`, or the error
 * itself, `{"type": "rate_limit_error", "message": ...}`), classified as `OpenAiCompatible` classifies one.
 */
const streamedError = (error: unknown): ModelError.ModelError => {
  const body = typeof error === "string" ? error : JSON.stringify(error) ?? String(error)
  const fields = Errors.errorFields(error) ?? Errors.errorFields({ error })
  return fields !== undefined
    ? Errors.fromStreamedError(fields, "", body)
    : new ModelError.ServerError({ status: 0, message: `an error inside the stream: ${Errors.preview(body)}` })
}

const metadataOf = (parts: ReadonlyArray<Response.AnyPart>) => {
  for (const part of parts) {
    if (part.type === "response-metadata") return { id: part.id ?? "", model: part.modelId ?? "" }
  }
  return { id: "", model: "" }
}

/** The valet `Model` service over the `LanguageModel` in context. */
export const makeModel = (options: Options = {}): Effect.Effect<Model.Service, never, LanguageModel.LanguageModel> =>
  Effect.map(LanguageModel.LanguageModel, (language) => {
    /** The request's sampling options in force around a call, when the provider says how to take them. */
    const sampled = (request: Model.Request): Override | undefined => {
      if (options.sampling === undefined) return undefined
      const sampling = samplingOf(request)
      return sampling === undefined ? undefined : options.sampling(sampling)
    }

    const callOptions = (request: Model.Request) => ({
      prompt: toPrompt(request),
      // An empty toolkit sends no tools (and no tool choice).
      toolkit: toolkitOf(request.tools ?? []),
      toolChoice: toolChoiceOf(request.toolChoice),
      disableToolCallResolution: true as const,
      // Calls to undeclared tools come back too: valet answers them with an error result the model can read.
      toolCallValidation: "deferred" as const
    })

    const one = (request: Model.Request, index: number) =>
      Effect.map(language.generateText(callOptions(request)), (response) => {
        const reasoning = response.reasoningText
        const choice: Model.Choice = {
          index,
          text: response.text,
          // A provider-executed call (a provider's own web search…) was run there: nothing for valet to run.
          toolCalls: response.toolCalls.flatMap((call) =>
            call.providerExecuted ? [] : [{ id: call.id, name: call.name, arguments: argumentsOf(call.params) }]
          ),
          ...(reasoning !== undefined && reasoning !== "" ? { reasoning } : {}),
          finishReason: fromFinishReason(response.finishReason)
        }
        return { choice, usage: fromUsage(response.usage), ...metadataOf(response.content) }
      })

    const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
      // Parts are checked as valet's own client checks them, before the provider sees them.
      const invalid = request.messages !== undefined ? Model.checkContent(request.messages) : undefined
      if (invalid !== undefined) return Effect.fail(invalid)
      // The interface has no `n`: one call per choice.
      const calls = Effect.forEach(Array.from({ length: request.n ?? 1 }, (_, i) => i), (i) => one(request, i), { concurrency: "unbounded" })
      const withSampling = sampled(request)
      return mapAiError(
        Effect.map(
          withSampling === undefined ? calls : withSampling(calls),
          (answers): Model.Response => ({
            id: answers[0]!.id,
            model: answers[0]!.model,
            choices: answers.map((answer) => answer.choice),
            usage: answers.reduce((sum, answer) => Model.addUsage(sum, answer.usage), Model.emptyUsage)
          })
        )
      )
    }

    /** The chunks of one choice's stream; usage goes to `onUsage` when the caller sums several. */
    const choiceStream = (
      request: Model.Request,
      index: number,
      onUsage: ((usage: Model.Usage) => void) | undefined
    ): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
      Stream.suspend(() => {
        const invalid = request.messages !== undefined ? Model.checkContent(request.messages) : undefined
        if (invalid !== undefined) return Stream.fail(invalid)
        const toolIndex = new Map<string, number>()
        const toolIndexOf = (id: string) => {
          let i = toolIndex.get(id)
          if (i === undefined) {
            i = toolIndex.size
            toolIndex.set(id, i)
          }
          return i
        }
        return language.streamText(callOptions(request)).pipe(
          Stream.catch((error) => Stream.fromEffect(mapAiError(Effect.fail(error)))),
          Stream.mapEffect((part): Effect.Effect<ReadonlyArray<Model.Chunk>, ModelError.ModelError> => {
            switch (part.type) {
              case "response-metadata":
                return Effect.succeed(index === 0 ? [{ _tag: "Metadata", id: part.id ?? "", model: part.modelId ?? "" }] : [])
              case "text-delta":
                return Effect.succeed([{ _tag: "TextDelta", index, text: part.delta }])
              case "reasoning-delta":
                return Effect.succeed([{ _tag: "ReasoningDelta", index, text: part.delta }])
              case "tool-call":
                // Whole calls only: `tool-params-*` parts are previews of the same call.
                if (part.providerExecuted) return Effect.succeed([])
                return Effect.succeed([{
                  _tag: "ToolCallDelta",
                  index,
                  toolIndex: toolIndexOf(part.id),
                  id: part.id,
                  name: part.name,
                  arguments: argumentsOf(part.params)
                }])
              case "finish": {
                const finish: Model.Chunk = { _tag: "Finish", index, finishReason: fromFinishReason(part.reason) }
                if (onUsage === undefined) return Effect.succeed([finish, { _tag: "Usage", usage: fromUsage(part.usage) }])
                onUsage(fromUsage(part.usage))
                return Effect.succeed([finish])
              }
              case "error":
                return Effect.fail(streamedError(part.error))
              default:
                return Effect.succeed([])
            }
          }),
          Stream.flattenIterable
        )
      })

    const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> => {
      const n = request.n ?? 1
      const chunks = n === 1
        ? choiceStream(request, 0, undefined)
        : Stream.suspend(() => {
          // The interface has no `n`: one stream per choice, interleaved, usage summed at the end.
          let usage = Model.emptyUsage
          const add = (u: Model.Usage) => {
            usage = Model.addUsage(usage, u)
          }
          return Stream.mergeAll(Array.from({ length: n }, (_, i) => choiceStream(request, i, add)), { concurrency: "unbounded" }).pipe(
            Stream.concat(Stream.sync((): Model.Chunk => ({ _tag: "Usage", usage })))
          )
        })
      const withSampling = sampled(request)
      return withSampling === undefined ? chunks : streamWith(withSampling, chunks)
    }

    return Model.make({ generate, stream })
  })
