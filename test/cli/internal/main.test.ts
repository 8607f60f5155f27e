/**
 * How `valet` ends a failed command: one line that names the cause. A server that cannot listen used to print the
 * bare tag `valet serve: ServeError` (effect's `ServeError` has no message of its own; the cause only showed with
 * `--verbose`); now the port in use, or the address and Node's reason, are on the line.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Data, Effect } from "effect"
import { HttpServerError } from "effect/http"
import { createServer } from "node:net"
import { join } from "node:path"
import { describeFailure } from "../../../src/cli/internal/main.js"
import { valet } from "../../support/cli.js"

const example = join(import.meta.dirname, "..", "..", "..", "examples", "serve", "valet.yaml")


/** A loopback port held by another server until the scope closes. */
const busyPort = Effect.acquireRelease(
  Effect.callback<{ readonly port: number; readonly close: () => void }>((resume) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resume(Effect.succeed({ port: typeof address === "object" && address !== null ? address.port : 0, close: () => server.close() }))
    })
  }),
  ({ close }) => Effect.sync(close)
)

/** The error Node gives a server's `error` event when `listen` fails. */
const listenError = (code: string, reason: string, address: string, port: number) =>
  Object.assign(new Error(`listen ${code}: ${reason} ${address}:${port}`), { code, errno: -1, syscall: "listen", address, port })

class Wrapped extends Data.TaggedError("Wrapped")<{ readonly cause: unknown }> {}

describe("valet: a failure line names its cause", () => {
  it.live("valet serve on a port in use: exit 1, `valet serve: port <port> is in use`", () =>
    Effect.gen(function*() {
      const { port } = yield* busyPort
      const { code, errors } = yield* valet(["serve", "--config", example, "--port", String(port)])
      expect({ code, errors }).toEqual({ code: 1, errors: [`valet serve: port ${port} is in use`] })
    }).pipe(Effect.scoped))

  it.live("valet mcp --http on a port in use: exit 1, the same line", () =>
    Effect.gen(function*() {
      const { port } = yield* busyPort
      const { code, errors } = yield* valet(["mcp", "--http", "--config", example, "--port", String(port)])
      expect({ code, errors }).toEqual({ code: 1, errors: [`valet mcp: port ${port} is in use`] })
    }).pipe(Effect.scoped))

  it("another listen error: `cannot listen on <host>:<port>: <why> (<code>)`, IPv6 hosts in brackets", () => {
    const failure = (error: Error) => describeFailure(Cause.fail(new HttpServerError.ServeError({ cause: error })), "valet serve")
    expect(failure(listenError("EADDRNOTAVAIL", "address not available", "10.255.255.1", 8787))).toEqual({
      line: "valet serve: cannot listen on 10.255.255.1:8787: address not available (EADDRNOTAVAIL)",
      exitCode: 1
    })
    expect(failure(listenError("EACCES", "permission denied", "::1", 80)).line).toBe(
      "valet serve: cannot listen on [::1]:80: permission denied (EACCES)"
    )
  })

  it("an error without a message of its own is described by its cause, not by its bare tag", () => {
    const line = (error: unknown) => describeFailure(Cause.fail(error), "valet x").line
    expect(line(new HttpServerError.ServeError({ cause: new Error("boom") }))).toBe("valet x: ServeError: boom")
    // A chain of causes is followed to the first message; the tags on the way are kept.
    expect(line(new Wrapped({ cause: new HttpServerError.ServeError({ cause: new TypeError("bad socket") }) }))).toBe(
      "valet x: Wrapped: ServeError: bad socket"
    )
    // No cause at all: the tag is all there is.
    expect(line(new Wrapped({ cause: undefined }))).toBe("valet x: Wrapped")
    // A defect without a message is described by its cause too.
    expect(describeFailure(Cause.die(new Wrapped({ cause: new Error("deep") })), "valet x").line).toBe(
      "valet x: unexpected error: Wrapped: deep (--verbose shows where)"
    )
  })
})
