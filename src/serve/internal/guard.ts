/**
 * The rules every listening route shares (DESIGN §12): the bearer token, the viewer's sign-in cookie, the
 * Host / Origin allow-list and the body cap, in one global `HttpRouter` middleware.
 *
 * Why a global middleware that fails closed: a route-level check only guards the routes it was provided to (a later
 * protocol group could forget it), and a check on the raw URL is fooled by whatever the router ignores
 * (`/runs#/health`, `/runs/x;/health`). So a request without the token never reaches the router: the guard matches
 * it against the public routes with the router's own matcher (`FindMyWay`) and answers `GET` / `HEAD /health` and
 * the viewer's sign-in itself, and everything else with 401. Whatever the router would have done with the request
 * (another `HEAD` route, a case-sensitive config) cannot open a route.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import { ByteSize, Clock, Effect, Layer, Redacted } from "effect"
import { FindMyWay, HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { defaultShapeOf, errorResponse as shapedError, type Shape } from "./errorShape.js"

/** What the guard enforces. */
export interface GuardOptions {
  /** The largest request body, in bytes (default 1 MiB). */
  readonly maxBodyBytes?: number | undefined
  /** When set, every route but `GET /health` needs it (a bearer token, or the viewer's cookie). */
  readonly token?: Redacted.Redacted<string> | string | undefined
  /**
   * Host names the server answers to (the `Host` header, an absolute request target, an `Origin`); any other is
   * refused with 421 / 403, which stops DNS-rebinding pages. `"*"`: any host. Unset: any host for `routes` in your
   * own server, the address's names (`defaultAllowedHosts`) for `Server.layerNode` and `valet serve`.
   */
  readonly allowedHosts?: ReadonlyArray<string> | "*" | undefined
  /** The shape of a path's errors (default: OpenAI's under `/v1/`, valet's elsewhere). */
  readonly errorShape?: ((path: string) => Shape) | undefined
}

/** The guard of a server: its options and whether it serves the viewer (whose page signs in with `?token=`). */
export interface LayerOptions extends GuardOptions {
  readonly viewer?: boolean | undefined
}

/** The viewer's sign-in cookie. */
export const cookieName = "valet_session"

/** The loopback names: what a server listening on a loopback address answers to by default. */
export const loopbackHosts: ReadonlyArray<string> = ["localhost", "127.0.0.1", "[::1]"]

/**
 * The default allow-list for a server listening on `host`: the loopback names and the address itself, or `undefined`
 * (any host) for a wildcard address, where the names clients use are not known (set `allowedHosts` there).
 */
export const defaultAllowedHosts = (host: string): ReadonlyArray<string> | undefined => {
  const name = normalizeHost(host)
  if (name === "0.0.0.0" || name === "[::]" || name === "::" || name === "") return undefined
  const bracketed = name.includes(":") && !name.startsWith("[") ? `[${name}]` : name
  return loopbackHosts.includes(bracketed) ? loopbackHosts : [...loopbackHosts, bracketed]
}

const normalizeHost = (host: string): string => host.trim().toLowerCase().replace(/\.$/, "")

/** The host name of a `Host` header or an origin / absolute URL, lower-cased; `undefined` when it does not parse. */
const hostnameOf = (value: string, isUrl: boolean): string | undefined => {
  try {
    const url = new URL(isUrl ? value : `http://${value}`)
    // A Host is a name and a port: a path, query, user or fragment (`localhost#x`, which a card built from it
    // would turn into another URL) is no Host.
    if (!isUrl && (url.pathname !== "/" || url.search !== "" || url.username !== "" || url.password !== "" || value.includes("#"))) return undefined
    return normalizeHost(url.hostname)
  } catch {
    return undefined
  }
}

const digest = (text: string): Buffer => createHash("sha256").update(text).digest()

/** Compares two secrets in constant time over their digests: no early exit on length or on the first difference. */
export const sameSecret = (given: string, expected: Buffer): boolean => timingSafeEqual(digest(given), expected)

/** How long a viewer's sign-in lasts. */
export const sessionMaxAgeSeconds = 12 * 60 * 60

/**
 * The viewer's sign-in: `<issued at, ms>.<MAC>`, the MAC keyed by the token and a random key made when the guard is,
 * so a cookie is worth nothing to another server or after a restart, proves nothing about the token, and expires.
 */
export const makeSessions = (token: string) => {
  const key = createHmac("sha256", randomBytes(32)).update(token).digest()
  const mac = (issuedAt: string) => createHmac("sha256", key).update(`valet viewer session v2 ${issuedAt}`).digest("base64url")
  return {
    issue: (now: number): string => `${now}.${mac(String(now))}`,
    check: (cookie: string, now: number): boolean => {
      const match = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(cookie)
      if (match === null) return false
      const issuedAt = Number(match[1])
      return sameSecret(match[2]!, digest(mac(match[1]!))) && issuedAt <= now && now - issuedAt < sessionMaxAgeSeconds * 1000
    }
  }
}

const bearerOf = (header: string | undefined): string | undefined => {
  if (header === undefined) return undefined
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
  return match === null ? undefined : match[1]
}

