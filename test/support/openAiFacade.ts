/**
 * What the OpenAI facade tests share (`/v1/chat/completions` in OpenAiApi.test.ts, `/v1/responses` in
 * OpenAiResponses.test.ts): the `openai` client, an agent whose model requests are read back, the OpenAI error a request is refused with,
 * and the AI SDK tool exchange both facades must turn into an assistant tool call and its result.
 */
import type { ModelMessage } from "ai"
import { Context, Effect, Layer } from "effect"
import OpenAI from "openai"
import { expect } from "vitest"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

/** An agent on a scripted model whose requests the test reads back (`ScriptedModel.calls`). */
export const inspected = (name: string, script: ScriptedModel.Script) => {
  const context = ScriptedModel.context(script)
  const agent = Agent.make({ name, instructions: "Be brief.", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
  return { agent, calls: ScriptedModel.calls.pipe(Effect.provide(context)) }
}

/** The `openai` package's client of a served app (`url` its root), without retries: what a test sends is sent once. */
export const openAiClient = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })

/** The OpenAI error a request is refused with (`undefined` when it is not refused). */
export const refusedWith = (promise: Promise<unknown>) =>
  Effect.promise(() =>
    promise.then(
      () => undefined,
      (error: unknown) => {
        if (!(error instanceof OpenAI.APIError)) throw error
        return { status: error.status, param: error.param, code: error.code, type: error.type, message: error.message }
      }
    )
  )

/** An AI SDK conversation that ends with a tool's result: a weather call for Paris and its answer. */
export const weatherExchange: Array<ModelMessage> = [
  { role: "user", content: "Weather in Paris?" },
  { role: "assistant", content: [{ type: "tool-call", toolCallId: "call_1", toolName: "weather", input: { city: "Paris" } }] },
  { role: "tool", content: [{ type: "tool-result", toolCallId: "call_1", toolName: "weather", output: { type: "text", value: "18°C, sunny" } }] }
]

/** The model request `weatherExchange` must become: the system prompt, the user, the assistant's call, its result. */
export const expectWeatherExchange = (request: Model.Request | undefined) => {
  expect(request!.messages!.map((message) => message.role)).toEqual(["system", "user", "assistant", "tool"])
  expect(request!.messages![2]).toMatchObject({ role: "assistant", toolCalls: [{ id: "call_1", name: "weather" }] })
  expect(JSON.parse((request!.messages![2] as Model.AssistantMessage).toolCalls![0]!.arguments)).toEqual({ city: "Paris" })
  expect(request!.messages![3]).toEqual(Model.toolResult("call_1", "weather", "18°C, sunny"))
}
