/**
 * The README's picture of the run viewer (docs/images/viewer.png), taken from a scripted run in headless Chromium:
 * `npx tsx scripts/viewer-screenshot.ts [out.png]`. A support desk (Supervisor) delegates to a researcher, whose
 * tool looks an order up, then to a clerk whose `refund` waits for a person's approval: the picture is the waterfall
 * of that run (sessions, model calls, tool calls and the wait still growing) with the pending approval above it and
 * a model call's tooltip. Needs Debian's `chromium` (/usr/bin/chromium); reads the sources, no build needed.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { HttpServer } from "effect/http"
import { mkdirSync } from "node:fs"
import { dirname, join } from "node:path"
import { chromium } from "playwright-core"
import * as Supervisor from "../src/architectures/Supervisor.js"
import * as Agent from "../src/core/Agent.js"
import * as ScriptedModel from "../src/core/ScriptedModel.js"
import * as Tool from "../src/core/Tool.js"
import * as Agents from "../src/serve/Agents.js"
import * as Server from "../src/serve/Server.js"

const out = process.argv[2] ?? join(import.meta.dirname, "..", "docs", "images", "viewer.png")

const searchOrders = Tool.make({
  name: "search_orders",
  description: "Finds an order.",
  parameters: Schema.Struct({ order: Schema.String }),
  handler: ({ order }) => Effect.as(Effect.sleep("250 millis"), `order ${order}: 2 items, 120 EUR, delivered damaged`)
})
const refund = Tool.make({
  name: "refund",
  description: "Refunds an order.",
  parameters: Schema.Struct({ order: Schema.String, amount: Schema.Number, reason: Schema.String }),
  handler: ({ amount, order }) => Effect.succeed(`refunded ${amount} EUR on order ${order}`),
  needsApproval: true
})

const delegate = (worker: string, instructions: string) => ({ name: "delegate", arguments: { worker, instructions } })
const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens })

const program = Effect.gen(function*() {
  const architecture = yield* Supervisor.make({
    workers: [
      Agent.make({ name: "researcher", instructions: "You look orders up.", tools: [searchOrders] }),
      Agent.make({ name: "clerk", instructions: "You refund orders.", tools: [refund] })
    ]
  })
  const desk = Agent.make({
    name: "desk",
    instructions: "You run a support desk.",
    architecture,
    // One script, in the order the calls are made: coordinator, researcher (two turns), coordinator, clerk.
    model: Layer.orDie(ScriptedModel.layer([
      { toolCalls: [delegate("researcher", "Look up order 7")], usage: usage(412, 38), delay: "300 millis" },
      { toolCalls: [{ id: "s1", name: "search_orders", arguments: { order: "7" } }], usage: usage(168, 21), delay: "350 millis" },
      { text: "Order 7: 2 items, 120 EUR, delivered damaged.", usage: usage(231, 19), delay: "300 millis" },
      { toolCalls: [delegate("clerk", "Refund order 7 in full: 120 EUR, damaged in delivery")], usage: usage(498, 44), delay: "300 millis" },
      {
        toolCalls: [{ id: "r1", name: "refund", arguments: { order: "7", amount: 120, reason: "damaged in delivery" } }],
        usage: usage(176, 33),
        delay: "300 millis"
      }
    ]))
  }) as Agent.Agent<never>

  const context = yield* Layer.build(Server.layerNode({ port: 0 }).pipe(Layer.provide(Agents.layer([desk]))))
  const url = `http://127.0.0.1:${(Context.get(context, HttpServer.HttpServer).address as unknown as { port: number }).port}`
  const { runId } = yield* Effect.promise(() =>
    fetch(`${url}/runs`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent: "desk", input: "Order 7 arrived broken. Please refund it." })
    }).then((response) => response.json() as Promise<{ runId: string }>))

  const browser = yield* Effect.acquireRelease(
    Effect.promise(() => chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })),
    (browser) => Effect.promise(() => browser.close())
  )
  const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1360, height: 700 }, deviceScaleFactor: 1 }))
  yield* Effect.promise(async () => {
    await page.goto(`${url}/#run=${runId}`)
    await page.locator('#pending .request[data-call="r1"]').waitFor({ timeout: 15_000 })
    // Let the wait grow a little beside the bars before it.
    await page.waitForTimeout(1200)
    await page.locator('#runs .status.waiting').waitFor()
    const model = page.locator('.wf-row[data-kind="model"]').nth(1)
    const box = await model.locator(".wf-bar").boundingBox()
    if (box !== null) await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2)
    await page.locator("#wf-tip:not([hidden])").waitFor()
    mkdirSync(dirname(out), { recursive: true })
    await page.screenshot({ path: out })
  })
  console.log(`wrote ${out}`)
}).pipe(Effect.scoped)

Effect.runPromise(program).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
