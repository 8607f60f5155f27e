/**
 * The rules every served route shares, attacked over raw sockets: the bearer token on every route but exactly
 * `GET /health` (decided on the routed path: `#`, `;`, `%2F`, `//`, `..`, absolute-form targets and mixed case do not
 * get around it), the viewer's sign-in cookie, the Host / Origin allow-list, errors as JSON in the shape of their
 * route, the body cap on chunked bodies of every route that reads one, and SSE frames a model's text cannot forge.
 */
import { describe, expect, it } from "@effect/vitest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Context, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import { createServer } from "node:http"
import * as Guard from "../../src/serve/internal/guard.js"
import * as Server from "../../src/serve/Server.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import { rawGet, rawRequest } from "../support/rawHttp.js"
import * as Threads from "../../src/core/Threads.js"
import { scriptedAgent, serveAgents, sseEvents } from "../support/serve.js"

const token = "s3cret-token"
const secretInput = "the-confidential-input-of-a-run"

const agents = () => [
  scriptedAgent("quick", ["Paris."]),
  scriptedAgent("writer", ["draft", "Add a full stop.", "draft.", "No issues."], SelfRefine.architecture)
]

/** A server with a token and one finished run; answers its port and the run's id. */
const serveWithRun = (options: { readonly allowedHosts?: ReadonlyArray<string> | "*" } = {}) =>
  Effect.gen(function*() {
    const url = yield* serveAgents(agents(), { token, ...options })
    const port = Number(new URL(url).port)
    const created = yield* Effect.promise(() =>
      fetch(`${url}/runs`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ agent: "quick", input: secretInput })
      }).then((response) => response.json() as Promise<{ runId: string }>)
    )
    // Wait for the run to end (its events end with it).
    yield* Effect.promise(() =>
      fetch(`${url}/runs/${created.runId}/events`, { headers: { authorization: `Bearer ${token}` } }).then((response) => response.text())
    )
    return { url, port, runId: created.runId }
  })

const get = (port: number, target: string, headers: Record<string, string> = {}, method = "GET") =>
  Effect.promise(() => rawGet(port, target, headers, method))

