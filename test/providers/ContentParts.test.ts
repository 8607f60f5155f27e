import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Result, Schema } from "effect"
import type { ChatCompletionContentPart, ChatCompletionMessageParam } from "openai/resources/chat/completions"
import { Budget, Model, OpenAiCompatible } from "../../src/index.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"

// A real 1×1 PNG (the bytes every PNG encoder writes for one transparent pixel).
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
// "%PDF-1.4\n" and a few bytes: the wire test checks where the bytes go, not what a PDF reader makes of them.
const pdf = "JVBERi0xLjQKJcfsj6IK"
const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="

const decodeRequest = Schema.decodeUnknownResult(Model.Request)

const withParts = (...parts: ReadonlyArray<Model.Part>): Model.Request => ({
  messages: [Model.system("Describe."), Model.user(parts)]
})

describe("Model content parts: the schema and its checks", () => {
  it("text content stays a plain string; parts decode; textOf joins the text parts", () => {
    const request = {
      messages: [
        { role: "user", content: "plain" },
        {
          role: "user",
          content: [
            { type: "text", text: "What is in" },
            { type: "image", url: "https://example.com/cat.png", detail: "low" },
            { type: "text", text: "this picture?" },
            { type: "file", data: pdf, mediaType: "application/pdf", name: "a.pdf" },
            { type: "audio", data: wav, format: "wav" }
          ]
        }
      ]
    }
    const decoded = decodeRequest(request)
    expect(Result.isSuccess(decoded)).toBe(true)
    const messages = Result.getOrThrow(decoded).messages!
    expect(messages[0]!.content).toBe("plain")
    expect(Model.textOf(messages[1]!.content)).toBe("What is in\nthis picture?")
  })

  it("an unknown media type, a file: URL, two sources: refused by the schema naming the part's path", () => {
    const refused = (part: unknown) => {
      const decoded = decodeRequest({ messages: [{ role: "user", content: "hi" }, { role: "user", content: [{ type: "text", text: "x" }, part] }] })
      expect(Result.isFailure(decoded)).toBe(true)
      return String(Result.isFailure(decoded) ? decoded.failure : "")
    }
    const tiff = refused({ type: "image", data: png, mediaType: "image/tiff" })
    expect(tiff).toContain("unknown image media type \"image/tiff\"")
    expect(tiff).toContain("[\"messages\"][1][\"content\"][1]")
    expect(refused({ type: "image", url: "file:///etc/passwd" })).toContain("the URL scheme \"file:\" is not allowed (only http:, https: and data:)")
    expect(refused({ type: "file", url: "ftp://x/a.pdf", mediaType: "application/pdf" })).toContain("\"ftp:\" is not allowed")
    expect(refused({ type: "image", url: "https://x/a.png", data: png, mediaType: "image/png" })).toContain("either `url` or `data`")
    expect(refused({ type: "file", data: pdf, mediaType: "application/x-msdownload" })).toContain("unknown file media type")
    expect(refused({ type: "audio", data: "not base64!", format: "wav" })).toContain("not base64")
    expect(refused({ type: "audio", data: wav, format: "aiff" })).toBeTruthy()
  })

  it("a data: URL is held to the media types and base64 its part's fields are (it was let through unread)", () => {
    const refused = (part: Model.Part) => Model.partProblem(part)
    expect(refused({ type: "image", url: "data:text/html;base64,PHNjcmlwdD4=" })).toContain("unknown image media type \"text/html\" in the data: URL")
    expect(refused({ type: "image", url: "DATA:image/svg+xml;base64,PHN2Zz48L3N2Zz4=" })).toContain("\"image/svg+xml\"")
    expect(refused({ type: "image", url: "data:image/png,<script>alert(1)</script>" })).toContain("must be `data:<media type>;base64,<data>`")
    expect(refused({ type: "image", url: "data:image/png;base64,!!not base64!!" })).toContain("not base64")
    expect(refused({ type: "file", url: "data:application/x-msdownload;base64,TVo=", mediaType: "application/pdf" })).toContain("unknown file media type")
    expect(refused({ type: "image", url: `data:image/png;base64,${png}` })).toBeUndefined()
    expect(refused({ type: "image", url: "https://example.com/a.png" })).toBeUndefined()
  })

  it("checkContent names the message and part, and applies the byte cap", () => {
    const messages = [Model.user("hi"), Model.user([Model.textPart("look"), Model.imagePart({ data: png, mediaType: "image/png" })])]
    expect(Model.checkContent(messages)).toBeUndefined()
    const capped = Model.checkContent(messages, 40)!
    expect(capped._tag).toBe("InvalidContent")
    expect(capped.messageIndex).toBe(1)
    expect(capped.partIndex).toBe(1)
    expect(capped.message).toBe("messages[1].content[1]: the data is 70 bytes, over the cap of 40")
    expect(capped.retryable).toBe(false)
  })

  it("Budget counts an image as estimatedImageTokens and file bytes per kilobyte", () => {
    const text = Budget.estimateInputTokens({ messages: [Model.user("abcd")] })
    const image = Budget.estimateInputTokens({
      messages: [Model.user([Model.textPart("abcd"), Model.imagePart({ url: "https://example.com/a.png" })])]
    })
    expect(image - text).toBe(Budget.estimatedImageTokens)
    const kilobytes = Budget.estimateInputTokens({
      messages: [Model.user([Model.textPart("abcd"), Model.filePart({ data: new Uint8Array(4096), mediaType: "application/pdf" })])]
    })
    expect(kilobytes - text).toBe(4 * Budget.estimatedTokensPerKilobyte)
  })
})

