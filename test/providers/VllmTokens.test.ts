import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Logger } from "effect"
import { Model } from "../../src/index.js"
import * as ModelChunks from "../../src/core/internal/modelChunks.js"
import * as Decode from "../../src/providers/internal/openai/decode.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"

// Token-level data from vLLM (DESIGN §18), replayed from test/fixtures/openai-compatible (see SOURCES.md: the three
// `*-tokens` fixtures are written from vLLM's source and tests, not captured; `vllm-completion.json` and the
// `*-captured.json` ones are captures).

const poolFile = (text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-vllm-tokens-" })
    const path = `${dir}/vllm_actors.yaml`
    yield* fs.writeFileString(path, text)
    return path
  }).pipe(Effect.provide(NodeServices.layer))

/** The warnings logged, and a layer that collects them. */
const warnings = () => {
  const seen: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    if (logLevel === "Warn") seen.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  return { seen, layer: Logger.layer([logger]) }
}

const poolLayer = (options: Vllm.Options, log: Layer.Layer<never> = Layer.empty) =>
  Layer.provideMerge(Vllm.layer(options), Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer)).pipe(Layer.provideMerge(log))

const actor = (url: string, api: "openai" | "generate" = "openai") => poolFile(`actors:\n  - name: a\n    base_url: ${url}\n    api: ${api}\n`)

describe("Vllm tokens: request", () => {
  it.effect("tokens: true sends return_token_ids, return_tokens_as_token_ids and logprobs (chat: true, completions: 0); off sends none", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const path = yield* actor(server.url)
      yield* Effect.gen(function*() {
        yield* Model.generate({ prompt: "p" })
        yield* Model.generate({ messages: [Model.user("hi")] })
        // The caller's own choices win: a top-3 request keeps its 3, and its `extra` its values.
        yield* Model.generate({ prompt: "p", logprobs: 3, extra: { return_tokens_as_token_ids: false } })
      }).pipe(Effect.provide(poolLayer({ configPath: path, tokens: { promptLogprobs: true } })))
      yield* Model.generate({ prompt: "p" }).pipe(Effect.provide(poolLayer({ configPath: path })))
      const bodies = server.requests.filter((r) => r.path.startsWith("/v1/") && r.path !== "/v1/models").map((r) => r.body)
      expect(bodies[0]).toMatchObject({ logprobs: 0, return_token_ids: true, return_tokens_as_token_ids: true, prompt_logprobs: 0 })
      expect(bodies[1]).toMatchObject({ logprobs: true, return_token_ids: true, return_tokens_as_token_ids: true, prompt_logprobs: 0 })
      expect(bodies[1]).not.toHaveProperty("top_logprobs")
      expect(bodies[2]).toMatchObject({ logprobs: 3, return_tokens_as_token_ids: false })
      for (const key of ["logprobs", "return_token_ids", "return_tokens_as_token_ids", "prompt_logprobs"]) {
        expect(bodies[3]).not.toHaveProperty(key)
      }
    }))

  it.effect("without promptLogprobs, prompt_logprobs is not asked for", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const path = yield* actor(server.url)
      yield* Model.generate({ prompt: "p" }).pipe(Effect.provide(poolLayer({ configPath: path, tokens: true })))
      const [body] = server.requests.filter((r) => r.path === "/v1/completions").map((r) => r.body)
      expect(body).toMatchObject({ return_token_ids: true })
      expect(body).not.toHaveProperty("prompt_logprobs")
    }))

  it.effect("a bad tokens option is InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(Vllm.Vllm, poolLayer({ tokens: "yes" } as unknown as Vllm.Options)))
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toContain("tokens")
    }))
})