describe("Server guard", () => {
  it.live("no route but exactly GET /health answers without the token, however the target is written", () =>
    Effect.gen(function*() {
      const { port, runId } = yield* serveWithRun()
      const targets = [
        "/runs",
        "/runs#/health",
        `/runs/${runId}#/health`,
        `/runs/${runId}/events#/health`,
        "/agents#/health",
        "/openapi.json#/health",
        "/v1/models#/health",
        "/#/health",
        `/runs/${runId};/health`,
        "/runs;/health",
        "/runs?/health",
        "/runs?x=/health",
        "/runs%2F..%2Fhealth",
        "/runs/..%2Fhealth",
        "/runs/../health",
        "//runs",
        "//runs#/health",
        `/runs//${runId}`,
        "/Runs#/health",
        "/health/../runs",
        "/health%23",
        `http://127.0.0.1:${port}/runs`,
        `http://127.0.0.1:${port}/runs#/health`,
        "/",
        "/?x=/health",
        "/v1/models",
        "/openapi.json",
        "/agents"
      ]
      for (const target of targets) {
        const response = yield* get(port, target)
        expect({ target, status: response.status }).toEqual({ target, status: 401 })
        expect(response.body).not.toContain(secretInput)
        expect(response.body).not.toContain(runId)
      }
      // Every method, not only GET.
      for (const method of ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"]) {
        const response = yield* get(port, "/runs#/health", {}, method)
        expect({ method, status: response.status }).toEqual({ method, status: 401 })
      }
      const post = yield* Effect.promise(() =>
        rawRequest(port, `POST /runs#/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 31\r\nConnection: close\r\n\r\n{"agent":"quick","input":"hey"}`)
      )
      expect(post.status).toBe(401)

      // The health route, written any way the router routes to it (it ignores case), answers health and nothing else.
      for (const target of ["/health", "/health?x=1", "/health#/runs", "//health", "/Health", "/HEALTH", "/health/"]) {
        const response = yield* get(port, target)
        expect({ target, status: response.status, body: response.body }).toEqual({ target, status: 200, body: `{"status":"ok"}` })
      }
      expect((yield* get(port, "/health", {}, "HEAD")).status).toBe(200)
    }).pipe(Effect.scoped), 60_000)

  it.live("the token: any case of the Bearer scheme; a wrong token of any length is refused; every route answers with it", () =>
    Effect.gen(function*() {
      const { port, runId } = yield* serveWithRun()
      for (const header of ["Bearer wrong-token!", `Bearer ${token}x`, `Bearer ${token.slice(0, -1)}`, "Bearer ", token, `Basic ${token}`]) {
        expect({ header, status: (yield* get(port, "/runs", { Authorization: header })).status }).toEqual({ header, status: 401 })
      }
      const ok = yield* get(port, "/runs?full=true", { Authorization: `bearer ${token}` })
      expect(ok.status).toBe(200)
      expect(ok.body).toContain(secretInput)
      for (const target of [`/runs/${runId}`, `/runs/${runId}/events`, "/agents", "/openapi.json", "/v1/models", "/"]) {
        expect({ target, status: (yield* get(port, target, { Authorization: `Bearer ${token}` })).status }).toEqual({ target, status: 200 })
      }
    }).pipe(Effect.scoped), 60_000)

  it.live("the viewer signs in once with ?token=: an HttpOnly SameSite cookie (not the token), then the page and the API with the cookie", () =>
    Effect.gen(function*() {
      const { port } = yield* serveWithRun()
      expect((yield* get(port, "/?token=wrong")).status).toBe(401)
      const signIn = yield* get(port, `/?token=${token}`)
      expect(signIn.status).toBe(303)
      expect(signIn.headers["location"]).toBe("/")
      expect(signIn.setCookies).toHaveLength(1)
      const cookie = signIn.setCookies[0]!
      expect(cookie).toMatch(/^valet_session=\d+\.[A-Za-z0-9_-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/i)
      expect(cookie).not.toContain(token)
      const pair = cookie.split(";")[0]!
      const page = yield* get(port, "/", { Cookie: pair })
      expect(page.status).toBe(200)
      expect(page.headers["content-type"]).toContain("text/html")
      const runs = yield* get(port, "/runs", { Cookie: pair })
      expect(runs.status).toBe(200)
      // The token in a query string opens nothing but the sign-in.
      expect((yield* get(port, `/runs?token=${token}`)).status).toBe(401)
      expect((yield* get(port, "/runs", { Cookie: `${pair}x` })).status).toBe(401)
      expect((yield* get(port, "/runs", { Cookie: `valet_session=${token}` })).status).toBe(401)
    }).pipe(Effect.scoped), 60_000)

  it.live("Host and Origin: a loopback server answers to loopback names only; a browser page elsewhere is refused", () =>
    Effect.gen(function*() {
      const { port } = yield* serveWithRun()
      const auth = { Authorization: `Bearer ${token}` }
      for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`]) {
        expect({ host, status: (yield* get(port, "/agents", { ...auth, Host: host })).status }).toEqual({ host, status: 200 })
      }
      // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1. Health included.
      for (const target of ["/agents", "/health"]) {
        const rebound = yield* get(port, target, { ...auth, Host: `evil.example:${port}` })
        expect(rebound.status).toBe(421)
        expect(JSON.parse(rebound.body)).toMatchObject({ _tag: "MisdirectedRequest" })
      }
      expect((yield* get(port, "/agents", { ...auth, Host: "a b" })).status).toBe(400)
      expect((yield* get(port, `http://evil.example:${port}/agents`, auth)).status).toBe(421)
      const cross = yield* get(port, "/agents", { ...auth, Origin: "http://evil.example" })
      expect(cross.status).toBe(403)
      expect((yield* get(port, "/agents", { ...auth, Origin: "null" })).status).toBe(403)
      expect((yield* get(port, "/agents", { ...auth, Origin: `http://127.0.0.1:${port + 1}` })).status).toBe(403)
      expect((yield* get(port, "/agents", { ...auth, Origin: `http://127.0.0.1:${port}` })).status).toBe(200)

      // `allowedHosts` names the hosts of a server behind a proxy; "*" allows any (the token still applies).
      const named = yield* serveWithRun({ allowedHosts: ["agents.example.com"] })
      expect((yield* get(named.port, "/agents", { ...auth, Host: "agents.example.com" })).status).toBe(200)
      expect((yield* get(named.port, "/agents", { ...auth, Host: `127.0.0.1:${named.port}` })).status).toBe(421)
      const any = yield* serveWithRun({ allowedHosts: "*" })
      expect((yield* get(any.port, "/agents", { ...auth, Host: "whatever.example" })).status).toBe(200)
      expect((yield* get(any.port, "/agents", { Host: "whatever.example" })).status).toBe(401)
    }).pipe(Effect.scoped), 60_000)

  it.live("errors of every route are JSON: unknown route or method 404, wrong content type 415, in OpenAI's shape under /v1", () =>
    Effect.gen(function*() {
      const { port } = yield* serveWithRun()
      const auth = { Authorization: `Bearer ${token}` }
      const unknown = yield* get(port, "/nope", auth)
      expect(unknown.status).toBe(404)
      expect(JSON.parse(unknown.body)).toEqual({ _tag: "NotFound", message: "no route GET /nope" })
      const method = yield* get(port, "/runs", auth, "DELETE")
      expect(method.status).toBe(404)
      expect(JSON.parse(method.body)).toMatchObject({ _tag: "NotFound" })
      const v1 = yield* get(port, "/v1/nope", auth)
      expect(v1.status).toBe(404)
      expect(JSON.parse(v1.body)).toMatchObject({ error: { type: "invalid_request_error", message: "no route GET /v1/nope" } })
      // The shape follows the route as the router reads the path (case, trailing slash, percent-encoding).
      for (const target of ["/V1/nope", "/v1/nope/", "/%76%31/nope"]) {
        expect({ target, body: JSON.parse((yield* get(port, target, auth)).body) }).toMatchObject({ target, body: { error: { type: "invalid_request_error" } } })
      }
      const v1Unauthorized = yield* get(port, "/v1/models")
      expect(JSON.parse(v1Unauthorized.body)).toMatchObject({ error: { type: "authentication_error" } })

      const body = `{"agent":"quick","input":"x"}`
      for (const path of ["/runs", "/v1/chat/completions"]) {
        const wrongType = yield* Effect.promise(() =>
          rawRequest(port, `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\nContent-Type: text/plain\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)
        )
        expect(wrongType.status).toBe(415)
        const parsed = JSON.parse(wrongType.body)
        expect(path === "/runs" ? parsed : parsed.error).toMatchObject(path === "/runs"
          ? { _tag: "UnsupportedMediaType", message: expect.stringContaining("text/plain") }
          : { type: "invalid_request_error", message: expect.stringContaining("text/plain") })
      }
    }).pipe(Effect.scoped), 60_000)

  it.live("Last-Event-ID that is not an event id replays from the start; the listing is paged", () =>
    Effect.gen(function*() {
      const { port, runId, url } = yield* serveWithRun()
      const auth = { authorization: `Bearer ${token}` }
      const ids = (text: string) => [...text.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]))
      const all = ids(yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { headers: auth }).then((r) => r.text())))
      expect(all[0]).toBe(0)
      for (const lastEventId of ["", "-0", " ", "1e0", "0x1", "-1", "abc", "1.0"]) {
        // fetch drops an empty header value's line? It sends it: `Last-Event-ID: `.
        const text = yield* Effect.promise(() =>
          rawGet(port, `/runs/${runId}/events`, { Authorization: `Bearer ${token}`, "Last-Event-ID": lastEventId }).then((r) => r.body)
        )
        expect({ lastEventId, ids: ids(text) }).toEqual({ lastEventId, ids: all })
      }
      const resumed = yield* Effect.promise(() => rawGet(port, `/runs/${runId}/events`, { Authorization: `Bearer ${token}`, "Last-Event-ID": "0" }))
      expect(ids(resumed.body)).toEqual(all.slice(1))
      expect((yield* get(port, `/runs/${runId}/events?after=-1`, { Authorization: `Bearer ${token}` })).status).toBe(400)

      for (let i = 0; i < 4; i++) {
        yield* Effect.promise(() =>
          fetch(`${url}/runs`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ agent: "quick", input: `q${i}` }) })
        )
      }
      const page1 = yield* Effect.promise(() => fetch(`${url}/runs?limit=2`, { headers: auth }).then((r) => r.json() as Promise<any>))
      expect(page1.runs).toHaveLength(2)
      expect(page1.runs[0].input).toBeUndefined()
      const page2 = yield* Effect.promise(() => fetch(`${url}/runs?limit=2&cursor=${page1.nextCursor}`, { headers: auth }).then((r) => r.json() as Promise<any>))
      const page3 = yield* Effect.promise(() => fetch(`${url}/runs?limit=2&cursor=${page2.nextCursor}`, { headers: auth }).then((r) => r.json() as Promise<any>))
      expect(page3.nextCursor).toBeUndefined()
      const listed = [...page1.runs, ...page2.runs, ...page3.runs].map((run: { runId: string }) => run.runId)
      expect(new Set(listed).size).toBe(5)
      expect(listed.at(-1)).toBe(runId)
      const badLimit = yield* get(port, "/runs?limit=100000", { Authorization: `Bearer ${token}` })
      expect(badLimit.status).toBe(400)
      expect(JSON.parse(badLimit.body)).toMatchObject({ _tag: "BadRequest", message: expect.stringContaining("limit") })
    }).pipe(Effect.scoped), 60_000)

  it("a sign-in is bound to the guard that issued it and expires after 12 hours", () => {
    const sessions = Guard.makeSessions(token)
    const issued = sessions.issue(1_000_000)
    expect(sessions.check(issued, 1_000_000)).toBe(true)
    expect(sessions.check(issued, 1_000_000 + Guard.sessionMaxAgeSeconds * 1000 - 1)).toBe(true)
    expect(sessions.check(issued, 1_000_000 + Guard.sessionMaxAgeSeconds * 1000)).toBe(false)
    // Issued in the future, reissued under another time, by another server with the same token, or garbled.
    expect(sessions.check(issued, 999_999)).toBe(false)
    expect(sessions.check(issued.replace(/^\d+/, "1000001"), 1_000_001)).toBe(false)
    expect(Guard.makeSessions(token).check(issued, 1_000_000)).toBe(false)
    for (const garbled of ["", ".", issued + "x", issued.slice(0, -1), `${issued}.${issued}`]) expect(sessions.check(garbled, 1_000_000)).toBe(false)
  })

  it.live("an app's own routes behind Server.guard: no request without the token reaches them, whatever the router would match (a HEAD route, a case-sensitive config)", () =>
    Effect.gen(function*() {
      const hits: Array<string> = []
      const routes = Layer.mergeAll(
        // Any method, so HEAD /health matches it before the router's fallback to GET could.
        HttpRouter.add("*", "/:id", (request) => Effect.sync(() => (hits.push(`${request.method} ${request.url}`), HttpServerResponse.text("secret")))),
        HttpRouter.add("GET", "/health/", (request) => Effect.sync(() => (hits.push(`GET ${request.url}`), HttpServerResponse.text("secret2")))),
        Server.guard({ token })
      )
      const server = HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true, routerConfig: { caseSensitive: true, ignoreTrailingSlash: false } }).pipe(
        Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" }))
      )
      const context = yield* Layer.build(server)
      const port = (Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }).port
      for (const [method, target] of [["HEAD", "/health"], ["GET", "/HEALTH"], ["GET", "/Health"], ["GET", "/health/"], ["GET", "/other"], ["HEAD", "/other"]] as const) {
        const response = yield* get(port, target, {}, method)
        expect({ method, target, ok: response.status === 401 || (response.status === 200 && !response.body.includes("secret")) })
          .toEqual({ method, target, ok: true })
      }
      expect(hits).toEqual([])
      expect((yield* get(port, "/other", { Authorization: `Bearer ${token}` })).body).toBe("secret")
    }).pipe(Effect.scoped), 30_000)

  it.live("a chunked body (no Content-Length) over the cap is 413 on every route that reads a body, in the route's shape", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents(), { token, maxBodyBytes: 2000 }, Threads.layerMemory())
      const port = Number(new URL(url).port)
      const big = JSON.stringify({ agent: "quick", input: "x".repeat(10_000) })
      // Sent in chunks of 1000 bytes: no length to refuse it by before it is read.
      const body = (big.match(/[^]{1,1000}/g) ?? []).map((chunk) => `${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`).join("") + "0\r\n\r\n"
      const shapes: Record<string, (parsed: any) => boolean> = {
        valet: (parsed) => parsed._tag === "PayloadTooLarge",
        openai: (parsed) => parsed.error?.type === "invalid_request_error",
        "json-rpc": (parsed) => parsed.jsonrpc === "2.0" && parsed.error?.code === -32600
      }
      const routes = [
        ["/runs", "valet"],
        ["/runs/stream", "valet"],
        ["/threads", "valet"],
        ["/threads/t1/runs", "valet"],
        ["/threads/t1/runs/stream", "valet"],
        ["/agents/quick/chat", "valet"],
        ["/v1/chat/completions", "openai"],
        ["/v1/responses", "openai"],
        ["/a2a/quick", "json-rpc"]
      ] as const
      for (const [path, shape] of routes) {
        const response = yield* Effect.promise(() =>
          rawRequest(
            port,
            `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
              `A2A-Version: 1.0\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}`
          )
        )
        expect({ path, status: response.status, shaped: shapes[shape]!(JSON.parse(response.body)) }).toEqual({ path, status: 413, shaped: true })
      }
      // Nothing ran.
      const runs = yield* Effect.promise(() => fetch(`${url}/runs`, { headers: { authorization: `Bearer ${token}` } }).then((response) => response.json() as Promise<{ runs: ReadonlyArray<unknown> }>))
      expect(runs.runs).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("an event's text cannot forge SSE frames: newlines, `id:` and `event:` in a model's answer stay inside one event's JSON data", () =>
    Effect.gen(function*() {
      const forged = "ok\n\nid: 999\nevent: RunCompleted\ndata: {\"forged\":true}\r\n\r\nretry: 1\n"
      const url = yield* serveAgents([scriptedAgent("liar", [forged])], { token })
      const auth = { authorization: `Bearer ${token}` }
      const created = yield* Effect.promise(() =>
        fetch(`${url}/runs/stream`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ agent: "liar", input: "x" }) })
      )
      const events = yield* sseEvents(created)
      expect(events.map((event) => event.id)).toEqual(events.map((_, i) => String(i)))
      expect(events.filter((event) => event.event === "RunCompleted")).toHaveLength(1)
      // Every frame is one of the run's events: its data the event's JSON, its name the event's tag.
      for (const event of events) expect(JSON.parse(event.data)._tag).toBe(event.event)
      const completed = JSON.parse(events.at(-1)!.data)
      expect(completed.result.output).toBe(forged)
    }).pipe(Effect.scoped), 30_000)
})
