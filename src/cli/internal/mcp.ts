/**
 * `valet mcp --config valet.yaml`: the config's agents as MCP tools, over stdin / stdout (for a client that starts
 * valet as a process: Claude Desktop, Cursor, VS Code, the MCP SDK's stdio transport), or with `--http` as a
 * Streamable HTTP server at `http://<host>:<port>/mcp`. The config's `server:` limits apply: at most
 * `maxConcurrentRuns` runs at once (more calls wait), no message longer than `maxBodyBytes`. Runs until
 * interrupted, or on stdio until the client closes stdin: then the runs in flight are stopped and it exits 0. On
 * stdio nothing but the protocol is written to stdout: notes and logs go to stderr.
 */
import { Console } from "node:console"
import { createServer } from "node:http"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as Agents from "../../serve/Agents.js"
import * as McpAgents from "../../serve/McpAgents.js"
import * as Server from "../../serve/Server.js"
import { exposureWarning, guardSettings } from "./serverGuard.js"
import { version } from "./version.js"

const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

/**
 * Points the global console's stdout methods at stderr: on stdio, stdout carries the protocol alone, and a library
 * that logs with `console.log` (outside effect's loggers, which `McpAgents.serveStdio` already sends to stderr)
 * would corrupt it.
 */
const keepStdoutForTheProtocol = () => {
  const stderr = new Console({ stdout: process.stderr, stderr: process.stderr })
  for (const method of ["log", "info", "debug", "dir", "dirxml", "table", "group", "groupCollapsed", "groupEnd"] as const) {
    Object.assign(console, { [method]: stderr[method].bind(stderr) })
  }
}

/**
 * The app `valet mcp --http` serves: the MCP endpoint at `/mcp` with the config's limits, behind the same guard as
 * `valet serve` (the token on every route but `GET /health`, the Host / Origin allow-list, the body cap, JSON errors),
 * on the `HttpRouter` in context.
 */
export const httpApp = (options: McpAgents.Options, guard: Server.GuardOptions) =>
  Layer.mergeAll(
    McpAgents.layerHttp({ ...options, path: "/mcp" }),
    // What a load balancer or supervisor polls; the one route open without the token, as on `valet serve`.
    HttpRouter.add("GET", "/health", HttpServerResponse.jsonUnsafe({ status: "ok" })),
    // A refusal at /mcp is a JSON-RPC error, as an MCP client reads it.
    Server.guard({ ...guard, errorShape: (path) => (path === "/mcp" ? "json-rpc" : "valet") })
  )

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
      const { maxBodyBytes, maxConcurrentRuns } = loaded.config.server
      const options = { name: "valet", version, maxConcurrentRuns, maxBodyBytes }
      const count = Object.keys(loaded.config.agents).length
      if (!values.http) {
        keepStdoutForTheProtocol()
        yield* note(`valet mcp: ${count} agents on stdio (${values.config})`)
        // Returns when the client closes stdin, its runs interrupted: exit code 0.
        return yield* McpAgents.serveStdio(options).pipe(Effect.provide(agents))
      }
      const host = Option.getOrElse(values.host, () => loaded.config.server.host)
      const port = Option.getOrElse(values.port, () => loaded.config.server.port)
      const guard = yield* guardSettings(loaded, host)
      const warning = exposureWarning("valet mcp", guard, host)
      if (warning !== undefined) yield* note(warning)
      const server = HttpRouter.serve(httpApp(options, guard).pipe(Layer.provide(agents)), {
        disableLogger: true,
        disableListenLog: true
      }).pipe(Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port, host })))
      return yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(server)
        yield* HttpServer.addressFormattedWith((address) => note(`valet mcp: ${count} agents at ${address}/mcp`)).pipe(
          Effect.provideContext(context)
        )
        return yield* Effect.never
      }))
    })
).pipe(
  Command.withDescription(
    "Serves the agents of a valet.yaml as MCP tools (input: a string; answer: the run's output; progress " +
      "notifications from its events): over stdin / stdout, or with --http at http://<host>:<port>/mcp. The " +
      "config's server.maxConcurrentRuns and server.maxBodyBytes apply."
  )
)
