/**
 * The test double of `Model`. A script is a list of turns consumed in call order (or a function of the request
 * and the call index). It is strict: a call with no turn left fails with `ScriptExhausted`, and a test can
 * assert that every turn was consumed and read back every request it received.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Model, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({ name: "helper", instructions: "Be helpful." })
 *
 * const test = Effect.gen(function*() {
 *   const result = yield* Agent.run(agent, "Hi")
 *   const [request] = yield* ScriptedModel.calls // what the model was sent, in call order
 *   yield* ScriptedModel.assertConsumed // fails with ScriptNotConsumed if a turn was left over
 *   return { output: result.output, instructions: request?.messages?.[0]?.content } // "Hello!", "Be helpful."
 * }).pipe(Effect.provide(ScriptedModel.layer(["Hello!"])))
 *
 * // A function script answers each request as it comes: here, with the last message.
 * const echo = ScriptedModel.layer((request) => Model.textOf(request.messages?.at(-1)?.content ?? ""))
 * ```
 *
 * @since 0.1.0
 */
import { Context, Duration, Effect, Layer, Schema, Stream } from "effect"
import * as Model from "./Model.js"
import { type ModelError, ScriptExhausted } from "./ModelError.js"

/**
 * A scripted tool call; `arguments` may be an object (sent as JSON) or the raw text a model would write.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedToolCall {
  readonly name: string
  readonly arguments?: string | Record<string, unknown> | undefined
  readonly id?: string | undefined
}

/**
 * One scripted answer: a text, or the parts of a response.
 *
 * @since 0.1.0
 * @category models
 */
export type Turn =
  | string
  | {
    readonly text?: string | undefined
    readonly toolCalls?: ReadonlyArray<ScriptedToolCall> | undefined
    readonly reasoning?: string | undefined
    readonly finishReason?: Model.FinishReason | undefined
    /** Token counts; by default about four characters a token. */
    readonly usage?: Partial<Model.Usage> | undefined
    /** Waits this long before answering (use `TestClock` to move time). */
    readonly delay?: Duration.Input | undefined
    /** Fails the call with this error instead of answering. */
    readonly error?: ModelError | undefined
  }

/**
 * A script: turns consumed in call order, or a function answering each request.
 *
 * @since 0.1.0
 * @category models
 */
export type Script =
  | ReadonlyArray<Turn>
  | ((request: Model.Request, index: number) => Turn | Effect.Effect<Turn, ModelError>)

/**
 * A script still had turns when a test asserted it was consumed.
 *
 * @since 0.1.0
 * @category errors
 */
export class ScriptNotConsumed extends Schema.TaggedError<ScriptNotConsumed>()("ScriptNotConsumed", {
  consumed: Schema.Number,
  scriptLength: Schema.Number
}) {
  override get message(): string {
    return `ScriptedModel: ${this.scriptLength - this.consumed} of ${this.scriptLength} turns were never used`
  }
}

/**
 * What a test reads back from a scripted model.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Every request received, in call order. */
  readonly calls: Effect.Effect<ReadonlyArray<Model.Request>>
  /** Turns not consumed yet (`undefined` for a function script). */
  readonly remaining: Effect.Effect<number | undefined>
  /** Fails with `ScriptNotConsumed` when a list script still has turns. */
  readonly assertConsumed: Effect.Effect<void, ScriptNotConsumed>
}

/**
 * The scripted model's inspection service, provided beside `Model` by `layer`.
 *
 * @since 0.1.0
 * @category services
 */
export class ScriptedModel extends Context.Service<ScriptedModel, Service>()("valet/ScriptedModel") {}

/**
 * Every request the scripted model received, in call order.
 *
 * @since 0.1.0
 * @category inspection
 */
export const calls: Effect.Effect<ReadonlyArray<Model.Request>, never, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.calls
)

/**
 * Fails with `ScriptNotConsumed` when a list script still has turns.
 *
 * @since 0.1.0
 * @category inspection
 */
export const assertConsumed: Effect.Effect<void, ScriptNotConsumed, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.assertConsumed
)

/**
 * Turns not consumed yet (`undefined` for a function script).
 *
 * @since 0.1.0
 * @category inspection
 */
export const remaining: Effect.Effect<number | undefined, never, ScriptedModel> = Effect.flatMap(
  ScriptedModel,
  (service) => service.remaining
)

/**
 * The scripted model's stand-in for a tokenizer: about four characters a token, the usual rule of thumb. Only
 * lengths are read, so estimating a long conversation on every turn stays cheap.
 */
const tokens = (characters: number): number => Math.ceil(characters / 4)

/**
 * Characters of a request's prompt or messages, read afresh on every call: only lengths are read, which costs no
 * more than recognising the previous request's messages in this one did, and needs no copy of the conversation
 * per call (a tool loop's requests grow by a few messages a turn; a copy of each made the turns quadratic in memory).
 */
const requestCharacters = (request: Model.Request): number => {
  if (request.prompt !== undefined) return request.prompt.length
  const messages = request.messages ?? []
  let characters = 0
  for (let i = 0; i < messages.length; i++) characters += messages[i]!.content.length
  return characters
}