/** The global middleware layer: provide it with the routes it guards (an `HttpRouter` in context). */
export const layer = (options: LayerOptions): Layer.Layer<never, never, HttpRouter.HttpRouter> => {
  const maxBodyBytes = options.maxBodyBytes ?? 1_048_576
  const token = options.token === undefined ? undefined : Redacted.value(typeof options.token === "string" ? Redacted.make(options.token) : options.token)
  if (token !== undefined && (token === "" || token.trim() !== token)) {
    // A blank token would open the server to anyone who sends none; one with spaces around it cannot be sent.
    return Layer.effectDiscard(Effect.die(new Error("Server.guard: the token must not be empty or start or end with white space")))
  }
  const tokenDigest = token === undefined ? undefined : digest(token)
  const sessions = token === undefined ? undefined : makeSessions(token)
  const shapeOf = options.errorShape ?? defaultShapeOf
  const errorResponse = (
    request: HttpServerRequest.HttpServerRequest,
    status: number,
    tag: string,
    message: string
  ) => shapedError(request, status, tag, message, undefined, shapeOf)
  const allowed = options.allowedHosts === undefined || options.allowedHosts === "*" ? undefined : new Set(options.allowedHosts.map(normalizeHost))
  // The public routes, matched by the router's matcher with its default config.
  const publicRoutes = FindMyWay.make<"health" | "viewer">({})
  publicRoutes.on(["GET", "HEAD"], "/health", "health")
  if (options.viewer === true) publicRoutes.on("GET", "/", "viewer")
  const health = HttpServerResponse.jsonUnsafe({ status: "ok" })
  return HttpRouter.middleware((httpEffect) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const hostProblem = checkHosts(request, allowed)
      if (hostProblem !== undefined) return errorResponse(request, hostProblem.status, hostProblem.tag, hostProblem.message)

      if (tokenDigest !== undefined) {
        const now = yield* Clock.currentTimeMillis
        const bearer = bearerOf(request.headers["authorization"])
        const cookie = request.cookies[cookieName]
        const signedIn = (bearer !== undefined && sameSecret(bearer, tokenDigest)) || (cookie !== undefined && sessions!.check(cookie, now))
        if (!signedIn) {
          // Nothing without the token reaches the router: the public routes are answered here.
          const routed = publicRoutes.find(request.method, request.url)
          if (routed?.handler === "health") return health
          // The viewer signs in once with `/?token=…`: a cookie, then the page without the token in its address.
          const query = routed?.handler === "viewer" ? routed.searchParams["token"] : undefined
          if (typeof query === "string" && sameSecret(query, tokenDigest)) {
            return HttpServerResponse.empty({ status: 303, headers: { location: "/", "cache-control": "no-store" } }).pipe(
              HttpServerResponse.setCookieUnsafe(cookieName, sessions!.issue(now), {
                httpOnly: true,
                sameSite: "strict",
                path: "/",
                maxAge: `${sessionMaxAgeSeconds} seconds`
              })
            )
          }
          return errorResponse(
            request,
            401,
            "Unauthorized",
            request.headers["authorization"] === undefined && cookie === undefined && query === undefined
              ? "this server needs a bearer token: send Authorization: Bearer <token> (the viewer: open /?token=<token> once)"
              : "the token is not this server's, or the sign-in has expired"
          ).pipe(HttpServerResponse.setHeader("www-authenticate", "Bearer"))
        }
      }

      const length = request.headers["content-length"]
      if (length !== undefined && /^\d+$/.test(length) && Number(length) > maxBodyBytes) {
        return errorResponse(request, 413, "PayloadTooLarge", `the request body is ${length} bytes, more than this server's limit of ${maxBodyBytes}`)
      }
      // A body without a length (chunked) is cut at the same limit while it is read.
      return yield* Effect.provideService(httpEffect, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBodyBytes))
    }), { global: true })
}

interface HostProblem {
  readonly status: number
  readonly tag: string
  readonly message: string
}

/**
 * The request's Host (and absolute target) must be an allowed name; an `Origin`, when a browser sends one, must be
 * this server's own origin (no CORS: a page elsewhere cannot use a signed-in viewer's cookie) and an allowed name.
 */
const checkHosts = (request: HttpServerRequest.HttpServerRequest, allowed: ReadonlySet<string> | undefined): HostProblem | undefined => {
  const hostHeader = request.headers["host"]
  const host = hostHeader === undefined ? undefined : hostnameOf(hostHeader, false)
  if (hostHeader !== undefined && host === undefined) {
    return { status: 400, tag: "BadRequest", message: `the Host header ${JSON.stringify(hostHeader.slice(0, 100))} is not a host name` }
  }
  if (allowed !== undefined) {
    if (host === undefined) return { status: 400, tag: "BadRequest", message: "a Host header is needed" }
    if (!allowed.has(host)) {
      return { status: 421, tag: "MisdirectedRequest", message: `this server does not answer to the host ${JSON.stringify(host)} (server.allowedHosts)` }
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(request.url)) {
      const target = hostnameOf(request.url, true)
      if (target === undefined || !allowed.has(target)) {
        return { status: 421, tag: "MisdirectedRequest", message: "this server does not answer to the request target's host" }
      }
    }
  }
  const origin = request.headers["origin"]
  if (origin !== undefined) {
    let same = false
    try {
      const parsed = new URL(origin)
      same = hostHeader !== undefined && parsed.host.toLowerCase() === hostHeader.trim().toLowerCase() &&
        (allowed === undefined || allowed.has(normalizeHost(parsed.hostname)))
    } catch {
      same = false
    }
    if (!same) {
      return { status: 403, tag: "Forbidden", message: `requests from the origin ${JSON.stringify(origin.slice(0, 100))} are not allowed (this server serves its own origin only)` }
    }
  }
  return undefined
}
