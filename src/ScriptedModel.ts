/**
 * The test double of `Model`. A script is a list of turns consumed in call order (or a function of the request
 * and the call index). It is strict: a call with no turn left fails with `ScriptExhausted`, and a test can
 * assert that every turn was consumed and read back every request it received.
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Schema, Stream } from "effect"
import * as Model from "./Model.js"
import { type ModelError, ScriptExhausted } from "./ModelError.js"

/** A scripted tool call; `arguments` may be an object (sent as JSON) or the raw text a model would write. */
export interface ScriptedToolCall {
  readonly name: string
  readonly arguments?: string | Record<string, unknown>
  readonly id?: string
}

/** One scripted answer: a text, or the parts of a response. */
export type Turn =
  | string
  | {
    readonly text?: string
    readonly toolCalls?: ReadonlyArray<ScriptedToolCall>
    readonly reasoning?: string
    readonly finishReason?: Model.FinishReason
    /** Token counts; by default words are counted as tokens. */
    readonly usage?: Partial<Model.Usage>
    /** Waits this long before answering (use `TestClock` to move time). */
    readonly delay?: Duration.DurationInput
    /** Fails the call with this error instead of answering. */
    readonly error?: ModelError
  }

/** A script: turns consumed in call order, or a function answering each request. */
export type Script =
  | ReadonlyArray<Turn>
  | ((request: Model.Request, index: number) => Turn | Effect.Effect<Turn, ModelError>)

/** A script still had turns when a test asserted it was consumed. */
export class ScriptNotConsumed extends Schema.TaggedError<ScriptNotConsumed>()("ScriptNotConsumed", {
  consumed: Schema.Number,
  scriptLength: Schema.Number
}) {
  override get message(): string {
    return `ScriptedModel: ${this.scriptLength - this.consumed} of ${this.scriptLength} turns were never used`
  }
}

/** What a test reads back from a scripted model. */
export interface Service {
  /** Every request received, in call order. */
  readonly calls: Effect.Effect<ReadonlyArray<Model.Request>>
  /** Turns not consumed yet (`undefined` for a function script). */
  readonly remaining: Effect.Effect<number | undefined>
  /** Fails with `ScriptNotConsumed` when a list script still has turns. */
  readonly assertConsumed: Effect.Effect<void, ScriptNotConsumed>
}

/** The scripted model's inspection service, provided beside `Model` by `layer`. */
export class ScriptedModel extends Context.Tag("valet/ScriptedModel")<ScriptedModel, Service>() {}

/** Every request the scripted model received, in call order. */
export const calls: Effect.Effect<ReadonlyArray<Model.Request>, never, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.calls
)

/** Fails with `ScriptNotConsumed` when a list script still has turns. */
export const assertConsumed: Effect.Effect<void, ScriptNotConsumed, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.assertConsumed
)

/** Turns not consumed yet (`undefined` for a function script). */
export const remaining: Effect.Effect<number | undefined, never, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.remaining
)

/** Counts words (runs of non-whitespace): the scripted model's stand-in for tokens. */
const countWords = (text: string): number => {
  let words = 0
  let inWord = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    const space = c === 32 || (c >= 9 && c <= 13)
    if (!space && !inWord) words++
    inWord = !space
  }
  return words
}

// Agents resend the same message objects on every turn: counting each once keeps a long run linear.
const messageWords = new WeakMap<Model.Message, number>()

const requestWords = (request: Model.Request): number => {
  if (request.prompt !== undefined) return countWords(request.prompt)
  let words = 0
  for (const message of request.messages ?? []) {
    let n = messageWords.get(message)
    if (n === undefined) {
      n = countWords(message.content)
      messageWords.set(message, n)
    }
    words += n
  }
  return words
}

