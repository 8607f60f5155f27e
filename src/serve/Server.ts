/**
 * `valet serve` as a layer: the agents of `Agents` over HTTP — valet's routes (`RunsApi`), the OpenAI-compatible
 * facade (`OpenAiApi`), the `useChat` route (`ChatApi`), A2A 1.0 (`A2aApi`), the run viewer at `/` (`Viewer`), the OpenAPI document at
 * `/openapi.json` — behind the rules a server on a network needs (`guard`): a bearer token on every route but exactly
 * `GET /health` (decided on the routed path; the viewer signs in once with `/?token=` and keeps an HttpOnly cookie), a
 * Host / Origin allow-list, a request body limit (413), errors as JSON on every route, and the run registry's
 * `maxConcurrentRuns` (429), `maxEventStreams` (429 for a stream following a run: `GET /runs/:id/events`, a chat
 * continued, A2A's subscriptions and continuations) and bounded memory. `routes` is the same without a server, for
 * tests and for apps that serve their own router.
 *
 * @example
 * ```ts
 * import { Config, Effect, Layer } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as Server from "valet/Server"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * // `valet serve` in code: valet's routes, the OpenAI facade at /v1 and the viewer at /, on 127.0.0.1:8787, every
 * // route but GET /health behind the token (read with `Config`: a missing variable is an error, not an open server).
 * const server = Layer.unwrap(Effect.map(Config.Redacted("VALET_TOKEN"), (token) =>
 *   Server.layerNode({ port: 8787, token, maxConcurrentRuns: 8 })
 * )).pipe(Layer.provide(Agents.layer([assistant])))
 *
 * const main = Layer.launch(server)
 * ```
 *
 * @since 0.2.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Layer } from "effect"
import { HttpRouter, type HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import type * as Agents from "./Agents.js"
import * as A2aApi from "./A2aApi.js"
import * as ChatApi from "./ChatApi.js"
import * as OpenAiApi from "./OpenAiApi.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"
import * as ErrorShape from "./internal/errorShape.js"
export type { Shape as ErrorShape } from "./internal/errorShape.js"
import * as Guard from "./internal/guard.js"
import * as Viewer from "./Viewer.js"

/**
 * What a server allows.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options extends Runs.Options, Guard.GuardOptions {
  /**
   * Finds the owner of a request (the app's auth): whose runs, threads, stored responses and A2A tasks it sees, on
   * every route but `GET /health`, the viewer's page and the agent cards (`RunsApi.layerOwner`). Without it every
   * request is `RunsApi.defaultOwner`'s: a server guarded by its token alone is single-tenant.
   */
  readonly owner?: RunsApi.OwnerOf | undefined
  /**
   * The A2A endpoints (`A2aApi`: `/a2a/:agent`, the cards): the root card's agent (`defaultAgent`, default the
   * first), and the URL clients reach the server at when it is behind a proxy (`publicUrl`, default
   * `http://<Host>`). On by default; `enabled: false` leaves them out (404).
   */
  readonly a2a?: {
    readonly enabled?: boolean | undefined
    readonly defaultAgent?: string | undefined
    readonly publicUrl?: string | undefined
  } | undefined
}

/**
 * What `guard` enforces; `viewer: true` when the viewer's page is at `/` (it signs in there with `?token=`).
 *
 * @since 0.2.0
 * @category options
 */
export interface GuardOptions extends Guard.LayerOptions {}