describe("Vllm tokens: decoding what vLLM sends", () => {
  it.effect("completions: prompt ids, completion ids, each token's logprob and id, the prompt token's own prompt logprob", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      server.enqueue("/v1/completions", Server.json(JSON.parse(Server.fixture("vllm-completion-tokens.json"))))
      const path = yield* actor(server.url)
      const log = warnings()
      const response = yield* Model.generate({ prompt: "The capital of France is" }).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: { promptLogprobs: true } }, log.layer))
      )
      expect(response.promptTokenIds).toEqual([785, 6722, 315, 9625, 374])
      // Position 3 holds an alternative (279, more likely) beside the prompt token 9625: the prompt token's is taken.
      expect(response.promptLogprobs).toEqual([null, -7.53125, -0.0859375, -3.28125, -0.6171875])
      const [choice] = response.choices
      expect(choice!.tokenIds).toEqual([12095, 13])
      expect(choice!.logprobs!.map((entry) => [entry.token, entry.tokenId, entry.logprob])).toEqual([
        ["token_id:12095", 12095, -0.012345678901234],
        ["token_id:13", 13, -0.25]
      ])
      expect(log.seen).toEqual([])
    }))

  it.effect("token ids past what an int32 holds (records store int32) are absent, not wrapped to another token", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const body = JSON.parse(Server.fixture("vllm-completion-tokens.json"))
      body.choices[0].token_ids = [2147483648, 13]
      body.choices[0].prompt_token_ids = [4294967296, 6722, 315, 9625, 374]
      body.choices[0].logprobs.tokens = ["token_id:4294967296", "token_id:13"]
      server.enqueue("/v1/completions", Server.json(body))
      const path = yield* actor(server.url)
      const response = yield* Model.generate({ prompt: "The capital of France is" }).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: true }))
      )
      expect(response.promptTokenIds).toBeUndefined()
      const [choice] = response.choices
      expect(choice!.tokenIds).toBeUndefined()
      expect(choice!.logprobs!.map((entry) => entry.tokenId)).toEqual([undefined, 13])
      // The largest int32 is still an id.
      expect(Decode.tokenIds([2147483647])).toEqual([2147483647])
    }))

  it.effect("chat, whole and streamed: prompt ids on the response (first event), token ids per delta; the same answer both ways", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      server.enqueue("/v1/chat/completions", Server.json(JSON.parse(Server.fixture("vllm-chat-tokens.json"))))
      server.enqueue("/v1/chat/completions", Server.sse([...Server.sseData(Server.fixture("vllm-chat-stream-tokens.sse")), "[DONE]"]))
      const path = yield* actor(server.url)
      const log = warnings()
      const [whole, streamed] = yield* Effect.gen(function*() {
        const whole = yield* Model.generate({ messages: [Model.user("hello")] })
        const streamed = yield* Model.accumulate(Model.stream({ messages: [Model.user("hello")] }))
        return [whole, streamed] as const
      }).pipe(Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer)))
      const promptIds = [151644, 872, 198, 14990, 151645, 198, 151644, 77091, 198]
      for (const response of [whole, streamed]) {
        expect(response.promptTokenIds).toEqual(promptIds)
        expect(response.promptLogprobs).toBeUndefined()
        expect(response.choices[0]!.text).toBe("Hi!")
        expect(response.choices[0]!.tokenIds).toEqual([13048, 0, 151645])
        expect(response.choices[0]!.logprobs!.map((entry) => [entry.tokenId, entry.logprob])).toEqual([
          [13048, -0.10546875],
          [0, -0.5],
          [151645, -0.0009765625]
        ])
      }
      expect(log.seen).toEqual([])
    }))

  it.effect("a completions stream with n = 2 interleaved: prompt ids from the first event that has them, token ids per choice", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      // As vLLM streams completions with return_token_ids: `prompt_token_ids` on each choice's first event only.
      const event = (choice: Record<string, unknown>) => ({ id: "cmpl-s", object: "text_completion", created: 1, model: "m", choices: [choice] })
      const lp = (id: number, logprob: number) => ({ tokens: [`token_id:${id}`], token_logprobs: [logprob], top_logprobs: [{ [`token_id:${id}`]: logprob }], text_offset: [0] })
      server.enqueue("/v1/completions", Server.sse([
        event({ index: 0, text: " Par", logprobs: lp(4270, -0.5), token_ids: [4270], prompt_token_ids: [785, 6722], finish_reason: null }),
        event({ index: 1, text: " Ly", logprobs: lp(9119, -2), token_ids: [9119], prompt_token_ids: [785, 6722], finish_reason: null }),
        event({ index: 0, text: "is", logprobs: lp(285, -0.125), token_ids: [285], finish_reason: "stop", stop_reason: null }),
        event({ index: 1, text: "on", logprobs: lp(263, -1), token_ids: [263], finish_reason: "length" }),
        { id: "cmpl-s", object: "text_completion", created: 1, model: "m", choices: [], usage: { prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 } },
        "[DONE]"
      ]))
      const path = yield* actor(server.url)
      const response = yield* Model.accumulate(Model.stream({ prompt: "The capital", n: 2 })).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: true }))
      )
      expect(response.promptTokenIds).toEqual([785, 6722])
      expect(response.choices.map((choice) => [choice.text, choice.tokenIds, choice.logprobs!.map((entry) => entry.logprob)])).toEqual([
        [" Paris", [4270, 285], [-0.5, -0.125]],
        [" Lyon", [9119, 263], [-2, -1]]
      ])
    }))
})

