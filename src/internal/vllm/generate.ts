/**
 * The legacy vLLM demo server (`python -m vllm.entrypoints.api_server`): `POST /generate`.
 *
 * - The request is `{prompt, stream?, ...}`; every other key goes to vLLM's `SamplingParams`, which fails (HTTP
 *   500) on a key it does not know, so only sampling keys are sent — never `model`, `tools`, `stream_options`.
 * - The answer is `{"text": [prompt + completion, ...]}`: the echoed prompt is stripped. `{"choices": [{"text"}]}`
 *   and `{"choices": [{"message": {"content"}}]}` (forks and proxies) are accepted too.
 * - The stream is newline-separated JSON objects (`\0`-separated in old versions) of the same shape whose text is
 *   cumulative: it is turned into deltas.
 * - Chat messages have no template here: they are rendered as a plain transcript (`System:` / `User:` /
 *   `Assistant:`), and tools cannot be offered at all.
 */
import { type HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Chunk, Effect, Either, Schema, Stream } from "effect"
import type * as Model from "../../Model.js"
import * as ModelError from "../../ModelError.js"
import * as Client from "../openai/client.js"
import * as Errors from "../openai/errors.js"

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
        return `User: ${message.content}`
      case "assistant":
        return `Assistant: ${message.content}`
      case "tool":
        return `Tool (${message.name}): ${message.content}`
    }
  })
  return `${lines.join("\n\n")}\n\nAssistant:`
}

/** The request body: the prompt and sampling keys only. */
export const encode = (
  request: Model.Request,
  target: Target,
  stream: boolean
): Either.Either<Record<string, unknown>, ModelError.InvalidRequest> => {
  if (request.tools !== undefined && request.tools.length > 0) {
    return Either.left(
      new ModelError.InvalidRequest({
        status: 0,
        message: `actor ${target.actor} serves the legacy /generate API, which cannot offer tools: serve it with \`vllm serve\` (api: openai)`
      })
    )
  }
  if (request.responseFormat !== undefined && request.responseFormat.type !== "text") {
    return Either.left(
      new ModelError.InvalidRequest({
        status: 0,
        message: `actor ${target.actor} serves the legacy /generate API, which has no response_format: serve it with \`vllm serve\` (api: openai)`
      })
    )
  }
  const body: Record<string, unknown> = { prompt: promptOf(request) }
  if (stream) body.stream = true
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  body.max_tokens = request.maxTokens ?? target.maxTokens
  if (request.stop !== undefined && request.stop.length > 0) body.stop = request.stop
  if (request.seed !== undefined) body.seed = request.seed
  if (request.n !== undefined) body.n = request.n
  if (request.logprobs !== undefined) body.logprobs = request.logprobs
  if (request.extra !== undefined) Object.assign(body, request.extra)
  return Either.right(body)
}

const Answer = Schema.Union(
  Schema.Struct({ text: Schema.Union(Schema.Array(Schema.String), Schema.String) }),
  Schema.Struct({
    choices: Schema.Array(Schema.Struct({
      text: Schema.optional(Schema.NullOr(Schema.String)),
      message: Schema.optional(Schema.NullOr(Schema.Struct({ content: Schema.optional(Schema.NullOr(Schema.String)) }))),
      finish_reason: Schema.optional(Schema.NullOr(Schema.String))
    }))
  })
)
const decodeAnswer = Schema.decodeUnknownEither(Answer)

interface Texts {
  readonly texts: ReadonlyArray<string>
  readonly finish: ReadonlyArray<string | null | undefined>
}

/** The completions of one answer (or one streamed line), the echoed prompt stripped. */
const textsOf = (line: string, prompt: string, what: string): Either.Either<Texts, ModelError.ModelError> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Either.left(Errors.malformed(`${what} is not JSON: ${error instanceof Error ? error.message : String(error)}`, line))
  }
  const fields = Errors.errorFields(json)
  if (fields !== undefined) return Either.left(Errors.fromStreamedError(fields, "", line))
  const decoded = decodeAnswer(json)
  if (Either.isLeft(decoded)) {
    return Either.left(Errors.malformed(`${what} is neither {"text": [...]} nor {"choices": [...]}`, line))
  }
  const answer = decoded.right
  if ("text" in answer) {
    const texts = typeof answer.text === "string" ? [answer.text] : answer.text
    return Either.right({
      texts: texts.map((text) => (prompt !== "" && text.startsWith(prompt) ? text.slice(prompt.length) : text)),
      finish: []
    })
  }
  return Either.right({
    texts: answer.choices.map((choice) => choice.text ?? choice.message?.content ?? ""),
    finish: answer.choices.map((choice) => choice.finish_reason)
  })
}