/**
 * The rules every listening route of valet shares, as one global `HttpRouter` middleware layer: the bearer token
 * (every route but exactly `GET /health`, decided on the routed path, compared in constant time; the viewer signs
 * in once with `/?token=` and keeps an HttpOnly SameSite cookie), the Host / Origin allow-list, the body cap (413),
 * and errors as JSON in the route's shape (404, 415, 500…). `routes` installs it; provide it to any other protocol
 * served beside them (`valet mcp --http` does).
 *
 * @since 0.2.0
 * @category middleware
 * @example
 * ```ts
 * import { Config, Effect, Layer } from "effect"
 * import type { HttpRouter } from "effect/http"
 * import * as Server from "valet/Server"
 *
 * // Your own routes, behind the same token and limits as valet's (the token read with `Config`, so a missing
 * // variable is an error, not an open server).
 * const guarded = (routes: Layer.Layer<never, never, HttpRouter.HttpRouter>) =>
 *   Layer.unwrap(Effect.map(Config.Redacted("VALET_TOKEN"), (token) =>
 *     Layer.mergeAll(routes, Server.guard({ token, allowedHosts: ["localhost"] }))))
 * ```
 */
export const guard = (options: GuardOptions): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  Layer.mergeAll(ErrorShape.layer(options.errorShape), Guard.layer(options))

/**
 * The names a server listening on `host` answers to when `allowedHosts` is not set: the loopback names for a
 * loopback address (a page on another site that resolves its name to 127.0.0.1 — DNS rebinding — is refused), those
 * and the address for another address, any name for a wildcard address (`0.0.0.0`, `::`).
 *
 * @since 0.2.0
 * @category middleware
 */
export const defaultAllowedHosts: (host: string) => ReadonlyArray<string> | undefined = Guard.defaultAllowedHosts

/**
 * The API `valet serve` serves: valet's routes, the OpenAI-compatible facade, the `useChat` route and A2A.
 *
 * @since 0.2.0
 * @category api
 */
export const Api = HttpApi.make("valet").add(RunsApi.group).add(OpenAiApi.group).add(ChatApi.group).add(A2aApi.group).add(A2aApi.discoveryGroup)

/** The API without A2A (`a2a.enabled: false`). */
const ApiWithoutA2a = HttpApi.make("valet").add(RunsApi.group).add(OpenAiApi.group).add(ChatApi.group)

/**
 * valet's routes, limits and OpenAPI document on the `HttpRouter` in context, over the `Agents` in context.
 *
 * @since 0.2.0
 * @category layers
 */
export const routes = (options: Options = {}) =>
  (options.a2a?.enabled === false
    ? HttpApiBuilder.layer(ApiWithoutA2a, { openapiPath: "/openapi.json" }).pipe(
      Layer.provide([RunsApi.layerFor(ApiWithoutA2a, { owner: options.owner }), OpenAiApi.layerFor(ApiWithoutA2a, { owner: options.owner }), ChatApi.layerFor(ApiWithoutA2a, { owner: options.owner })])
    )
    : HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(
      Layer.provide([
        RunsApi.layerFor(Api, { owner: options.owner }),
        OpenAiApi.layerFor(Api, { owner: options.owner }),
        ChatApi.layerFor(Api, { owner: options.owner }),
        A2aApi.layerFor(Api, {
          owner: options.owner,
          bearer: options.token !== undefined,
          defaultAgent: options.a2a?.defaultAgent,
          publicUrl: options.a2a?.publicUrl
        })
      ])
    )).pipe(
    Layer.provide(Runs.layer(options)),
    Layer.merge(guard({ ...options, viewer: true })),
    Layer.merge(Viewer.layer)
  )

/**
 * Where a Node server listens.
 *
 * @since 0.2.0
 * @category options
 */
export interface Listen {
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** Default 8787; 0 picks a free port. */
  readonly port?: number | undefined
}

/**
 * A Node HTTP server serving `routes`, for as long as the layer lives. Without `allowedHosts` it answers to the names
 * `defaultAllowedHosts` gives for its address.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerNode = (options: Options & Listen = {}): Layer.Layer<HttpServer.HttpServer, unknown, Agents.Agents> => {
  const host = options.host ?? "127.0.0.1"
  const allowedHosts = options.allowedHosts ?? Guard.defaultAllowedHosts(host) ?? "*"
  return HttpRouter.serve(routes({ ...options, allowedHosts }), { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: options.port ?? 8787, host }))
  ) as Layer.Layer<HttpServer.HttpServer, unknown, Agents.Agents>
}
