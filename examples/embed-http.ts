/**
 * valet inside an existing Effect backend: an `HttpApi` app with a `users` group of its own mounts valet's routes
 * under `/agents-api`, next to its own, in one OpenAPI document. The agents run on the app's model layer.
 * Run alone: `npx tsx examples/embed-http.ts` (serves on http://127.0.0.1:3000, then try
 * `curl -N -X POST localhost:3000/agents-api/runs/stream -H 'content-type: application/json'
 * -d '{"agent":"assistant","input":"Capital of France?"}'`).
 */
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { HttpRouter } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { createServer } from "node:http"
import { Agent, Agents } from "../src/index.js"
import * as Runs from "../src/serve/Runs.js"
import * as RunsApi from "../src/serve/RunsApi.js"
import { demoModel } from "./support/model.js"

// ---------------------------------------------------------------------------------------------------------
// The app's own API
// ---------------------------------------------------------------------------------------------------------

const User = Schema.Struct({ id: Schema.Int, name: Schema.String })

const UsersGroup = HttpApiGroup.make("users").add(
  HttpApiEndpoint.get("listUsers", "/users", { success: Schema.Array(User) }),
  HttpApiEndpoint.get("getUser", "/users/:id", { params: { id: Schema.NumberFromString }, success: User })
)

/** The app's API: its users, and valet's group under /agents-api. */
export const AppApi = HttpApi.make("app")
  .add(UsersGroup)
  .add(RunsApi.group.prefix("/agents-api"))

const users = [{ id: 1, name: "Ada" }, { id: 2, name: "Grace" }]

const UsersLive = HttpApiBuilder.group(AppApi, "users", (handlers) =>
  handlers
    .handle("listUsers", () => Effect.succeed(users))
    .handle("getUser", ({ params }) => Effect.succeed(users.find((user) => user.id === params.id) ?? users[0]!)))

// ---------------------------------------------------------------------------------------------------------
// valet's part: the agents and the run registry
// ---------------------------------------------------------------------------------------------------------

/** What a model would answer, for runs without a server (a fresh script per run). */
export const script = ["Paris is the capital of France."]

/** The app's routes: its own group, valet's, and the OpenAPI document; over the `HttpRouter` in context. */
export const appRoutes = Effect.gen(function*() {
  const { layer: model } = yield* demoModel(script)
  const assistant = Agent.make({ name: "assistant", instructions: "Answer in one sentence.", model })
  return HttpApiBuilder.layer(AppApi, { openapiPath: "/openapi.json" }).pipe(
    Layer.provide(UsersLive),
    Layer.provide(RunsApi.layerFor(AppApi)),
    Layer.provide(Runs.layer({ maxConcurrentRuns: 8 })),
    Layer.provide(Agents.layer([assistant]))
  )
}).pipe(Layer.unwrap)

/** The app on a Node server. */
export const server = (port: number) =>
  HttpRouter.serve(appRoutes, { disableLogger: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port, host: "127.0.0.1" }))
  )

if (import.meta.url === `file://${process.argv[1]}`) Layer.launch(server(3000)).pipe(NodeRuntime.runMain)
