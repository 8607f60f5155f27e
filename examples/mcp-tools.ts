/**
 * Tools from an MCP server: `@modelcontextprotocol/server-everything` (started over stdio, in the `mcpServers` shape
 * Claude Desktop uses) gives a ReAct agent `get-sum` and `echo`; the server stops when the scope closes.
 * Run alone: `npx tsx examples/mcp-tools.ts`.
 */
import { NodeHttpClient, NodeRuntime, NodeServices } from "@effect/platform-node"
import { Console, Effect, Layer, Stream } from "effect"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { Agent, AgentEvent } from "../src/index.js"
import * as Mcp from "../src/providers/Mcp.js"
import { demoModel } from "./support/model.js"

// In an app: `{ "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"] }`. Here, the copy
// this repo installs, so the example runs offline.
const serverEverything = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
  "dist",
  "index.js"
)

export const config: Mcp.Config = {
  mcpServers: { everything: { command: process.execPath, args: [serverEverything, "stdio"] } }
}

export const prompt = "What is 19 + 23? Echo the result back."

/** What a model would answer, for runs without a server. */
export const script = [
  { toolCalls: [{ name: "get-sum", arguments: { a: 19, b: 23 } }] },
  { toolCalls: [{ name: "echo", arguments: { message: "42" } }] },
  "19 + 23 = 42 (and the server echoed it)."
]

/** Streams the run's events; the MCP server lives as long as this effect's scope. */
export const main = Effect.gen(function*() {
  const { layer, note } = yield* demoModel(script)
  const tools = yield* Mcp.tools(config)
  yield* Console.log(`# MCP tools — ${note}; ${tools.length} tools from server-everything`)
  const agent = Agent.make({ name: "mcp-agent", instructions: "Use the tools, then answer in one sentence.", tools })
  yield* Agent.stream(agent, prompt, { textDeltas: false }).pipe(
    Stream.runForEach((event) => Console.log(AgentEvent.format(event))),
    Effect.provide(layer)
  )
}).pipe(Effect.scoped, Effect.provide(Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)))

if (import.meta.url === `file://${process.argv[1]}`) NodeRuntime.runMain(main)
