/**
 * `valet mcp --config valet.yaml`: the config's agents as MCP tools, over stdin / stdout (for a client that starts
 * valet as a process: Claude Desktop, Cursor, VS Code, the MCP SDK's stdio transport), or with `--http` as a
 * Streamable HTTP server at `http://<host>:<port>/mcp`. Runs until interrupted (or, on stdio, until the client
 * closes stdin). On stdio nothing but the protocol is written to stdout: notes go to stderr.
 */
import { createServer } from "node:http"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { HttpRouter, HttpServer } from "effect/http"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as Agents from "../../serve/Agents.js"
import * as McpAgents from "../../serve/McpAgents.js"
import { version } from "./version.js"

const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

/** `valet mcp`. */
export const mcpCommand = Command.make(
  "mcp",
  {
    config: Flag.File("config", { mustExist: true }).pipe(
      Flag.withDescription("The valet.yaml whose agents become MCP tools.")
    ),
    http: Flag.Boolean("http").pipe(
      Flag.withDescription("Serve Streamable HTTP at http://<host>:<port>/mcp instead of stdin / stdout."),
      Flag.withDefault(false)
    ),
    host: Flag.String("host").pipe(Flag.withDescription("With --http: the address to listen on (default: the config's server.host, else 127.0.0.1)."), Flag.optional),
    port: Flag.Int("port").pipe(
      Flag.filter((port) => port >= 0 && port <= 65535, () => "a port number 0-65535"),
      Flag.withDescription("With --http: the port (default: the config's server.port, else 8787; 0 picks a free one)."),
      Flag.optional
    )
  },
  (values) =>
    Effect.gen(function*() {
      const loaded = yield* AgentConfig.load(values.config)
      const agents = Layer.effect(Agents.Agents, AgentConfig.build(loaded)).pipe(Layer.provide(NodeHttpClient.layerUndici))
      const info = { name: "valet", version }
      if (!values.http) {
        yield* note(`valet mcp: ${Object.keys(loaded.config.agents).length} agents on stdio (${values.config})`)
        return yield* Layer.launch(McpAgents.layerStdio(info).pipe(Layer.provide(agents)))
      }
      const host = Option.getOrElse(values.host, () => loaded.config.server.host)
      const port = Option.getOrElse(values.port, () => loaded.config.server.port)
      const server = HttpRouter.serve(McpAgents.layerHttp({ ...info, path: "/mcp" }).pipe(Layer.provide(agents)), {
        disableLogger: true,
        disableListenLog: true
      }).pipe(Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port, host })))
      return yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(server)
        yield* HttpServer.addressFormattedWith((address) =>
          note(`valet mcp: ${Object.keys(loaded.config.agents).length} agents at ${address}/mcp`)
        ).pipe(Effect.provideContext(context))
        return yield* Effect.never
      }))
    })
).pipe(
  Command.withDescription(
    "Serves the agents of a valet.yaml as MCP tools (input: a string; answer: the run's output; progress " +
      "notifications from its events): over stdin / stdout, or with --http at http://<host>:<port>/mcp."
  )
)
