/**
 * Tool results that return images: a real MCP server's image content (`@modelcontextprotocol/server-everything`'s
 * `get-tiny-image`) reaches the model server as an image it sees, through every layer a tool result crosses.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema, Stream } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pathToFileURL } from "node:url"
import * as Agent from "../../src/core/Agent.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Budget from "../../src/core/Budget.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as EffectAi from "../../src/providers/EffectAi.js"
import * as Mcp from "../../src/providers/Mcp.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as Vllm from "../../src/providers/Vllm.js"
import * as Server from "../support/openAiServer.js"
import { marker } from "../support/processes.js"

const everythingDir = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
  "dist"
)
const stdioServer = (): Mcp.ServerConfig => ({ command: process.execPath, args: [join(everythingDir, "index.js"), "stdio", marker()] })

/** The PNG the server's `get-tiny-image` tool returns, read from the server's own module. */
const tinyImage = Effect.promise(async () =>
  (await import(pathToFileURL(join(everythingDir, "tools", "get-tiny-image.js")).href) as { MCP_TINY_IMAGE: string }).MCP_TINY_IMAGE
)

const services = Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)

const completion = (message: Record<string, unknown>, finish: string) =>
  Server.json({
    id: "chatcmpl-1",
    object: "chat.completion",
    created: 1,
    model: "vision-model",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
  })

const clientLayer = (server: Server.LoopbackServer) =>
  OpenAiCompatible.layer({ baseUrl: server.url, model: "vision-model", maxAttempts: 1 }).pipe(
    Layer.provide(NodeHttpClient.layerUndici),
    Layer.orDie
  )

const chatBodies = (server: Server.LoopbackServer) =>
  server.requests.filter((r) => r.path === "/v1/chat/completions").map((r) => r.body as { messages: Array<unknown> })

// A real 1×1 PNG.
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

/** Two tool results of one turn, the first with an image: the request the model reads next. */
const twoResults: Model.Request = {
  messages: [
    Model.user("Take a screenshot and read the clock."),
    Model.assistant("", [{ id: "c1", name: "screenshot", arguments: "{}" }, { id: "c2", name: "clock", arguments: "{}" }]),
    Model.toolResult("c1", "screenshot", "[image image/png: attached]", [Model.imagePart({ data: png, mediaType: "image/png" })]),
    Model.toolResult("c2", "clock", "12:00")
  ]
}
const twoResultsWire = [
  { role: "user", content: "Take a screenshot and read the clock." },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "c1", type: "function", function: { name: "screenshot", arguments: "{}" } },
      { id: "c2", type: "function", function: { name: "clock", arguments: "{}" } }
    ]
  },
  { role: "tool", tool_call_id: "c1", content: "[image image/png: attached]" },
  { role: "tool", tool_call_id: "c2", content: "12:00" },
  {
    role: "user",
    content: [
      { type: "text", text: "Attached by the result of tool call c1 (screenshot):" },
      { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }
    ]
  }
]

