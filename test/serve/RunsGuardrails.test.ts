/**
 * A run's own guardrails over HTTP (`POST /runs`, `POST /runs/stream`: `guardrails`), on a real server over loopback
 * read with plain `fetch`: names the server declares (`Runs`' `guardrails` option, `valet.yaml`'s `guardrails:`) and
 * bounded built-ins; and the attacks — a name the server does not declare, a redactor's pattern, a judge (a model from
 * the request), oversized options — refused with 400 before any run starts.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Result } from "effect"
import { HttpServer } from "effect/http"
import * as Guardrail from "../../src/core/Guardrail.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Server from "../../src/serve/Server.js"
import { json, post, scriptedAgent, serveAgents, sseEvents } from "../support/serve.js"


/** Starts a run, reads its events to the end, and answers how it ended (`GET /runs/:id`). */
const runToEnd = (url: string, body: unknown) =>
  Effect.gen(function*() {
    const started = yield* post(`${url}/runs`, body)
    expect(started.status).toBe(201)
    const { runId } = yield* json(started)
    yield* sseEvents(yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`)))
    return yield* json(yield* Effect.promise(() => fetch(`${url}/runs/${runId}`)))
  })

const noHomework = Guardrail.make("no_homework", (subject) =>
  Effect.succeed(subject.text.includes("homework") ? Guardrail.trip("mentions homework") : Guardrail.pass))

describe("a run's guardrails over HTTP", () => {
  it.live("POST /runs: a name the server declares, a built-in with its options; the agent's run without them is unchanged", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("desk", ["Write to jane@example.com."])], { guardrails: { no_homework: noHomework } })
      const tripped = yield* runToEnd(url, { agent: "desk", input: "do my homework", guardrails: { input: ["no_homework"] } })
      expect(tripped).toMatchObject({ status: "failed", error: { _tag: "GuardrailTripped", guardrail: "no_homework", kind: "input" } })
      const redacted = yield* runToEnd(url, { agent: "desk", input: "who?", guardrails: { output: [{ redact: { pii: ["email"] } }] } })
      expect(redacted).toMatchObject({ status: "completed", result: { output: "Write to [redacted email]." } })
      const tooLong = yield* runToEnd(url, { agent: "desk", input: "who?", guardrails: { output: [{ maxLength: { maxChars: 5, name: "short" } }] } })
      expect(tooLong).toMatchObject({ status: "failed", error: { _tag: "GuardrailTripped", guardrail: "short", kind: "output" } })
      const notJson = yield* runToEnd(url, {
        agent: "desk",
        input: "who?",
        guardrails: { output: [{ schema: { schema: { type: "object", properties: { to: { type: "string" } }, required: ["to"] } } }] }
      })
      expect(notJson).toMatchObject({ status: "failed", error: { _tag: "GuardrailTripped", guardrail: "schema", kind: "output" } })
      expect(yield* runToEnd(url, { agent: "desk", input: "do my homework" })).toMatchObject({ status: "completed" })
    }).pipe(Effect.scoped), 30_000)

  it.live("POST /runs/stream: the request's guardrails hold for the streamed run (a redacted answer, no text delta)", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("desk", ["Write to jane@example.com."])])
      const response = yield* post(`${url}/runs/stream`, { agent: "desk", input: "who?", guardrails: { output: [{ redact: {} }] } })
      expect(response.status).toBe(200)
      const events = yield* sseEvents(response)
      const completed = JSON.parse(events.find((event) => event.event === "RunCompleted")!.data)
      expect(completed.result.output).toBe("Write to [redacted email].")
      // No text delta went out before the check (ModelReplied still carries the model's own text: see the report).
      expect(events.filter((event) => event.event === "TextDelta")).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("attacks: an unknown name, a pattern, a judge, oversized options — 400 naming what, and no run started", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("desk", ["never sent"])], { guardrails: { no_homework: noHomework } })
      const refused = (guardrails: unknown) =>
        Effect.gen(function*() {
          for (const route of ["/runs", "/runs/stream"]) {
            const response = yield* post(`${url}${route}`, { agent: "desk", input: "hi", guardrails })
            expect([route, JSON.stringify(guardrails).slice(0, 80), response.status]).toEqual([route, JSON.stringify(guardrails).slice(0, 80), 400])
            const body = yield* json(response)
            expect(body.message).toBeDefined()
            if (route === "/runs") return body.message as string
          }
          return ""
        })
      expect(yield* refused({ input: ["no_such"] })).toBe(
        `guardrails.input[0]: no guardrail named "no_such" on this server (it declares no_homework; or give maxLength, redact or schema)`
      )
      // A redactor's pattern is code (a catastrophic regular expression would hang the server); a judge calls a model.
      expect(yield* refused({ tool: [{ redact: { patterns: { x: "(a+)+$" } } }] })).toMatch(
        /^payload: guardrails\.tool\[0\]\.redact\.patterns are not taken from a request/
      )
      expect(yield* refused({ output: [{ judge: { criteria: "x", model: { provider: "openai-compatible", baseUrl: "http://169.254.169.254/" } } }] }))
        .toMatch(/^payload: guardrails\.output\[0\]\.judge is not taken from a request \(it calls a model\)/)
      // Oversized options: a limit past the bound, more guardrails than a kind takes, a name of 1,000 characters.
      expect(yield* refused({ input: [{ maxLength: { maxChars: 1e12 } }] })).toBe("payload: guardrails.input[0].maxLength.maxChars must be an integer 1-10000000")
      expect(yield* refused({ input: Array.from({ length: 17 }, () => "no_homework") })).toBe("payload: guardrails.input must be a value with a length of at most 16")
      expect(yield* refused({ input: ["x".repeat(1000)] })).toBe("payload: guardrails.input[0] must be a guardrail's name (1-64 letters, digits, _ . -)")
      expect(yield* refused({ output: [{ maxLength: { maxChars: 5 }, redact: {} }] })).toContain("needs exactly one of maxLength, redact, schema (it has maxLength, redact)")
      // A schema past the import's bounds (as `output`'s): 17 branches of one anyOf.
      const wide = { anyOf: Array.from({ length: 17 }, (_, i) => ({ const: i })) }
      expect(yield* refused({ output: [{ schema: { schema: wide } }] })).toBe(
        "guardrails.output[0].schema.schema: not a JSON Schema valet can check with: #/anyOf has 17 branches, more than 16"
      )
      // A request makes the server's trip policy stricter, never laxer: an agent that fails on a tool trip must not
      // be turned into one that lets the model read the refusal and try again.
      expect(yield* refused({ onToolTrip: "error" })).toBe(
        `guardrails.onToolTrip: a request may only ask for "fail" (a stricter policy), not "error": the agent's own policy stands otherwise`
      )
      expect(yield* refused({ onOutputTrip: "repair" })).toBe(
        `guardrails.onOutputTrip: a request may only ask for "fail" (a stricter policy), not "repair": the agent's own policy stands otherwise`
      )
      // Nothing ran: no run was kept, the scripted model was never asked.
      expect((yield* json(yield* Effect.promise(() => fetch(`${url}/runs`)))).runs).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("valet.yaml's guardrails: are what a request may name (a judge on the file's model by name)", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(AgentConfig.parse(`
models:
  strict: { provider: scripted, replies: ['{"pass": false, "reason": "too curt"}'] }
guardrails:
  polite: { judge: { criteria: "Be polite.", model: strict } }
model: { provider: scripted, replies: ["No."] }
agents:
  desk: { instructions: Help. }
`, "valet.yaml"), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const context = yield* Layer.build(Server.layerNode({ port: 0 }).pipe(Layer.provide(Layer.succeed(Agents.Agents, agents))))
      const url = `http://127.0.0.1:${(Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }).port}`
      expect(yield* runToEnd(url, { agent: "desk", input: "hi", guardrails: { output: ["polite"] } })).toMatchObject({
        status: "failed",
        error: { _tag: "GuardrailTripped", guardrail: "polite", reason: "too curt" }
      })
      const unknown = yield* post(`${url}/runs`, { agent: "desk", input: "hi", guardrails: { output: ["rude"] } })
      expect(unknown.status).toBe(400)
      expect((yield* json(unknown)).message).toContain(`no guardrail named "rude" on this server (it declares polite;`)
    }).pipe(Effect.scoped, Effect.provide([NodeServices.layer, NodeHttpClient.layerUndici])), 30_000)
})