const finishOf = (reason: string | null | undefined): Model.FinishReason =>
  reason === "length" ? "length" : reason === undefined || reason === null || reason === "stop" ? "stop" : "other"

/** One-attempt `/generate` calls of `target` through `client`. */
export const makeAttempt = (client: HttpClient.HttpClient, target: Target) => {
  const url = `${target.root}/generate`
  const post = (body: Record<string, unknown>) =>
    Client.send(client, HttpClientRequest.post(url).pipe(HttpClientRequest.bodyUnsafeJson(body)))

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.suspend(() => {
      const body = encode(request, target, false)
      if (Either.isLeft(body)) return Effect.fail(body.left)
      const prompt = body.right.prompt as string
      return Effect.flatMap(post(body.right), (response) => {
        if (response.status < 200 || response.status >= 300) return Client.failure(response, target.model)
        return Effect.flatMap(
          Effect.mapError(response.text, (error) => Errors.fromHttpClientError(error, url)),
          (text) => {
            const answer = textsOf(text, prompt, `the answer of ${url}`)
            if (Either.isLeft(answer)) return Effect.fail(answer.left)
            return Effect.succeed<Model.Response>({
              id: "",
              model: target.model,
              choices: answer.right.texts.map((text, index) => ({
                index,
                text,
                toolCalls: [],
                finishReason: finishOf(answer.right.finish[index])
              })),
              usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }
            })
          }
        )
      })
    })

  const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.unwrap(Effect.suspend(() => {
      const body = encode(request, target, true)
      if (Either.isLeft(body)) return Effect.fail(body.left)
      const prompt = body.right.prompt as string
      return Effect.flatMap(post(body.right), (response) =>
        response.status < 200 || response.status >= 300
          ? Client.failure(response, target.model)
          : Effect.succeed(lines(response, url, prompt, target.model)))
    }))

  return { generate, stream }
}

/** The chunks of a streamed answer: cumulative texts → deltas; one `Finish` per choice at the end. */
const lines = (
  response: HttpClientResponse.HttpClientResponse,
  url: string,
  prompt: string,
  model: string
): Stream.Stream<Model.Chunk, ModelError.ModelError> => {
  const sent: Array<string> = []
  const finish: Array<string | null | undefined> = []
  let count = 0
  const metadata: Model.Chunk = { _tag: "Metadata", id: "", model }
  return Stream.make(metadata).pipe(
    Stream.concat(
      response.stream.pipe(
        Stream.mapError((error) => Errors.fromHttpClientError(error, url)),
        Stream.decodeText(),
        // Old versions separate the objects with `\0`, newer ones with a newline.
        Stream.map((text) => text.replaceAll("\0", "\n")),
        Stream.splitLines,
        Stream.mapChunksEffect((batch) => {
          const out: Array<Model.Chunk> = []
          for (const line of batch) {
            if (line.trim() === "") continue
            count++
            const answer = textsOf(line, prompt, `line ${count} of the stream from ${url}`)
            if (Either.isLeft(answer)) return Effect.fail(answer.left)
            const { texts } = answer.right
            for (let index = 0; index < texts.length; index++) {
              const text = texts[index]!
              const before = sent[index] ?? ""
              if (!text.startsWith(before)) {
                return Effect.fail(Errors.malformed(
                  `line ${count} of the stream from ${url}: the text of choice ${index} does not continue the previous one (the stream is cumulative)`,
                  line
                ))
              }
              if (text.length > before.length) out.push({ _tag: "TextDelta", index, text: text.slice(before.length) })
              sent[index] = text
              if (answer.right.finish[index] !== undefined) finish[index] = answer.right.finish[index]
            }
          }
          return Effect.succeed(Chunk.unsafeFromArray(out))
        })
      )
    ),
    Stream.concat(Stream.suspend(() =>
      Stream.fromIterable(sent.map((_, index): Model.Chunk => ({ _tag: "Finish", index, finishReason: finishOf(finish[index]) })))
    ))
  )
}
