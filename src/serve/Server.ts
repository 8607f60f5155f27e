/**
 * `valet serve` as a layer: the agents of `Agents` over HTTP — valet's routes (`RunsApi`), the OpenAI-compatible
 * facade (`OpenAiApi`), the run viewer at `/` (`Viewer`), the OpenAPI document at
 * `/openapi.json` — with the limits a server on a network needs: a request body limit (413), a bearer token when
 * one is set (401 without it; `GET /health` stays open), and the run registry's `maxConcurrentRuns` (429) and
 * bounded memory. `routes` is the same without a server, for tests and for apps that serve their own router.
 *
 * @since 0.2.0
 */
import { createServer } from "node:http"
import { timingSafeEqual } from "node:crypto"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { ByteSize, Effect, Layer, Redacted } from "effect"
import { HttpIncomingMessage, HttpRouter, type HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import type * as Agents from "./Agents.js"
import * as OpenAiApi from "./OpenAiApi.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"
import * as Viewer from "./Viewer.js"

/** What a server allows. */
export interface Options extends Runs.Options {
  /** The largest request body, in bytes (default 1 MiB); larger ones get 413. */
  readonly maxBodyBytes?: number | undefined
  /** When set, every request but `GET /health` must carry `Authorization: Bearer <token>` (else 401). */
  readonly token?: Redacted.Redacted<string> | string | undefined
}

const errorBody = (url: string, status: number, tag: string, message: string) =>
  // The OpenAI facade's clients read OpenAI's error shape; everyone else reads valet's.
  url.startsWith("/v1/")
    ? HttpServerResponse.jsonUnsafe({ error: { message, type: tag === "Unauthorized" ? "authentication_error" : "invalid_request_error", param: null, code: null } }, { status })
    : HttpServerResponse.jsonUnsafe({ _tag: tag, message }, { status })

const sameSecret = (given: string, expected: string): boolean => {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** The body limit and the bearer token, for every route. */
const limits = (options: Options) => {
  const maxBodyBytes = options.maxBodyBytes ?? 1_048_576
  const token = options.token === undefined ? undefined : Redacted.value(typeof options.token === "string" ? Redacted.make(options.token) : options.token)
  return HttpRouter.middleware((httpEffect) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const path = request.url.split("?")[0]!
      if (token !== undefined && !(request.method === "GET" && path.endsWith("/health"))) {
        const header = request.headers["authorization"] ?? ""
        const given = header.startsWith("Bearer ") ? header.slice("Bearer ".length) : undefined
        if (given === undefined || !sameSecret(given, token)) {
          return errorBody(path, 401, "Unauthorized", given === undefined
            ? "this server needs a bearer token: send Authorization: Bearer <token>"
            : "the bearer token is not this server's").pipe(HttpServerResponse.setHeader("www-authenticate", "Bearer"))
        }
      }
      const length = Number(request.headers["content-length"] ?? "0")
      if (length > maxBodyBytes) {
        return errorBody(path, 413, "PayloadTooLarge", `the request body is ${length} bytes, more than this server's limit of ${maxBodyBytes}`)
      }
      // A body without a length (chunked) is cut at the same limit while it is read.
      return yield* Effect.provideService(httpEffect, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBodyBytes))
    }), { global: true })
}

/** The API `valet serve` serves: valet's routes and the OpenAI-compatible facade. */
export const Api = HttpApi.make("valet").add(RunsApi.group).add(OpenAiApi.group)

/** valet's routes, limits and OpenAPI document on the `HttpRouter` in context, over the `Agents` in context. */
export const routes = (options: Options = {}) =>
  HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(
    Layer.provide([RunsApi.layerFor(Api), OpenAiApi.layerFor(Api)]),
    Layer.provide(Runs.layer(options)),
    Layer.merge(limits(options)),
    Layer.merge(Viewer.layer)
  )

/** Where a Node server listens. */
export interface Listen {
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** Default 8787; 0 picks a free port. */
  readonly port?: number | undefined
}

/** A Node HTTP server serving `routes`, for as long as the layer lives. */
export const layerNode = (options: Options & Listen = {}): Layer.Layer<HttpServer.HttpServer, unknown, Agents.Agents> =>
  HttpRouter.serve(routes(options), { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: options.port ?? 8787, host: options.host ?? "127.0.0.1" }))
  ) as Layer.Layer<HttpServer.HttpServer, unknown, Agents.Agents>
