/**
 * What the serving tests share: agents on their own scripted models, valet's server on a free loopback port, and a
 * loopback OTLP collector that keeps what it is sent.
 */
import { Context, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { createServer } from "node:http"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import type * as Threads from "../../src/core/Threads.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Server from "../../src/serve/Server.js"

/** An agent on its own scripted model (a fresh script in every run). */
export const scriptedAgent = (
  name: string,
  script: ScriptedModel.Script,
  architecture?: Parameters<typeof Agent.make>[0]["architecture"],
  instructions = ""
): Agent.Agent<never> =>
  Agent.make({
    name,
    instructions,
    model: Layer.orDie(ScriptedModel.layer(script)),
    ...(architecture !== undefined ? { architecture } : {})
  }) as Agent.Agent<never>

/** `Server.layerNode` with these agents (and a thread store, when given) on a free port, for the scope; answers its base URL. */
export const serveAgents = (
  agents: ReadonlyArray<Agent.Agent<never> | Agents.Entry>,
  options: Server.Options = {},
  threads?: Layer.Layer<Threads.Threads>
) =>
  Effect.gen(function*() {
    const server = Server.layerNode({ ...options, port: 0 }).pipe(Layer.provide(Agents.layer(agents)))
    const context = yield* Layer.build(threads === undefined ? server : server.pipe(Layer.provide(threads)))
    const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
    return `http://127.0.0.1:${address.port}`
  })

/** A loopback HTTP server keeping every request body (an OTLP collector), for the scope. */
export const collector = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly url: string; readonly bodies: Array<string>; readonly close: () => void }>((resolve) => {
      const bodies: Array<string> = []
      const server = createServer((req, res) => {
        let body = ""
        req.on("data", (chunk) => (body += chunk))
        req.on("end", () => {
          bodies.push(body)
          res.writeHead(200, { "content-type": "application/json" }).end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number }
        resolve({ url: `http://127.0.0.1:${port}`, bodies, close: () => server.close() })
      })
    })
  ),
  (server) => Effect.sync(server.close)
)

/** POSTs `body` as JSON. */
export const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  Effect.promise(() => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }))

/** A response's JSON body (the tests read its fields as they expect them). */
export const json = (response: Response) => Effect.promise(() => response.json() as Promise<any>)

/** An SSE response's events, read to its end. */
export const sseEvents = (response: Response) =>
  Effect.promise(async () => {
    const events: Array<EventSourceMessage> = []
    const parser = createParser({ onEvent: (event) => void events.push(event) })
    const decoder = new TextDecoder()
    for await (const chunk of response.body!) parser.feed(decoder.decode(chunk, { stream: true }))
    return events
  })
