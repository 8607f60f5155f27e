/**
 * The OpenAI Responses API facade (`POST /v1/responses`), driven by clients no one here wrote: the `openai`
 * package's `responses.create` / `responses.stream` and the AI SDK's OpenAI provider (`openai.responses(...)`), over
 * loopback against `Server.layerNode`, with agents on scripted models.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import OpenAI from "openai"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

/** An agent on a scripted model whose requests the test reads back (`ScriptedModel.calls`). */
const inspected = (name: string, script: ScriptedModel.Script) => {
  const context = ScriptedModel.context(script)
  const agent = Agent.make({ name, instructions: "Be brief.", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
  return { agent, calls: ScriptedModel.calls.pipe(Effect.provide(context)) }
}

const answer = { text: "Paris is the capital of France.", usage: { inputTokens: 11, outputTokens: 7 } }

/** The OpenAI error a request is refused with (`undefined` when it is not refused). */
const refusedWith = (promise: Promise<unknown>) =>
  Effect.promise(() =>
    promise.then(
      () => undefined,
      (error: unknown) => {
        if (!(error instanceof OpenAI.APIError)) throw error
        return { status: error.status, param: error.param, code: error.code, type: error.type, message: error.message }
      }
    )
  )

describe("OpenAiApi /v1/responses (the openai package as client)", () => {
  it.live("responses.create: a string input runs the agent; output_text, usage, status completed", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const response = yield* Effect.promise(() => client.responses.create({ model: "echo", input: "Capital of France?" }))
      expect(response.object).toBe("response")
      expect(response.id).toMatch(/^resp_/)
      expect(response.status).toBe("completed")
      expect(response.error).toBeNull()
      expect(response.output_text).toBe("Paris is the capital of France.")
      expect(response.output).toEqual([{
        id: expect.stringMatching(/^msg_/),
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Paris is the capital of France.", annotations: [], logprobs: [] }]
      }])
      expect(response.usage).toEqual({
        input_tokens: 11,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 7,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 18
      })
      expect((yield* echo.calls)[0]!.messages).toEqual([Model.system("Be brief."), Model.user("Capital of France?")])
    }).pipe(Effect.scoped), 30_000)

  it.live("responses.create: instructions, then message items in order; the last user message is the input", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      yield* Effect.promise(() =>
        client.responses.create({
          model: "echo",
          instructions: "Answer in French if asked to.",
          temperature: 0.3,
          input: [
            { role: "developer", content: "Be exact." },
            { role: "user", content: "Hi." },
            { type: "message", role: "assistant", content: [{ type: "output_text", text: "Hello!", annotations: [] }], id: "msg_1", status: "completed" },
            { role: "user", content: [{ type: "input_text", text: "Which city?" }, { type: "input_image", image_url: `data:image/png;base64,${png}`, detail: "auto" }] },
            { type: "reasoning", id: "rs_1", summary: [] },
            { role: "user", content: [{ type: "input_text", text: "Capital of France?" }] }
          ]
        })
      )
      expect((yield* echo.calls)[0]!.messages).toEqual([
        Model.system("Be brief."),
        Model.system("Answer in French if asked to."),
        Model.system("Be exact."),
        Model.user("Hi."),
        Model.assistant("Hello!"),
        Model.user([Model.textPart("Which city?"), { ...Model.imagePart({ data: png, mediaType: "image/png" }), detail: "auto" }]),
        Model.user("Capital of France?")
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("what the facade cannot honour is a 400 naming the parameter or the item, in OpenAI's shape, and no run starts", () =>
    Effect.gen(function*() {
      const echo = inspected("echo", [answer])
      const url = yield* serveAgents([echo.agent])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const create = (body: Record<string, unknown>) =>
        refusedWith(client.responses.create({ model: "echo", input: "x", ...body } as OpenAI.Responses.ResponseCreateParamsNonStreaming))
      expect(yield* create({ tools: [{ type: "function", name: "f", parameters: {}, strict: true }] })).toMatchObject({
        status: 400,
        param: "tools",
        code: "unsupported_parameter",
        type: "invalid_request_error"
      })
      const computer = yield* create({ input: [{ type: "computer_call", id: "c", call_id: "c", action: { type: "screenshot" }, pending_safety_checks: [], status: "completed" }] })
      expect(computer).toMatchObject({ status: 400, param: "input[0].type", code: "unsupported_value" })
      expect(computer?.message).toMatch(/computer_call items are not supported/)
      const fileId = yield* create({ input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] })
      expect(fileId).toMatchObject({ status: 400, param: "input[0].content[0].file_id" })
      expect(yield* create({ input: [{ type: "item_reference", id: "msg_1" }] })).toMatchObject({ status: 400, param: "input[0].type" })
      expect(yield* create({ previous_response_id: "resp_1" })).toMatchObject({ status: 400, param: "previous_response_id" })
      expect(yield* create({ background: true })).toMatchObject({ status: 400, param: "background" })
      expect(yield* create({ tool_choice: "required" })).toMatchObject({ status: 400, param: "tool_choice" })
      expect(yield* create({ text: { format: { type: "json_schema", name: "x" } } })).toMatchObject({ status: 400, param: "text.format.schema" })
      expect(yield* create({ input: [{ type: "function_call_output", call_id: "nobody", output: "x" }] })).toMatchObject({
        status: 400,
        param: "input[0].call_id"
      })
      expect(yield* create({ input: [{ role: "assistant", content: "only me" }] })).toMatchObject({ status: 400, param: "input" })
      // A body that does not decode: the path of the first bad field.
      expect(yield* create({ input: [{ role: "user", content: 7 }] })).toMatchObject({ status: 400, param: "input[0].content" })
      const unknown = yield* refusedWith(client.responses.create({ model: "nobody", input: "x" }))
      expect(unknown).toMatchObject({ status: 404, code: "model_not_found" })
      expect(yield* echo.calls).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("the server's token and body cap apply to /v1/responses, answered in OpenAI's shape", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("echo", ["hi"])], { token: Redacted.make("s3cret"), maxBodyBytes: 2_000 })
      const denied = yield* refusedWith(new OpenAI({ baseURL: `${url}/v1`, apiKey: "wrong", maxRetries: 0 }).responses.create({ model: "echo", input: "x" }))
      expect(denied).toMatchObject({ status: 401, type: "authentication_error" })
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "s3cret", maxRetries: 0 })
      expect(yield* refusedWith(client.responses.create({ model: "echo", input: "x".repeat(5_000) }))).toMatchObject({ status: 413 })
      expect((yield* Effect.promise(() => client.responses.create({ model: "echo", input: "x" }))).output_text).toBe("hi")
    }).pipe(Effect.scoped), 30_000)

  it.live("a failed run is a 500 server_error naming the run's error; max_output_tokens reached is status incomplete", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([
        scriptedAgent("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }]),
        scriptedAgent("long", [{ text: "a long answer", usage: { inputTokens: 3, outputTokens: 9 } }])
      ])
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 })
      const failed = yield* refusedWith(client.responses.create({ model: "broken", input: "x" }))
      expect(failed).toMatchObject({ status: 500, type: "server_error" })
      expect(failed?.message).toMatch(/slow down/)
      const cut = yield* Effect.promise(() => client.responses.create({ model: "long", input: "x", max_output_tokens: 9 }))
      expect(cut.status).toBe("incomplete")
      expect(cut.incomplete_details).toEqual({ reason: "max_output_tokens" })
    }).pipe(Effect.scoped), 30_000)
})