describe("Tool results with images", () => {
  it.live("an MCP tool's image reaches the model server as an image_url in a user message after the tool results, exactly", () =>
    Effect.gen(function*() {
      const image = yield* tinyImage
      const server = yield* Server.make()
      server.enqueue(
        "/v1/chat/completions",
        completion({ content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get-tiny-image", arguments: "{}" } }] }, "tool_calls"),
        completion({ content: "The MCP logo." }, "stop")
      )
      const tools = yield* Mcp.tools({ mcpServers: { everything: stdioServer() } })
      const agent = Agent.make({ name: "looker", instructions: "", tools: tools.filter((tool) => tool.name === "get-tiny-image") })
      const result = yield* Agent.run(agent, "Show me the logo.").pipe(Effect.provide(clientLayer(server)))
      expect(result.output).toBe("The MCP logo.")
      const sent = chatBodies(server)
      expect(sent).toHaveLength(2)
      expect(sent[1]!.messages).toEqual([
        { role: "user", content: "Show me the logo." },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_1", type: "function", function: { name: "get-tiny-image", arguments: "{}" } }]
        },
        {
          role: "tool",
          tool_call_id: "call_1",
          content: "Here's the image you requested:\n[image image/png: attached]\nThe image above is the MCP logo."
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Attached by the result of tool call call_1 (get-tiny-image):" },
            { type: "image_url", image_url: { url: `data:image/png;base64,${image}` } }
          ]
        }
      ])
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.live("the ToolReturned event describes the image (type, media type, size) without its bytes", () =>
    Effect.gen(function*() {
      const image = yield* tinyImage
      const tools = yield* Mcp.tools({ mcpServers: { everything: stdioServer() } })
      const agent = Agent.make({ name: "looker", instructions: "", tools })
      const { events, requests } = yield* Effect.gen(function*() {
        const events = yield* Stream.runCollect(Agent.stream(agent, "Show me the logo."))
        return { events: Array.from(events), requests: yield* ScriptedModel.calls }
      }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "get-tiny-image", arguments: {} }] }, "The MCP logo."])))
      const returned = events.find((event): event is AgentEvent.Of<"ToolReturned"> => event._tag === "ToolReturned")!
      expect(returned.content).toBe("Here's the image you requested:\n[image image/png: attached]\nThe image above is the MCP logo.")
      expect(returned.attachments).toEqual([{ type: "image", mediaType: "image/png", bytes: Model.base64Bytes(image) }])
      expect(JSON.stringify(events)).not.toContain(image.slice(0, 64))
      // The model itself got the bytes, in the tool message's parts.
      const tool = requests.at(-1)!.messages!.find((message) => message.role === "tool")
      expect(tool).toMatchObject({ role: "tool", parts: [{ type: "image", data: image, mediaType: "image/png" }] })
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.effect("a tool made with Tool.make returns an image through its parts option: the model server receives it", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      server.enqueue(
        "/v1/chat/completions",
        completion({ content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "chart", arguments: "{\"of\":\"sales\"}" } }] }, "tool_calls"),
        completion({ content: "Sales are up." }, "stop")
      )
      const chart = Tool.make({
        name: "chart",
        description: "Draws a chart",
        parameters: Schema.Struct({ of: Schema.String }),
        handler: ({ of }) => Effect.succeed({ title: `chart of ${of}`, png }),
        format: (drawn) => drawn.title,
        parts: (drawn) => [Model.imagePart({ data: drawn.png, mediaType: "image/png" })]
      })
      const agent = Agent.make({ name: "analyst", instructions: "", tools: [chart] })
      yield* Agent.run(agent, "How are sales?").pipe(Effect.provide(clientLayer(server)))
      expect(chatBodies(server)[1]!.messages.slice(2)).toEqual([
        { role: "tool", tool_call_id: "call_1", content: "chart of sales" },
        {
          role: "user",
          content: [
            { type: "text", text: "Attached by the result of tool call call_1 (chart):" },
            { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } }
          ]
        }
      ])
    }))

  it.effect("two results of one turn: both tool messages first, then one user message with the image (OpenAI's order)", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      yield* Model.generate(twoResults).pipe(Effect.provide(clientLayer(server)))
      expect(chatBodies(server)[0]!.messages).toEqual(twoResultsWire)
    }))

  it.effect("the effect/ai bridge carries a result's image both ways (modelOutput file parts): the same wire body", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const languageModel = EffectAi.toLanguageModel.pipe(Layer.provide(clientLayer(server)))
      yield* Model.generate(twoResults).pipe(Effect.provide(EffectAi.fromLanguageModel(languageModel)))
      expect(chatBodies(server)[0]!.messages).toEqual([
        ...twoResultsWire.slice(0, 2),
        // Across effect/ai the text is rebuilt from modelOutput: the tool's text, then the file named where it was.
        { role: "tool", tool_call_id: "c1", content: "[image image/png: attached]\n[image/png: attached]" },
        ...twoResultsWire.slice(3)
      ])
    }))

  it.effect("a bad tool part is an InvalidContent naming messages[i].parts[j]; the budget counts a result's image", () =>
    Effect.gen(function*() {
      const bad = Model.toolResult("c1", "screenshot", "x", [Model.imagePart({ data: png, mediaType: "image/tiff" })])
      const invalid = Model.checkContent([Model.user("hi"), bad])!
      expect(invalid.message).toBe(
        "messages[1].parts[0]: unknown image media type \"image/tiff\" (known: image/png, image/jpeg, image/gif, image/webp)"
      )
      const plain = Budget.estimateInputTokens({ messages: [Model.toolResult("c1", "screenshot", "x")] })
      const withImage = Budget.estimateInputTokens({
        messages: [Model.toolResult("c1", "screenshot", "x", [Model.imagePart({ data: png, mediaType: "image/png" })])]
      })
      expect(withImage - plain).toBe(Budget.estimatedImageTokens)
      const server = yield* Server.make()
      const error = yield* Effect.flip(Model.generate({ messages: [Model.user("hi"), bad] })).pipe(Effect.provide(clientLayer(server)))
      expect(error._tag).toBe("InvalidContent")
      expect(server.requests).toHaveLength(0)
    }))

  it.effect("a /generate actor refuses a tool result's image: InvalidContent naming it, nothing sent", () =>
    Effect.gen(function*() {
      const server = yield* Server.make({ api: "generate" })
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-tool-parts-" })
      yield* fs.writeFileString(`${dir}/actors.yaml`, `actors:\n  - name: legacy\n    base_url: ${server.url}\n    api: generate\n`)
      const layer = Vllm.layer({ configPath: `${dir}/actors.yaml` }).pipe(Layer.provide(services))
      const error = yield* Effect.flip(Model.generate({ messages: twoResults.messages!.filter((m) => m.role !== "assistant") })).pipe(
        Effect.provide(layer)
      )
      expect(error.message).toMatch(/^messages\[1\]\.parts\[0\]: actor legacy serves the legacy \/generate API, which takes a text prompt only, not an image part/)
      expect(server.requests.filter((r) => r.path === "/generate")).toHaveLength(0)
    }).pipe(Effect.provide(NodeServices.layer)))
})
