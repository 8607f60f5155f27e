/**
 * The legacy vLLM demo server (`python -m vllm.entrypoints.api_server`): `POST /generate`.
 *
 * - The request is `{prompt, stream?, ...}`; every other key goes to vLLM's `SamplingParams`, which fails (HTTP
 *   500) on a key it does not know, so only sampling keys are sent — never `model`, `tools`, `stream_options`.
 * - The answer is `{"text": [prompt + completion, ...]}`: the echoed prompt is stripped. `{"choices": [{"text"}]}`
 *   and `{"choices": [{"message": {"content"}}]}` (forks and proxies) are accepted too.
 * - The stream is newline-separated JSON objects (`\0`-separated in old versions) of the same shape whose text is
 *   cumulative: it is turned into deltas. Only lines count as progress for the idle timeout (blank lines and
 *   whitespace do not); one line may hold at most `maxEventBytes`, the stream `maxStreamBytes`.
 * - An answer with no text at all (`{"text": []}`, `{"choices": []}`, a stream without a line) is a
 *   `MalformedResponse`; the prompt echoed with nothing after it is an empty completion, which is an answer.
 * - Chat messages have no template here: they are rendered as a plain transcript (`System:` / `User:` /
 *   `Assistant:`), and tools cannot be offered at all.
 *   A part that is not text (an image, a file, audio) is refused with `InvalidContent` naming it.
 */
import { Effect, Result, Schema, Stream } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import * as Client from "../openai/client.js"
import * as Errors from "../openai/errors.js"
import type * as Resilience from "../resilience.js"

/** Where the legacy server is and what its answers are called. */
export interface Target {
  /** The server root, e.g. `http://127.0.0.1:8000`. */
  readonly root: string
  /** Shown as the response's `model` (the server does not say). */
  readonly model: string
  /** The actor's name, for error messages. */
  readonly actor: string
  /** `max_tokens` when the request sets none (vLLM's own default is 16). */
  readonly maxTokens: number
}

/** The prompt for a request: the raw `prompt`, or the messages as a plain transcript. */
export const promptOf = (request: Model.Request): string => {
  if (request.prompt !== undefined) return request.prompt
  const lines = (request.messages ?? []).map((message) => {
    switch (message.role) {
      case "system":
        return `System: ${message.content}`
      case "user":
        return `User: ${Model.textOf(message.content)}`
      case "assistant":
        return `Assistant: ${message.content}`
      case "tool":
        return `Tool (${message.name}): ${message.content}`
    }
  })
  return `${lines.join("\n\n")}\n\nAssistant:`
}

/**
 * The prompt asking for the response format in words: the legacy server has no `response_format` (and its
 * `SamplingParams(**body)` cannot build vLLM's guided-decoding object from JSON), so JSON is asked for as the AI SDK
 * asks providers without a JSON mode, and the caller decodes (structured output repairs what does not decode).
 */
const withFormat = (prompt: string, format: Model.ResponseFormat | undefined): string => {
  if (format === undefined || format.type === "text") return prompt
  const ask = format.type === "json"
    ? "Reply with only a JSON value, nothing else."
    : `Reply with only a JSON value matching this JSON Schema, nothing else:\n${JSON.stringify(format.schema)}`
  // Before the transcript's final "Assistant:" cue, so the model still answers there.
  const cue = "\n\nAssistant:"
  return prompt.endsWith(cue)
    ? `${prompt.slice(0, -cue.length)}\n\nSystem: ${ask}${cue}`
    : `${prompt}\n\n${ask}\n`
}

/** The first part that is not text, where it is: the transcript has no place for it. */
const mediaPartOf = (
  request: Model.Request
): { readonly messageIndex: number; readonly partIndex: number; readonly type: Model.Part["type"]; readonly field?: "parts" } | undefined => {
  const messages = request.messages ?? []
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    // A tool's images are as foreign to the transcript as a user's.
    if (message.role === "tool" && message.parts !== undefined) {
      const j = message.parts.findIndex((part) => part.type !== "text")
      if (j >= 0) return { messageIndex: i, partIndex: j, type: message.parts[j]!.type, field: "parts" }
    }
    const content = message.content
    if (typeof content === "string") continue
    const j = content.findIndex((part) => part.type !== "text")
    if (j >= 0) return { messageIndex: i, partIndex: j, type: content[j]!.type }
  }
  return undefined
}

