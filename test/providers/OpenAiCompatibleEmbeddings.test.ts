/**
 * `OpenAiCompatible.layerEmbeddingModel`: `POST /v1/embeddings` against the loopback server replaying a recorded
 * OpenAI answer (test/fixtures/openai-compatible/embeddings-openai-ada-002.json), the checks on every answer (count,
 * dimensions, indexes), batching, base64 (decoded alike by the official `openai` package), errors and retries.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import OpenAI from "openai"
import { EmbeddingModel, OpenAiCompatible } from "../../src/index.js"
import { trackSleeps } from "../support/clock.js"
import * as Server from "../support/openAiServer.js"
import { adjustWhenSleepingFor, eventually } from "../support/testClockIo.js"

const recorded = JSON.parse(Server.fixture("embeddings-openai-ada-002.json")) as {
  readonly data: ReadonlyArray<{ readonly embedding: ReadonlyArray<number> }>
}
const ada = recorded.data[0]!.embedding

const withClient = <A, E>(
  body: (server: Server.LoopbackServer) => Effect.Effect<A, E, EmbeddingModel.EmbeddingModel>,
  options: Partial<OpenAiCompatible.EmbeddingOptions> = {}
) =>
  Effect.andThen(
    trackSleeps,
    Effect.flatMap(Server.make(), (server) =>
      Effect.provide(
        body(server),
        OpenAiCompatible.layerEmbeddingModel({ baseUrl: server.url, model: "text-embedding-ada-002", ...options }).pipe(
          Layer.provide(NodeHttpClient.layerUndici)
        )
      ))
  )

const embeddingsRequests = (server: Server.LoopbackServer) => server.requests.filter((r) => r.path === "/v1/embeddings")

/** An answer of `vectors` with their indexes (in the order given). */
const answer = (vectors: ReadonlyArray<ReadonlyArray<number> | string>, indexes?: ReadonlyArray<number>) =>
  Server.json({
    object: "list",
    data: vectors.map((embedding, i) => ({ object: "embedding", index: indexes?.[i] ?? i, embedding })),
    model: "text-embedding-ada-002",
    usage: { prompt_tokens: 1, total_tokens: 1 }
  })

const base64Of = (vector: ReadonlyArray<number>) => Buffer.from(new Float32Array(vector).buffer).toString("base64")

describe("OpenAiCompatible embeddings: recorded payload", () => {
  it.effect("the recorded OpenAI answer: one vector of 1536 floats, as sent; the request names model, input and float", () =>
    withClient((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/embeddings", Server.text(200, Server.fixture("embeddings-openai-ada-002.json"), "application/json"))
        const [vector] = yield* EmbeddingModel.embed(["The food was delicious and the waiter..."])
        expect(vector).toHaveLength(1536)
        expect(vector!.slice(0, 3)).toEqual([0.0022786001, -0.009292118, 0.015702665])
        expect(vector).toEqual(ada)
        expect(embeddingsRequests(server)[0]!.body).toEqual({
          model: "text-embedding-ada-002",
          input: ["The food was delicious and the waiter..."],
          encoding_format: "float"
        })
      })
    ))

  it.effect("base64: decoded to the same float32 values as the official openai package decodes them", () =>
    withClient((server) =>
      Effect.gen(function*() {
        const encoded = answer([base64Of(ada)])
        server.enqueue("/v1/embeddings", encoded, encoded)
        const [ours] = yield* EmbeddingModel.embed(["The food was delicious and the waiter..."])
        // The openai package asks for base64 by default and decodes it itself.
        const client = new OpenAI({ apiKey: "test", baseURL: `${server.url}/v1`, maxRetries: 0 })
        const theirs = yield* Effect.promise(() => client.embeddings.create({ model: "text-embedding-ada-002", input: "x" }))
        expect(embeddingsRequests(server).map((r) => r.body.encoding_format)).toEqual(["base64", "base64"])
        expect(ours).toEqual(theirs.data[0]!.embedding)
        expect(ours).toEqual(Array.from(new Float32Array(ada)))
      }), { encodingFormat: "base64" }))
})