describe("Vllm tokens: recorded real answers", () => {
  // A real vLLM chat answer (Aug 2025, before `return_token_ids` existed) to `logprobs: true` with
  // `return_tokens_as_token_ids`, kept by OpenPipe/ART (see SOURCES.md). Its `bytes` spell the message exactly.
  it.effect("a captured chat answer with \"token_id:N\" logprobs: each token's id and logprob as sent; no id lists invented, one warning", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const captured = JSON.parse(Server.fixture("vllm-chat-token-id-logprobs-captured.json"))
      server.enqueue("/v1/chat/completions", Server.json(captured), Server.json(captured))
      const path = yield* actor(server.url)
      const log = warnings()
      const responses = yield* Effect.all([
        Model.generate({ messages: [Model.user("Hi!")] }),
        Model.generate({ messages: [Model.user("Hi!")] })
      ]).pipe(Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer)))
      const sent = captured.choices[0].logprobs.content as Array<{ token: string; logprob: number }>
      for (const response of responses) {
        const [choice] = response.choices
        expect(choice!.text).toBe("Hello! How can I assist you today?")
        expect(choice!.logprobs!.map((entry) => [entry.token, entry.tokenId, entry.logprob])).toEqual([
          ["token_id:9707", 9707, -0.0017243054462596774],
          ["token_id:0", 0, -0.007611795328557491],
          ["token_id:2585", 2585, -0.03061593696475029],
          ["token_id:646", 646, -1.1920858014491387e-5],
          ["token_id:358", 358, -2.3841855067985307e-7],
          ["token_id:7789", 7789, -0.020548323169350624],
          ["token_id:498", 498, 0],
          ["token_id:3351", 3351, -4.410734163684538e-6],
          ["token_id:30", 30, -2.3841855067985307e-7],
          ["token_id:151645", 151645, -0.0083366259932518]
        ])
        expect(choice!.logprobs!.map((entry) => entry.logprob)).toEqual(sent.map((entry) => entry.logprob))
        // The server sent no `token_ids` / `prompt_token_ids` / `prompt_logprobs` (null): absent, not rebuilt from logprobs.
        expect(choice!.tokenIds).toBeUndefined()
        expect(response.promptTokenIds).toBeUndefined()
        expect(response.promptLogprobs).toBeUndefined()
      }
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("no prompt token ids, completion token ids;")
      expect(log.seen[0]).not.toContain("completion logprobs")
    }))
  // The last event of a real vLLM 0.16.0 `/v1/completions` stream with `logprobs: 5` (no `return_token_ids`, no
  // `return_tokens_as_token_ids`): tokens spelled as text, `prompt_token_ids` / `token_ids` sent as null.
  it.effect("a captured vLLM 0.16.0 completions stream event: logprobs kept, the text token \"7\" is not taken for id 7, null ids absent", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const events = [...Server.sseData(Server.fixture("vllm-completion-stream-event-captured.sse")), "[DONE]"]
      server.enqueue("/v1/completions", Server.sse(events))
      const path = yield* actor(server.url)
      const log = warnings()
      const response = yield* Model.accumulate(Model.stream({ prompt: "p", logprobs: 5 })).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer))
      )
      const [choice] = response.choices
      expect(choice!.text).toBe("7")
      expect(choice!.logprobs).toEqual([{
        token: "7",
        logprob: -0.000024199192921514623,
        topLogprobs: [
          { token: "7", logprob: -0.000024199192921514623 },
          { token: "3", logprob: -11.37502384185791 },
          { token: "1", logprob: -11.93752384185791 },
          { token: "2", logprob: -12.37502384185791 },
          { token: "9", logprob: -14.18752384185791 }
        ]
      }])
      // Digits as token text are not ids: no `tokenId` on the token or on any alternative.
      expect([choice!.logprobs![0], ...choice!.logprobs![0]!.topLogprobs!].filter((entry) => "tokenId" in entry)).toEqual([])
      expect(choice!.tokenIds).toBeUndefined()
      expect(response.promptTokenIds).toBeUndefined()
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("no prompt token ids, completion token ids;")
    }))
})

