/**
 * The serving benchmark's memory check, in one process with `--expose-gc`: `Server.layerNode` with one scripted
 * agent, bursts of concurrent streamed runs, and the V8 heap after a full GC following each burst. Resident
 * memory (RSS) alone cannot tell a leak from an allocator that keeps its pages; the heap after GC can. Prints one
 * JSON line: `{ "heapAfterBurstMb": [...], "rssAfterBurstMb": [...] }`.
 *
 *   node --expose-gc --import tsx bench/support/serveHeap.ts --runs 200 --bursts 8
 */
import { Context, Effect, Layer } from "effect"
import { HttpServer } from "effect/http"
import { Agent, Agents, ScriptedModel } from "valet"
import * as Server from "valet/Server"

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name)
  return at >= 0 ? Number(process.argv[at + 1]) : fallback
}
const runs = arg("--runs", 200)
const bursts = arg("--bursts", 8)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with node --expose-gc")

const agent = Agent.make({
  name: "assistant",
  instructions: "",
  model: Layer.orDie(ScriptedModel.layer(["Paris is the capital of France, a city on the Seine river."]))
}) as Agent.Agent<never>

const program = Effect.gen(function*() {
  const context = yield* Layer.build(Server.layerNode({ port: 0, maxConcurrentRuns: runs + 16 }).pipe(Layer.provide(Agents.layer([agent]))))
  const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
  const url = `http://127.0.0.1:${address.port}`
  const heap: Array<number> = []
  const rss: Array<number> = []
  for (let burst = 1; burst <= bursts; burst++) {
    yield* Effect.promise(() =>
      Promise.all(Array.from({ length: runs }, () =>
        fetch(`${url}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "assistant", input: "x" })
        }).then((response) => response.text())))
    )
    yield* Effect.sleep("200 millis")
    gc()
    gc()
    const memory = process.memoryUsage()
    heap.push(Math.round((memory.heapUsed / 1_048_576) * 10) / 10)
    rss.push(Math.round(memory.rss / 1_048_576))
  }
  console.log(JSON.stringify({ heapAfterBurstMb: heap, rssAfterBurstMb: rss }))
}).pipe(Effect.scoped)

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