/** The request body: the prompt and sampling keys only. */
export const encode = (
  request: Model.Request,
  target: Target,
  stream: boolean
): Result.Result<Record<string, unknown>, ModelError.InvalidRequest | ModelError.InvalidContent> => {
  const media = mediaPartOf(request)
  if (media !== undefined) {
    return Result.fail(
      new ModelError.InvalidContent({
        messageIndex: media.messageIndex,
        partIndex: media.partIndex,
        ...(media.field !== undefined ? { field: media.field } : {}),
        reason: `actor ${target.actor} serves the legacy /generate API, which takes a text prompt only, not a${
          media.type === "image" ? "n image" : media.type === "audio" ? "n audio" : " file"
        } part: serve a vision or audio model with \`vllm serve\` (api: openai)`
      })
    )
  }
  if (request.tools !== undefined && request.tools.length > 0) {
    return Result.fail(
      new ModelError.InvalidRequest({
        status: 0,
        message: `actor ${target.actor} serves the legacy /generate API, which cannot offer tools: serve it with \`vllm serve\` (api: openai)`
      })
    )
  }
  const body: Record<string, unknown> = { prompt: withFormat(promptOf(request), request.responseFormat) }
  if (stream) body.stream = true
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  body.max_tokens = request.maxTokens ?? target.maxTokens
  if (request.stop !== undefined && request.stop.length > 0) body.stop = request.stop
  if (request.seed !== undefined) body.seed = request.seed
  if (request.n !== undefined) body.n = request.n
  if (request.logprobs !== undefined) body.logprobs = request.logprobs
  if (request.extra !== undefined) Object.assign(body, request.extra)
  return Result.succeed(body)
}

const Answer = Schema.Union([
  Schema.Struct({ text: Schema.Union([Schema.Array(Schema.String), Schema.String]) }),
  Schema.Struct({
    choices: Schema.Array(Schema.Struct({
      text: Schema.optional(Schema.NullOr(Schema.String)),
      message: Schema.optional(Schema.NullOr(Schema.Struct({ content: Schema.optional(Schema.NullOr(Schema.String)) }))),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    }))
  })
])
const decodeAnswer = Schema.decodeUnknownResult(Answer)

interface Texts {
  readonly texts: ReadonlyArray<string>
  readonly finish: ReadonlyArray<string | null | undefined>
}

/** The completions of one answer (or one streamed line), the echoed prompt stripped. */
const textsOf = (line: string, prompt: string, what: string): Result.Result<Texts, ModelError.ModelError> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(Errors.malformed(`${what} is not JSON: ${error instanceof Error ? error.message : String(error)}`, line))
  }
  const fields = Errors.errorFields(json)
  if (fields !== undefined) return Result.fail(Errors.fromStreamedError(fields, "", line))
  const decoded = decodeAnswer(json)
  if (Result.isFailure(decoded)) {
    return Result.fail(Errors.malformed(`${what} is neither {"text": [...]} nor {"choices": [...]}`, line))
  }
  const answer = decoded.success
  if ("text" in answer ? answer.text.length === 0 : answer.choices.length === 0) {
    return Result.fail(Errors.malformed(`${what} has no completion (an empty list): there is no answer`, line))
  }
  if ("text" in answer) {
    const texts = typeof answer.text === "string" ? [answer.text] : answer.text
    return Result.succeed({
      texts: texts.map((text) => (prompt !== "" && text.startsWith(prompt) ? text.slice(prompt.length) : text)),
      finish: []
    })
  }
  return Result.succeed({
    texts: answer.choices.map((choice) => choice.text ?? choice.message?.content ?? ""),
    finish: answer.choices.map((choice) => choice.finish_reason)
  })
}

const finishOf = (reason: string | null | undefined): Model.FinishReason =>
  reason === "length" ? "length" : reason === undefined || reason === null || reason === "stop" ? "stop" : "other"

/** What a `/generate` stream may be sent as: no type (what vLLM's server sends), JSON, NDJSON or plain text. */
const isLinesType = (media: string): boolean =>
  media === "" || media === "text/plain" || media === "application/octet-stream" || media.includes("json")