describe("Vllm tokens: a captured event with prompt token ids", () => {
  // The first event of a real vLLM `/v1/completions` stream (main branch, late October 2025, Qwen3-8B), printed in
  // vllm-project/vllm pull request 27561: `prompt_token_ids` filled on the choice, `token_ids` null. Only this event
  // was posted: the test ends the stream with `[DONE]`.
  it.effect("a captured completions stream event: the prompt's ids kept from the choice, the null completion ids absent", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const events = [...Server.sseData(Server.fixture("vllm-completion-stream-prompt-ids-captured.sse")), "[DONE]"]
      server.enqueue("/v1/completions", Server.sse(events))
      const path = yield* actor(server.url)
      const log = warnings()
      const response = yield* Model.accumulate(Model.stream({ prompt: "Once upon a time, there was a brave knight named" })).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer))
      )
      const [choice] = response.choices
      expect(choice!.text).toBe(" Sir")
      expect(response.promptTokenIds).toEqual([12522, 5193, 264, 882, 11, 1052, 572, 264, 33200, 46609, 6941])
      expect(choice!.tokenIds).toBeUndefined()
      expect(choice!.logprobs).toBeUndefined()
      // What is missing is said once, naming what it is: the prompt's ids are not in the list.
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("the answer has no completion token ids, completion logprobs;")
    }))
})

describe("Vllm tokens: folding a stream", () => {
  it("a stream's log-probabilities and ids grow in place (concat copied the whole list per token: quadratic)", () => {
    const acc = ModelChunks.emptyAccumulator()
    const delta = (id: number): Model.Chunk => ({
      _tag: "TextDelta",
      index: 0,
      text: "a",
      logprobs: [{ token: `token_id:${id}`, logprob: -0.1, tokenId: id }],
      tokenIds: [id]
    })
    ModelChunks.addChunk(acc, delta(5))
    const logprobs = acc.choices.get(0)!.logprobs
    const ids = acc.choices.get(0)!.tokenIds
    for (let i = 0; i < 3; i++) ModelChunks.addChunk(acc, delta(6 + i))
    expect(acc.choices.get(0)!.logprobs).toBe(logprobs)
    expect(acc.choices.get(0)!.tokenIds).toBe(ids)
    expect(logprobs!.map((entry) => entry.tokenId)).toEqual([5, 6, 7, 8])
  })
})

describe("Vllm tokens: absent when not sent", () => {
  it.effect("a server that sends no token data: every token field absent, one warning for two answers", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const completion = JSON.parse(Server.fixture("vllm-completion.json"))
      server.enqueue("/v1/completions", Server.json(completion), Server.json(completion))
      const path = yield* actor(server.url)
      const log = warnings()
      const responses = yield* Effect.all([Model.generate({ prompt: "p" }), Model.generate({ prompt: "p" })]).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer))
      )
      for (const response of responses) {
        expect(response.promptTokenIds).toBeUndefined()
        expect(response.promptLogprobs).toBeUndefined()
        expect(response.choices[0]!.tokenIds).toBeUndefined()
        expect(response.choices[0]!.logprobs).toBeUndefined()
      }
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("prompt token ids, completion token ids, completion logprobs")
    }))

  it.effect("a streamed answer without token ids warns too, once", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "openai" })
      const events = [...Server.sseData(Server.fixture("chat-stream-tool-call-vllm.sse")), "[DONE]"]
      server.enqueue("/v1/chat/completions", Server.sse(events), Server.sse(events))
      const path = yield* actor(server.url)
      const log = warnings()
      const responses = yield* Effect.all([
        Model.accumulate(Model.stream({ messages: [Model.user("search")] })),
        Model.accumulate(Model.stream({ messages: [Model.user("search")] }))
      ]).pipe(Effect.provide(poolLayer({ configPath: path, tokens: true }, log.layer)))
      expect(responses.map((r) => [r.promptTokenIds, r.choices[0]!.tokenIds])).toEqual([[undefined, undefined], [undefined, undefined]])
      expect(log.seen).toHaveLength(1)
    }))

  it.effect("the legacy /generate server: none of the token keys is sent (it would answer 500), the fields are absent, one warning", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* actor(server.url, "generate")
      const log = warnings()
      const response = yield* Model.generate({ prompt: "Once" }).pipe(
        Effect.provide(poolLayer({ configPath: path, tokens: { promptLogprobs: true } }, log.layer))
      )
      expect(response.choices[0]!.text).toBe("Word0 word1 word2 word3 word4 word5 word6 word7")
      expect(response.promptTokenIds).toBeUndefined()
      expect(response.choices[0]!.tokenIds).toBeUndefined()
      const [body] = server.requests.filter((r) => r.path === "/generate").map((r) => r.body)
      expect(Object.keys(body).sort()).toEqual(["max_tokens", "prompt"])
      expect(log.seen).toHaveLength(1)
      expect(log.seen[0]).toContain("legacy /generate server answers text only")
    }))
})
