/**
 * valet's agents as an MCP server, in code: two agents (a ReAct assistant and a Self-Refine writer) become MCP
 * tools on stdin / stdout, for any MCP client (Claude Desktop, Cursor, VS Code, the MCP SDK). `valet mcp --config
 * valet.yaml` does the same from a file.
 * Run it as an MCP client would: `{ "command": "npx", "args": ["tsx", "examples/mcp-server.ts"] }`.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect, Layer } from "effect"
import { Agent, Agents, SelfRefine } from "../src/index.js"
import * as McpAgents from "../src/serve/McpAgents.js"
import { demoModel } from "./support/model.js"

/** What a model would answer, for runs without a server (each run starts the script again). */
export const scripts = {
  assistant: ["Paris is the capital of France."],
  writer: ["Paris is the capital of France", "Add a full stop.", "Paris is the capital of France."]
}

/** The agents, on the configured model server or on their scripts. */
export const agents = Effect.gen(function*() {
  const assistant = yield* demoModel(scripts.assistant)
  const writer = yield* demoModel(scripts.writer)
  return Agents.layer([
    {
      name: "assistant",
      description: "Answers a question in one sentence.",
      architecture: "react",
      agent: Agent.make({ name: "assistant", instructions: "Answer in one sentence.", model: assistant.layer })
    },
    {
      name: "writer",
      description: "Drafts an answer, has it critiqued, and refines it.",
      architecture: "self_refine",
      agent: Agent.make({
        name: "writer",
        instructions: "You write short, exact prose.",
        architecture: SelfRefine.makeUnsafe({ maxRounds: 1 }),
        model: writer.layer
      })
    }
  ])
}).pipe(Layer.unwrap)

/**
 * The server: stdio in, stdio out, until the client closes stdin — then the runs in flight are stopped and the
 * program ends normally (exit 0). At most two runs at once; more calls wait.
 */
export const server = McpAgents.serveStdio({ name: "valet-example", maxConcurrentRuns: 2 }).pipe(Effect.provide(agents))

if (import.meta.url === `file://${process.argv[1]}`) {
  server.pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain)
}