/** One-attempt `/generate` calls of `target` through `client`, reading no body past `limits`. */
export const makeAttempt = (client: HttpClient.HttpClient, target: Target, limits: Resilience.Limits): Resilience.Attempt => {
  const url = `${target.root}/generate`
  const scoped = HttpClient.withScope(client)
  const post = (body: Record<string, unknown>) =>
    Client.send(client, HttpClientRequest.post(url).pipe(HttpClientRequest.bodyJsonUnsafe(body)))

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.suspend(() => {
      const body = encode(request, target, false)
      if (Result.isFailure(body)) return Effect.fail(body.failure)
      const prompt = body.success.prompt as string
      return Effect.flatMap(post(body.success), (response) => {
        if (response.status < 200 || response.status >= 300) return Client.failure(response, target.model)
        return Effect.flatMap(
          Client.readLimited(response, url, { limit: limits.maxResponseBytes, option: "maxResponseBytes" }),
          (text) => {
            const answer = textsOf(text, prompt, `the answer of ${url}`)
            if (Result.isFailure(answer)) return Effect.fail(answer.failure)
            return Effect.succeed<Model.Response>({
              id: "",
              model: target.model,
              choices: answer.success.texts.map((text, index) => ({
                index,
                text,
                toolCalls: [],
                finishReason: finishOf(answer.success.finish[index])
              })),
              usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
            })
          }
        )
      })
    })

  const stream = (
    request: Model.Request,
    control: Resilience.StreamControl
  ): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Client.streamOf((scope) =>
      Effect.suspend(() => {
        const body = encode(request, target, true)
        if (Result.isFailure(body)) return Effect.fail(body.failure)
        const prompt = body.success.prompt as string
        const http = HttpClientRequest.post(url).pipe(HttpClientRequest.bodyJsonUnsafe(body.success))
        return Effect.flatMap(Client.openStream(scoped, http, control, scope), (opened) => {
          const { response, watchdog: dog } = opened
          if (response.status < 200 || response.status >= 300) return Effect.mapError(Client.failure(response, target.model), dog.explain)
          const contentType = response.headers["content-type"] ?? ""
          if (!isLinesType(Client.mediaTypeOf(contentType))) {
            return Effect.flatMap(Effect.mapError(Client.readLimited(response, url, { limit: Client.errorBodyBytes }), dog.explain), (text) =>
              Effect.fail(Errors.malformed(`expected lines of JSON from ${url}, got ${contentType}`, text)))
          }
          return Client.readBody(opened, url, control, linesReader(url, prompt, target.model, limits), scope, limits)
        })
      })
    )

  return { generate, stream }
}

/**
 * Reads a streamed answer: newline- (or `\0`-) separated JSON objects with cumulative texts → text deltas; one
 * `Finish` per choice at the end of the body (the protocol has no end marker: a cut connection is a read error).
 */
export const linesReader = (url: string, prompt: string, model: string, limits: Resilience.Limits): Client.BodyReader => {
  const decoder = new TextDecoder()
  const sent: Array<string> = []
  const finish: Array<string | null | undefined> = []
  // The text of the line not yet ended, in the pieces it came in (joined once, when it ends: appending to one
  // string and scanning it again on every read is quadratic in a long line that arrives in small reads).
  let pending: Array<string> = []
  let pendingLength = 0
  let count = 0
  let started = false

  const line = (text: string, out: Array<Model.Chunk>): ModelError.ModelError | undefined => {
    if (text.trim() === "") return undefined
    count++
    const answer = textsOf(text, prompt, `line ${count} of the stream from ${url}`)
    if (Result.isFailure(answer)) return answer.failure
    const { texts } = answer.success
    for (let index = 0; index < texts.length; index++) {
      const current = texts[index]!
      const before = sent[index] ?? ""
      if (!current.startsWith(before)) {
        return Errors.malformed(
          `line ${count} of the stream from ${url}: the text of choice ${index} does not continue the previous one (the stream is cumulative)`,
          text
        )
      }
      if (current.length > before.length) out.push({ _tag: "TextDelta", index, text: current.slice(before.length) })
      sent[index] = current
      if (answer.success.finish[index] !== undefined) finish[index] = answer.success.finish[index]
    }
    return undefined
  }

  const tooLong = (start: string) =>
    Errors.tooLarge(`a line of the stream from ${url}`, "maxEventBytes", limits.maxEventBytes, start)

  const start = (out: Array<Model.Chunk>) => {
    if (started) return
    started = true
    out.push({ _tag: "Metadata", id: "", model })
  }

  return {
    read: (bytes, out) => {
      start(out)
      const decoded = decoder.decode(bytes, { stream: true })
      let from = 0
      for (let i = 0; i < decoded.length; i++) {
        const c = decoded.charCodeAt(i)
        // Old versions separate the objects with `\0`, newer ones with a newline.
        if (c === 10 || c === 0) {
          const piece = decoded.slice(from, i)
          const text = pending.length === 0 ? piece : pending.join("") + piece
          pending = []
          pendingLength = 0
          if (text.length > limits.maxEventBytes) return tooLong(text)
          const error = line(text, out)
          if (error !== undefined) return error
          from = i + 1
        }
      }
      if (from < decoded.length) {
        pending.push(from === 0 ? decoded : decoded.slice(from))
        pendingLength += decoded.length - from
        if (pendingLength > limits.maxEventBytes) return tooLong(pending[0]!)
      }
      return undefined
    },
    events: () => count,
    end: (out) => {
      start(out)
      const text = pending.join("") + decoder.decode()
      if (text.length > limits.maxEventBytes) return tooLong(text)
      const error = line(text, out)
      if (error !== undefined) return error
      if (count === 0) return Errors.malformed(`the stream from ${url} ended without any line: there is no answer`, "")
      sent.forEach((_, index) => out.push({ _tag: "Finish", index, finishReason: finishOf(finish[index]) }))
      return undefined
    }
  }
}
