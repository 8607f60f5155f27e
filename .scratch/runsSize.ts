import { Context, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import * as Agents from "../src/serve/Agents.js"
import * as Server from "../src/serve/Server.js"
import { scriptedAgent } from "../test/support/serve.js"

const program = Effect.gen(function*() {
  const context = yield* Layer.build(Server.layerNode({ port: 0, maxBodyBytes: 4_000_000, keepFinishedRuns: 100 }).pipe(Layer.provide(Agents.layer([scriptedAgent("quick", ["Paris."])]))))
  const port = (Context.get(context, HttpServer.HttpServer).address as any).port
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 30; i++) {
    const r = yield* Effect.promise(() => fetch(`${url}/runs`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent: "quick", input: "x".repeat(1_000_000) }) }).then((r) => r.json() as any))
    yield* Effect.promise(() => fetch(`${url}/runs/${r.runId}/events`).then((r) => r.text()))
  }
  const body = yield* Effect.promise(() => fetch(`${url}/runs`).then((r) => r.text()))
  console.log("GET /runs bytes:", body.length)
}).pipe(Effect.scoped)
Effect.runPromise(program).then(() => process.exit(0))
