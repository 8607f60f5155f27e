/**
 * The JSON-RPC pieces of the A2A endpoint on their own: the version rule (spec §3.6) and the SSE text (the request's
 * id on every frame, keep-alive comments in quiet times, counted on the `TestClock`, not the wall clock).
 */
import { describe, expect, it } from "@effect/vitest"
import { type Cause, Effect, Fiber, Queue, Result, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Decode from "../../src/core/internal/decode.js"
import * as Wire from "../../src/providers/internal/a2a/wire.js"
import * as Parts from "../../src/serve/internal/a2a/parts.js"
import * as Rpc from "../../src/serve/internal/a2a/rpc.js"

const working: Wire.StreamResponse = { statusUpdate: { taskId: "t", contextId: "c", status: { state: "TASK_STATE_WORKING" } } }

describe("A2A JSON-RPC pieces", () => {
  it("the version: the header, else the query parameter; none is 0.3; Major.Minor counts", () => {
    expect(Rpc.versionProblem("1.0", "/a2a/x")).toBeUndefined()
    expect(Rpc.versionProblem(" 1.0.3 ", "/a2a/x")).toBeUndefined()
    expect(Rpc.versionProblem(undefined, "/a2a/x?a2a-version=1.0")).toBeUndefined()
    expect(Rpc.versionProblem(undefined, "/a2a/x")?.data).toEqual([
      expect.objectContaining({ reason: "VERSION_NOT_SUPPORTED", metadata: { requested: "0.3", supported: "1.0" } })
    ])
    expect(Rpc.versionProblem("", "/a2a/x")?.code).toBe(-32009)
    expect(Rpc.versionProblem("0.3", "/a2a/x")?.code).toBe(-32009)
    expect(Rpc.versionProblem("1.1", "/a2a/x")?.code).toBe(-32009)
    expect(Rpc.versionProblem("10.0", "/a2a/x")?.code).toBe(-32009)
  })

  it.effect("the SSE text: each response a frame with the request's id; a keep-alive after each 15 s of quiet; the end with the responses", () =>
    Effect.gen(function*() {
      const responses = yield* Queue.unbounded<Wire.StreamResponse, Cause.Done>()
      const text = Rpc.sseText("req-1", Stream.fromQueue(responses))
      const fiber = yield* Effect.forkChild(Stream.runCollect(text))
      yield* Queue.offer(responses, working)
      yield* TestClock.adjust("31 seconds")
      yield* Queue.offer(responses, working)
      yield* Queue.end(responses)
      const frames = yield* Fiber.join(fiber)
      expect(frames).toEqual([
        `id: 0\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: "req-1", result: working })}\n\n`,
        ": keep-alive\n\n",
        ": keep-alive\n\n",
        `id: 1\ndata: ${JSON.stringify({ jsonrpc: "2.0", id: "req-1", result: working })}\n\n`
      ])
    }))

  it("deeply nested JSON: described, refused as a bad part, or refused at the envelope naming where; never a throw", () => {
    const nested = (depth: number): unknown => JSON.parse("[".repeat(depth) + "]".repeat(depth))
    // Deeper than JSON.stringify's stack: the fallback `String` recursed as deep and threw out of describeIssue.
    expect(Decode.showValue(nested(10_000))).toBe("a value nested too deep to show")
    const params = Rpc.paramsOf(Wire.SendMessageRequest, { message: { messageId: "m", role: "ROLE_USER", parts: nested(10_000) } })
    expect(Result.isFailure(params) && params.failure.code).toBe(-32602)
    const part = Parts.partOf({ data: nested(200_000) }, "message.parts[0]")
    expect(Result.isFailure(part) && part.failure).toMatchObject({ code: -32602, message: expect.stringContaining("message.parts[0].data") })
    const body = `{"jsonrpc":"2.0","id":"deep-1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":${"[".repeat(100)}${"]".repeat(100)}}]}}}`
    const envelope = Rpc.envelopeOf(body)
    expect(Result.isFailure(envelope) && envelope.failure).toMatchObject({ id: "deep-1", error: { code: -32600, message: expect.stringContaining("params.message.parts[0].data") } })
    // 64 levels are fine.
    expect(Result.isSuccess(Rpc.envelopeOf(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"x":${"[".repeat(62)}${"]".repeat(62)}}}`))).toBe(true)
  })
})
