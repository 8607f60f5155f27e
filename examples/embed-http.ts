/**
 * valet inside an existing Effect backend: an `HttpApi` app with a `users` group of its own mounts valet's routes
 * under `/agents-api`, next to its own, in one OpenAPI document and on one server:
 *
 * - valet's runs routes (`RunsApi`): `POST /agents-api/runs`, the run's events as SSE, cancel, …
 * - the OpenAI-compatible facade (`OpenAiApi`): `/agents-api/v1/chat/completions`, for the `openai` package;
 * - the `useChat` route (`ChatApi`): `POST /agents-api/agents/:name/chat`, for the AI SDK's `DefaultChatTransport`;
 * - the agents as MCP tools over Streamable HTTP (`McpAgents.layerHttp`) at `/agents-api/mcp`;
 * - all of it behind one bearer token (`Server.guard`), `GET /health` excepted.
 *
 * The agents are defined once and need a `Model`: the app takes it from the layer it is given — the model server at
 * `VALET_BASE_URL` here, a `ScriptedModel` in `test/examples.test.ts`.
 * Run alone: `APP_TOKEN=… npx tsx examples/embed-http.ts` (serves on http://127.0.0.1:3000, then try
 * `curl -N -X POST localhost:3000/agents-api/runs/stream -H "authorization: Bearer $APP_TOKEN"
 * -H 'content-type: application/json' -d '{"agent":"assistant","input":"Capital of France?"}'`).
 */
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Config, Effect, Layer, type Redacted, Schema, Stream } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { createServer } from "node:http"
import { Agent, Agents, type Model, SelfRefine } from "../src/index.js"
import * as ChatApi from "../src/serve/ChatApi.js"
import * as McpAgents from "../src/serve/McpAgents.js"
import * as OpenAiApi from "../src/serve/OpenAiApi.js"
import * as Runs from "../src/serve/Runs.js"
import * as RunsApi from "../src/serve/RunsApi.js"
import * as RunsClient from "../src/serve/RunsClient.js"
import * as Server from "../src/serve/Server.js"
import { demoModel } from "./support/model.js"

// ---------------------------------------------------------------------------------------------------------
// The app's own API
// ---------------------------------------------------------------------------------------------------------

const User = Schema.Struct({ id: Schema.Int, name: Schema.String })

const UsersGroup = HttpApiGroup.make("users").add(
  HttpApiEndpoint.get("listUsers", "/users", { success: Schema.Array(User) }),
  HttpApiEndpoint.get("getUser", "/users/:id", { params: { id: Schema.NumberFromString }, success: User })
)

/** The app's API: its users, and valet's groups under /agents-api. One OpenAPI document describes them all. */
export const AppApi = HttpApi.make("app")
  .add(UsersGroup)
  .add(RunsApi.group.prefix("/agents-api"))
  .add(OpenAiApi.group.prefix("/agents-api"))
  .add(ChatApi.group.prefix("/agents-api"))

const users = [{ id: 1, name: "Ada" }, { id: 2, name: "Grace" }]

const UsersLive = HttpApiBuilder.group(AppApi, "users", (handlers) =>
  handlers
    .handle("listUsers", () => Effect.succeed(users))
    .handle("getUser", ({ params }) => Effect.succeed(users.find((user) => user.id === params.id) ?? users[0]!)))

// ---------------------------------------------------------------------------------------------------------
// valet's part: the agents, defined once, on whichever model the app is given
// ---------------------------------------------------------------------------------------------------------

/** Answers in one sentence. `Agent<Model>`: its model comes from the app's layers. */
export const assistant = Agent.make({ name: "assistant", instructions: "Answer in one sentence." })

/** Drafts, has the draft reviewed once, and revises. */
export const writer = Agent.make({
  name: "writer",
  instructions: "You write short, exact prose.",
  architecture: SelfRefine.makeUnsafe({ maxRounds: 1 })
})

/**
 * The app's routes on the `HttpRouter` in context: its own group, valet's runs, OpenAI and chat groups, the OpenAPI
 * document, the MCP endpoint, and the guard in front of all of them. Needs a `Model`.
 */
export const app = (options: { readonly token: Redacted.Redacted<string> }) =>
  Layer.mergeAll(
    HttpApiBuilder.layer(AppApi, { openapiPath: "/openapi.json" }).pipe(
      Layer.provide([UsersLive, RunsApi.layerFor(AppApi), OpenAiApi.layerFor(AppApi), ChatApi.layerFor(AppApi)]),
      Layer.provide(Runs.layer({ maxConcurrentRuns: 8 }))
    ),
    // MCP's tool calls have a limit of their own (they are not runs of the `Runs` registry): 8 + 8 at most.
    McpAgents.layerHttp({ path: "/agents-api/mcp", maxConcurrentRuns: 8 }),
    // The same token, Host / Origin rules and body cap on every route but GET /health, MCP's included.
    Server.guard({ token: options.token, allowedHosts: ["localhost", "127.0.0.1"] })
  ).pipe(Layer.provide(Agents.layer([assistant, writer])))

/** The app on a Node server, over the model layer it is given. */
export const server = (options: {
  readonly port: number
  readonly token: Redacted.Redacted<string>
  readonly model: Layer.Layer<Model.Model>
}) =>
  HttpRouter.serve(app(options), { disableLogger: true }).pipe(
    Layer.provide(options.model),
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: options.port, host: "127.0.0.1" }))
  )

// ---------------------------------------------------------------------------------------------------------
// Another Effect program calling the app: valet's typed client (no SSE parsing, no casts)
// ---------------------------------------------------------------------------------------------------------

/**
 * Starts a run of `agent` on the app and reads its events as they come (across a dropped connection too): the
 * number of model calls seen, and the result. Needs `RunsClient.layer({ baseUrl, prefix: "/agents-api", token })`.
 */
export const ask = (agent: string, input: string) =>
  Effect.gen(function*() {
    const client = yield* RunsClient.RunsClient
    const { runId } = yield* client.create({ agent, input })
    let modelCalls = 0
    const completed = yield* client.events(runId).pipe(
      Stream.tap((event) => Effect.sync(() => event._tag === "ModelCalled" && modelCalls++)),
      Stream.filter((event) => event._tag === "RunCompleted"),
      Stream.runLast
    )
    return { modelCalls, result: completed._tag === "Some" ? completed.value.result : undefined }
  })

/** What a model would answer without a model server: the assistant's answer, then the writer's three calls. */
export const script = [
  "Paris is the capital of France.",
  "Paris is the capital of France",
  "One issue: the sentence has no full stop.",
  "Paris is the capital of France."
]

if (import.meta.url === `file://${process.argv[1]}`) {
  Effect.gen(function*() {
    const token = yield* Config.Redacted("APP_TOKEN")
    const { layer: model, note } = yield* demoModel(script)
    yield* Effect.logInfo(note)
    return yield* Layer.launch(server({ port: 3000, token, model }))
  }).pipe(NodeRuntime.runMain)
}
