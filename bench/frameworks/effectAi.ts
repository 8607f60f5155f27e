/**
 * A tool loop written by hand on Effect 4's `effect/ai`, as an Effect user would without valet: a `Toolkit` with
 * `add`, `LanguageModel.generateText` / `streamText` with the toolkit (which runs the tool calls), the response
 * parts appended to the `Prompt`, until an answer without tool calls. The provider is a mock `LanguageModel.make`
 * answering the same turns.
 */
import { Effect, Layer, Schema, Stream } from "effect"
import { LanguageModel, Prompt, type Response, Tool, Toolkit } from "effect/ai"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

const Add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  success: Schema.Number
})
const Calculator = Toolkit.make(Add)
const handlers = Calculator.toLayer({ add: ({ a, b }) => Effect.succeed(a + b) })

const usage = { inputTokens: { total: 10 }, outputTokens: { total: 10 } }

const partsAt = (step: number, steps: number): Array<Response.PartEncoded> =>
  step < steps
    ? [
      { type: "tool-call", id: `c${step}`, name: "add", params: argsAt(step), providerExecuted: false },
      { type: "finish", reason: "tool-calls", usage }
    ]
    : [{ type: "text", text: finalText }, { type: "finish", reason: "stop", usage }]

const streamPartsAt = (step: number, steps: number): Array<Response.StreamPartEncoded> =>
  step < steps
    ? [
      { type: "tool-call", id: `c${step}`, name: "add", params: argsAt(step), providerExecuted: false },
      { type: "finish", reason: "tool-calls", usage }
    ]
    : [
      { type: "text-start", id: "t" },
      ...finalText.split(" ").map((word, i): Response.StreamPartEncoded => ({ type: "text-delta", id: "t", delta: i === 0 ? word : ` ${word}` })),
      { type: "text-end", id: "t" },
      { type: "finish", reason: "stop", usage }
    ]

const mockModel = (steps: number, yieldPerCall: boolean) => {
  let step = 0
  const next = Effect.suspend(() => {
    step++
    return yieldPerCall ? Effect.as(Effect.promise(yieldToEventLoop), step) : Effect.succeed(step)
  })
  return Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.map(next, (at) => partsAt(at, steps)),
      streamText: () => Stream.unwrap(Effect.map(next, (at) => Stream.fromIterable(streamPartsAt(at, steps))))
    })
  )
}

const generateLoop = Effect.gen(function*() {
  let history = Prompt.make([{ role: "system", content: instructions }, { role: "user", content: prompt }])
  for (;;) {
    const response = yield* LanguageModel.generateText({ prompt: history, toolkit: Calculator })
    if (response.toolCalls.length === 0) return response.text
    history = Prompt.concat(history, Prompt.fromResponseParts(response.content))
  }
})

const streamLoop = Effect.gen(function*() {
  let history = Prompt.make([{ role: "system", content: instructions }, { role: "user", content: prompt }])
  for (;;) {
    const parts = yield* Stream.runCollect(LanguageModel.streamText({ prompt: history, toolkit: Calculator }))
    const calls = parts.filter((part) => part.type === "tool-call")
    if (calls.length === 0) return parts.flatMap((part) => (part.type === "text-delta" ? [part.delta] : [])).join("")
    history = Prompt.concat(history, Prompt.fromResponseParts(parts))
  }
})

export const effectAi: Framework = {
  name: "effect-ai",
  run: (steps, options) =>
    Effect.runPromise((options.stream ? streamLoop : generateLoop).pipe(Effect.provide(Layer.merge(mockModel(steps, options.yieldPerCall), handlers))))
}
