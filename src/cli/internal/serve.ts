/**
 * `valet serve --config valet.yaml`: the config's agents over HTTP (valet's routes, the OpenAPI document), with the
 * config's limits (`server:` — maxConcurrentRuns, maxEventStreams, maxBodyBytes, kept runs, and a bearer token from
 * `tokenEnv`) and its thread store (`threads:`; without one the thread routes answer 501);
 * with `--otlp <url>`, traces go to that OpenTelemetry collector (flushed when the server stops).
 * Prints where it listens on stderr and runs until interrupted.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, type Duration, Effect, Layer, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { HttpServer } from "effect/http"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as Agents from "../../serve/Agents.js"
import * as Server from "../../serve/Server.js"
import * as Telemetry from "../../serve/Telemetry.js"
import { UsageError } from "./failure.js"
import { exposureWarning, guardSettings } from "./serverGuard.js"

const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

/** `valet serve`. */
export const serveCommand = Command.make(
  "serve",
  {
    config: Flag.File("config", { mustExist: true }).pipe(Flag.withDescription("The valet.yaml whose agents to serve.")),
    host: Flag.String("host").pipe(
      Flag.withDescription("The address to listen on (default: the config's server.host, else 127.0.0.1)."),
      Flag.optional
    ),
    port: Flag.Int("port").pipe(
      Flag.filter((port) => port >= 0 && port <= 65535, () => "a port number 0-65535"),
      Flag.withDescription("The port (default: the config's server.port, else 8787; 0 picks a free one)."),
      Flag.optional
    ),
    otlp: Flag.String("otlp").pipe(
      Flag.withDescription("Export traces (a span per run, model call and tool call, GenAI attributes) to this OTLP/HTTP collector, e.g. http://127.0.0.1:4318."),
      Flag.optional
    )
  },
  (values) =>
    Effect.gen(function*() {
      const loaded = yield* AgentConfig.load(values.config)
      const settings = loaded.config.server
      const host = Option.getOrElse(values.host, () => settings.host)
      const defaultAgent = settings.a2a.defaultAgent
      if (defaultAgent !== undefined && !(defaultAgent in loaded.config.agents)) {
        return yield* new UsageError({
          message: `server.a2a.defaultAgent ${JSON.stringify(defaultAgent)} is not an agent of ${values.config} ` +
            `(its agents: ${Object.keys(loaded.config.agents).join(", ")})`
        })
      }
      const guard = yield* guardSettings(loaded, host)
      const warning = exposureWarning("valet serve", guard, host)
      if (warning !== undefined) yield* note(warning)
      const agents = Layer.effect(Agents.Agents, AgentConfig.build(loaded)).pipe(Layer.provide(NodeHttpClient.layerUndici))
      const server = Server.layerNode({
        ...guard,
        host,
        port: Option.getOrElse(values.port, () => settings.port),
        maxConcurrentRuns: settings.maxConcurrentRuns,
        maxEventStreams: settings.maxEventStreams,
        keepFinishedRuns: settings.keepFinishedRuns,
        keepFinished: (settings.keepFinished ?? settings.keepFinishedMs ?? "1 hour") as Duration.Input,
        turns: yield* AgentConfig.turnDefaults(loaded),
        a2a: settings.a2a
      }).pipe(
        Layer.provide(agents),
        // The file's thread store, when it names one: the thread routes and the chat route's chat ids use it.
        Layer.provide(AgentConfig.threadsLayer(loaded) ?? Layer.empty),
        Layer.provide(Option.isSome(values.otlp) ? Telemetry.layerOtlp({ url: values.otlp.value, serviceName: "valet" }) : Layer.empty)
      )
      return yield* Effect.scoped(Effect.gen(function*() {
        const context = yield* Layer.build(server)
        const address = HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)
        yield* note(`valet serve: ${Object.keys(loaded.config.agents).length} agents at ${address} (${values.config})`)
        return yield* Effect.never
      }))
      // For as long as the server: the recall's embedding client (turnDefaults) keeps using it.
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
).pipe(
  Command.withDescription(
    "Serves the agents of a valet.yaml over HTTP: POST /runs, GET /runs/:id/events (SSE), POST /runs/stream, " +
      "GET /agents, GET /openapi.json, the OpenAI routes (/v1/models, /v1/chat/completions), each agent as an A2A " +
      "agent (/a2a/<agent>, its card at /a2a/<agent>/.well-known/agent-card.json), and the /threads routes when the " +
      "config names a thread store (threads:). " +
      "Limits and the bearer token come from the config's server section."
  )
)