const toChoice = (turn: Turn, index: number, choice: number): Model.Choice & { words: number } => {
  const parts = typeof turn === "string" ? { text: turn } : turn
  const text = parts.text ?? ""
  const toolCalls = (parts.toolCalls ?? []).map((call, i): Model.ToolCall => ({
    id: call.id ?? `call_${index + 1}_${choice}_${i}`,
    name: call.name,
    arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {})
  }))
  const words = countWords(text) + toolCalls.reduce((n, call) => n + countWords(call.arguments) + 1, 0)
  return {
    index: choice,
    text,
    toolCalls,
    ...(parts.reasoning !== undefined ? { reasoning: parts.reasoning } : {}),
    finishReason: parts.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    words
  }
}

/**
 * A `Model` that answers from a script, and the `ScriptedModel` service to inspect it. With `n` > 1 a request
 * consumes `n` turns, one per choice. `stream` sends a turn as word-sized deltas.
 */
export const layer = (script: Script): Layer.Layer<Model.Model | ScriptedModel> =>
  Layer.effectContext(Effect.sync(() => {
    const received: Array<Model.Request> = []
    let consumed = 0

    const nextTurn = (request: Model.Request, callIndex: number): Effect.Effect<Turn, ModelError> => {
      if (typeof script === "function") {
        const turn = script(request, callIndex)
        return Effect.isEffect(turn) ? turn : Effect.succeed(turn)
      }
      if (consumed >= script.length) {
        return Effect.fail(new ScriptExhausted({ callIndex: consumed, scriptLength: script.length }))
      }
      return Effect.succeed(script[consumed++]!)
    }

    const answer = (request: Model.Request): Effect.Effect<Model.Response, ModelError> => {
      const callIndex = received.length
      received.push(request)
      const n = request.n ?? 1
      const turns = n === 1
        ? Effect.map(nextTurn(request, callIndex), (turn) => [turn])
        : Effect.forEach(Array.from({ length: n }, (_, i) => i), () => nextTurn(request, callIndex))
      return turns.pipe(
        Effect.flatMap((turns) => {
          const failing = turns.find((turn) => typeof turn !== "string" && turn.error !== undefined)
          const delay = turns.reduce(
            (max, turn) =>
              typeof turn !== "string" && turn.delay !== undefined
                ? Duration.max(max, Duration.decode(turn.delay))
                : max,
            Duration.zero
          )
          const build = (): Effect.Effect<Model.Response, ModelError> => {
            if (failing !== undefined && typeof failing !== "string") return Effect.fail(failing.error!)
            const choices = turns.map((turn, i) => toChoice(turn, callIndex, i))
            const inputTokens = requestWords(request)
            const outputTokens = choices.reduce((n, choice) => n + choice.words, 0)
            const scripted = turns.length === 1 && typeof turns[0] !== "string" ? turns[0]!.usage : undefined
            const usage: Model.Usage = {
              inputTokens: scripted?.inputTokens ?? inputTokens,
              outputTokens: scripted?.outputTokens ?? outputTokens,
              totalTokens: scripted?.totalTokens ??
                (scripted?.inputTokens ?? inputTokens) + (scripted?.outputTokens ?? outputTokens)
            }
            return Effect.succeed({
              id: `scripted-${callIndex + 1}`,
              model: "scripted",
              choices: choices.map(({ words: _words, ...choice }) => choice),
              usage
            })
          }
          return Duration.greaterThan(delay, Duration.zero)
            ? Effect.zipRight(Effect.sleep(delay), Effect.suspend(build))
            : build()
        })
      )
    }

    const model: Model.Service = {
      generate: answer,
      stream: (request) => Stream.unwrap(Effect.map(answer(request), (response) => Stream.fromIterable(Model.toChunks(response)))),
      streamInto: (request, onChunk) => Effect.flatMap(answer(request), (response) => Model.replayInto(response, onChunk))
    }

    const service: Service = {
      calls: Effect.sync(() => received.slice()),
      remaining: Effect.sync(() => (typeof script === "function" ? undefined : script.length - consumed)),
      assertConsumed: Effect.suspend(() =>
        typeof script !== "function" && consumed < script.length
          ? Effect.fail(new ScriptNotConsumed({ consumed, scriptLength: script.length }))
          : Effect.void
      )
    }
    return Context.make(Model.Model, model).pipe(Context.add(ScriptedModel, service))
  }))