const toChoice = (turn: Turn, callIndex: number, choice: number): Model.Choice => {
  if (typeof turn === "string") return { index: choice, text: turn, toolCalls: [], finishReason: "stop" }
  const toolCalls = turn.toolCalls === undefined ? [] : turn.toolCalls.map((call, i): Model.ToolCall => ({
    id: call.id ?? `call_${callIndex + 1}_${choice}_${i}`,
    name: call.name,
    arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {})
  }))
  const out: { -readonly [K in keyof Model.Choice]: Model.Choice[K] } = {
    index: choice,
    text: turn.text ?? "",
    toolCalls,
    finishReason: turn.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop")
  }
  if (turn.reasoning !== undefined) out.reasoning = turn.reasoning
  return out
}

const choiceCharacters = (choice: Model.Choice): number => {
  let characters = choice.text.length
  for (const call of choice.toolCalls) characters += call.name.length + call.arguments.length
  return characters
}

/** The response to a call from its turns (one per choice), or the error a turn scripts. */
const respond = (
  request: Model.Request,
  callIndex: number,
  turns: ReadonlyArray<Turn>,
): Effect.Effect<Model.Response, ModelError> => {
  const choices: Array<Model.Choice> = []
  let outputCharacters = 0
  for (let i = 0; i < turns.length; i++) {
    const turn = turns[i]!
    if (typeof turn !== "string" && turn.error !== undefined) return Effect.fail(turn.error)
    const choice = toChoice(turn, callIndex, i)
    outputCharacters += choiceCharacters(choice)
    choices.push(choice)
  }
  const single = turns.length === 1 && typeof turns[0] !== "string" ? turns[0]!.usage : undefined
  const inputTokens = single?.inputTokens ?? tokens(requestCharacters(request))
  const outputTokens = single?.outputTokens ?? tokens(outputCharacters)
  const usage: { -readonly [K in keyof Model.Usage]: Model.Usage[K] } = {
    inputTokens,
    outputTokens,
    totalTokens: single?.totalTokens ?? inputTokens + outputTokens
  }
  // Scripted prompt-cache counts, as a server would report them.
  if (single?.cachedInputTokens !== undefined) usage.cachedInputTokens = single.cachedInputTokens
  if (single?.cacheWriteTokens !== undefined) usage.cacheWriteTokens = single.cacheWriteTokens
  return Effect.succeed({ id: `scripted-${callIndex + 1}`, model: "scripted", choices, usage })
}

/** The longest delay the turns ask for, or undefined when none waits. */
const delayOf = (turns: ReadonlyArray<Turn>): Duration.Duration | undefined => {
  let delay: Duration.Duration | undefined
  for (const turn of turns) {
    if (typeof turn !== "string" && turn.delay !== undefined) {
      const d = Duration.fromInputUnsafe(turn.delay)
      delay = delay === undefined ? d : Duration.max(delay, d)
    }
  }
  return delay
}

/**
 * A `Model` that answers from a script, and the `ScriptedModel` service to inspect it. With `n` > 1 a request
 * consumes `n` turns, one per choice. `stream` sends a turn as word-sized deltas. Each build starts the script
 * afresh.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (script: Script): Layer.Layer<Model.Model | ScriptedModel> =>
  Layer.effectContext(Effect.sync(() => context(script)))

/**
 * What `layer` provides, as a plain `Context` with its own fresh script: `Effect.provide(run, context(script))`
 * gives one run its own scripted model without building a layer (no scope, no memo map), the cheap way to give
 * each of many concurrent sessions a model of its own.
 *
 * @since 0.1.0
 * @category layers
 */
export const context = (script: Script): Context.Context<Model.Model | ScriptedModel> => {
  const received: Array<Model.Request> = []
  let consumed = 0

  /** The next turn: a plain value when the script has it at hand, an effect when it must wait or fail. */
  const nextTurn = (request: Model.Request, callIndex: number): Turn | Effect.Effect<Turn, ModelError> => {
    if (typeof script === "function") return script(request, callIndex)
    if (consumed >= script.length) {
      return Effect.fail(new ScriptExhausted({ callIndex: consumed, scriptLength: script.length }))
    }
    return script[consumed++]!
  }

  const withDelay = (request: Model.Request, callIndex: number, turns: ReadonlyArray<Turn>) => {
    const delay = delayOf(turns)
    return delay === undefined
      ? respond(request, callIndex, turns)
      : Effect.andThen(Effect.sleep(delay), Effect.suspend(() => respond(request, callIndex, turns)))
  }

  const answer = (request: Model.Request): Effect.Effect<Model.Response, ModelError> => {
    const callIndex = received.length
    received.push(request)
    const n = request.n ?? 1
    if (n === 1) {
      const turn = nextTurn(request, callIndex)
      // The common case of a test double: no effect to run, so none is built.
      return Effect.isEffect(turn)
        ? Effect.flatMap(turn, (t) => withDelay(request, callIndex, [t]))
        : withDelay(request, callIndex, [turn])
    }
    return Effect.flatMap(
      Effect.forEach(Array.from({ length: n }, (_, i) => i), () => {
        const turn = nextTurn(request, callIndex)
        return Effect.isEffect(turn) ? turn : Effect.succeed(turn)
      }),
      (turns) => withDelay(request, callIndex, turns)
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
}