describe("OpenAiCompatible embeddings: answers are checked", () => {
  it.effect("a wrong count, a wrong dimension, a repeated index: MalformedResponse naming it", () =>
    withClient((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/embeddings", answer([[1, 0, 0], [0, 1, 0]]))
        const count = yield* Effect.flip(EmbeddingModel.embed(["one"]))
        expect(count).toMatchObject({ _tag: "MalformedResponse" })
        expect(count.message).toBe(`EmbeddingModel "text-embedding-ada-002": 1 texts were sent, 2 vectors came back`)

        server.enqueue("/v1/embeddings", answer([[1, 0, 0], [0, 1]]))
        const dimension = yield* Effect.flip(EmbeddingModel.embed(["one", "two"]))
        expect(dimension.message).toBe(`EmbeddingModel "text-embedding-ada-002": the vector of text 1 has 2 dimensions, not 3 (the model's dimensions)`)

        server.enqueue("/v1/embeddings", answer([[1, 0, 0], [0, 1, 0]], [1, 1]))
        const index = yield* Effect.flip(EmbeddingModel.embed(["one", "two"]))
        expect(index.message).toContain("data[1].index 1: not each of indexes 0..1 once")

        server.enqueue("/v1/embeddings", answer([[0, 0, 0]]))
        const zero = yield* Effect.flip(EmbeddingModel.embed(["one"]))
        expect(zero.message).toContain("the vector of text 0 cannot be compared: it is all zeros")

        server.enqueue("/v1/embeddings", Server.json({ object: "list", data: [{ embedding: "not base64!" }] }))
        expect((yield* Effect.flip(EmbeddingModel.embed(["one"]))).message).toContain("is a string but not base64")

        server.enqueue("/v1/embeddings", Server.json({ object: "list", data: "nope" }))
        expect((yield* Effect.flip(EmbeddingModel.embed(["one"]))).message).toMatch(/^the embeddings answer does not match the protocol/)
      }), { dimensions: 3, maxAttempts: 1 }))

  it.effect("inputs larger than maxBatchSize go in batches, in order; answers out of order are put back by index", () =>
    withClient((server) =>
      Effect.gen(function*() {
        server.enqueue(
          "/v1/embeddings",
          answer([[0, 1], [1, 0]], [1, 0]),
          answer([[1, 1], [2, 1]]),
          answer([[3, 1]])
        )
        const vectors = yield* EmbeddingModel.embed(["a", "b", "c", "d", "e"])
        expect(vectors).toEqual([[1, 0], [0, 1], [1, 1], [2, 1], [3, 1]])
        expect(embeddingsRequests(server).map((r) => r.body.input)).toEqual([["a", "b"], ["c", "d"], ["e"]])
        // An empty input is no call.
        expect(yield* EmbeddingModel.embed([])).toEqual([])
        expect(embeddingsRequests(server)).toHaveLength(3)
      }), { maxBatchSize: 2 }))

  it.effect("the server's error body is the typed error (400 → InvalidRequest with its message); 500 is retried", () =>
    withClient((server) =>
      Effect.gen(function*() {
        server.enqueue("/v1/embeddings", Server.json({ error: { message: "dimensions is not supported by this model", type: "BadRequestError" } }, { status: 400 }))
        const refused = yield* Effect.flip(EmbeddingModel.embed(["x"]))
        expect(refused).toMatchObject({ _tag: "InvalidRequest", status: 400 })
        expect(refused.message).toContain("dimensions is not supported by this model")
        expect(embeddingsRequests(server)).toHaveLength(1)

        server.enqueue("/v1/embeddings", Server.text(500, "boom"), answer([[1, 2]]))
        const fiber = yield* Effect.forkChild(EmbeddingModel.embed(["x"]))
        yield* adjustWhenSleepingFor({ withinMs: 121 })
        yield* eventually(() => embeddingsRequests(server).length === 3, "the retry")
        expect(yield* Fiber.join(fiber)).toEqual([[1, 2]])
      }), { initialDelay: "100 millis" }))

  it.effect("bad options are refused before any call, naming the field", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        OpenAiCompatible.makeEmbeddingModel({ baseUrl: "localhost:8000", model: "m" }).pipe(Effect.provide(NodeHttpClient.layerUndici))
      )
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toContain("baseUrl")
      const dims = yield* Effect.flip(
        OpenAiCompatible.makeEmbeddingModel({ baseUrl: "http://127.0.0.1:1", model: "m", dimensions: 0 }).pipe(Effect.provide(NodeHttpClient.layerUndici))
      )
      expect(dims.message).toContain("dimensions")
    }))
})