const clientLayer = (server: Server.LoopbackServer) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "test-model" }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const chatBodies = (server: Server.LoopbackServer) =>
  server.requests.filter((r) => r.path === "/v1/chat/completions").map((r) => r.body as { messages: Array<ChatCompletionMessageParam> })

describe("OpenAiCompatible: content parts on the wire", () => {
  it.effect("text, image URL, image bytes, audio and a PDF go as OpenAI's content parts, exactly", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const request = withParts(
        Model.textPart("What is in these?"),
        Model.imagePart({ url: "https://example.com/cat.png" }),
        { ...Model.imagePart({ data: png, mediaType: "image/png" }), detail: "high" },
        Model.audioPart(wav, "wav"),
        Model.filePart({ data: pdf, mediaType: "application/pdf", name: "report.pdf" })
      )
      yield* Model.generate(request).pipe(Effect.provide(clientLayer(server)))
      // Typed with the `openai` package's own request types: the shape is the one its SDK sends.
      const expected: Array<ChatCompletionContentPart> = [
        { type: "text", text: "What is in these?" },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
        { type: "image_url", image_url: { url: `data:image/png;base64,${png}`, detail: "high" } },
        { type: "input_audio", input_audio: { data: wav, format: "wav" } },
        { type: "file", file: { file_data: `data:application/pdf;base64,${pdf}`, filename: "report.pdf" } }
      ]
      const sent = chatBodies(server)
      expect(sent).toHaveLength(1)
      expect(sent[0]!.messages).toEqual([{ role: "system", content: "Describe." }, { role: "user", content: expected }])
    }))

  it.effect("plain text content is sent as a string, as before parts", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      yield* Model.generate({ messages: [Model.user("hi")] }).pipe(Effect.provide(clientLayer(server)))
      expect(chatBodies(server)[0]!.messages).toEqual([{ role: "user", content: "hi" }])
    }))

  it.effect("a bad part is an InvalidContent naming it, and nothing is sent", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const bad = (part: Model.Part) =>
        Effect.flip(Model.generate(withParts(Model.textPart("x"), part))).pipe(Effect.provide(clientLayer(server)))
      const gif = yield* bad({ type: "image", data: png, mediaType: "image/bmp" })
      expect(gif._tag).toBe("InvalidContent")
      expect(gif.message).toBe(
        "messages[1].content[1]: unknown image media type \"image/bmp\" (known: image/png, image/jpeg, image/gif, image/webp)"
      )
      const huge = yield* bad(Model.filePart({ data: new Uint8Array(Model.defaultMaxPartBytes + 1), mediaType: "application/pdf" }))
      expect(huge.message).toBe(`messages[1].content[1]: the data is ${Model.defaultMaxPartBytes + 1} bytes, over the cap of ${Model.defaultMaxPartBytes}`)
      const linked = yield* bad(Model.filePart({ url: "https://example.com/a.pdf", mediaType: "application/pdf" }))
      expect(linked.message).toMatch(/^messages\[1\]\.content\[1\]: a application\/pdf file by URL cannot be sent/)
      const streamed = yield* Effect.flip(Model.streamInto(withParts(Model.imagePart({ url: "gopher://x/a.png" })), () => Effect.void)).pipe(
        Effect.provide(clientLayer(server))
      )
      expect(streamed.message).toContain("messages[1].content[0]: the URL scheme \"gopher:\" is not allowed")
      expect(chatBodies(server)).toHaveLength(0)
    }))

  it.effect("a file given as a data: URL goes out as its file_data (it is the bytes), not refused as a file by URL", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const url = "data:application/pdf;base64,JVBERi0xLjQKJcfsj6IK"
      yield* Model.generate(withParts(Model.filePart({ url, mediaType: "application/pdf", name: "report.pdf" }))).pipe(
        Effect.provide(clientLayer(server))
      )
      expect(chatBodies(server)[0]!.messages.at(-1)!.content).toEqual([
        { type: "file", file: { file_data: url, filename: "report.pdf" } }
      ])
    }))
})

const poolFile = (text: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-parts-" })
    const path = `${dir}/vllm_actors.yaml`
    yield* fs.writeFileString(path, text)
    return path
  }).pipe(Effect.provide(NodeServices.layer))

describe("Vllm: the legacy /generate server and parts", () => {
  it.effect("an image part cannot go to a /generate actor: InvalidContent naming it, nothing sent; text parts can", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const path = yield* poolFile(`actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const layer = Vllm.layer({ configPath: path }).pipe(Layer.provide(Layer.merge(NodeHttpClient.layerUndici, NodeServices.layer)))
      const error = yield* Effect.flip(Model.generate(withParts(Model.textPart("x"), Model.imagePart({ url: "https://example.com/a.png" })))).pipe(
        Effect.provide(layer)
      )
      expect(error._tag).toBe("InvalidContent")
      expect(error.message).toMatch(/^messages\[1\]\.content\[1\]: actor legacy serves the legacy \/generate API, which takes a text prompt only, not an image part/)
      expect(server.requests.filter((r) => r.path === "/generate")).toHaveLength(0)
      yield* Model.generate(withParts(Model.textPart("only"), Model.textPart("text"))).pipe(Effect.provide(layer))
      const sent = server.requests.filter((r) => r.path === "/generate").map((r) => r.body as { prompt: string })
      expect(sent).toHaveLength(1)
      expect(sent[0]!.prompt).toContain("User: only\ntext")
    }))
})
