/**
 * The run viewer in a real browser: Debian's `chromium` driven by `playwright-core`. A Self-Refine run (sub-agents)
 * and a ReAct run with a tool are started; the page lists them, and opening one shows its waterfall (a bar per
 * session, model call and tool call on one time axis, sub-agents indented, tokens on hover), the tree of its
 * sub-sessions with calls and tokens, and its raw events (collapsed). A screenshot goes to test/artifacts/viewer.png
 * (the README's picture is drawn by scripts/viewer-screenshot.ts). Without Chromium the browser tests are skipped,
 * unless VALET_REQUIRE_CHROMIUM=1 (CI), where they fail.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schema } from "effect"
import { HttpServer } from "effect/http"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { chromium, type Page } from "playwright-core"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Guardrail from "../../src/core/Guardrail.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Server from "../../src/serve/Server.js"
import * as Viewer from "../../src/serve/Viewer.js"
import { chromiumPath, chromiumRequired, chromiumUnavailable } from "../support/chromium.js"

const haveChromium = chromiumUnavailable === undefined
const required = chromiumRequired
const root = join(import.meta.dirname, "..", "..")

const add = Tool.make({
  name: "add",
  description: "Adds two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(String(a + b))
})

const agents = [
  Agent.make({
    name: "writer",
    instructions: "Write well.",
    architecture: SelfRefine.architecture,
    model: Layer.orDie(ScriptedModel.layer([
      { text: "Paris is the capital of France", delay: "100 millis" },
      { text: "Add a full stop.", delay: "100 millis" },
      { text: "Paris is the capital of France.", delay: "100 millis" },
      "No issues."
    ]))
  }) as Agent.Agent<never>,
  // Priced (its entry's budget): the waterfall shows each model call's cost beside its tokens.
  {
    name: "calculator",
    description: "Adds.",
    architecture: "react",
    budget: { pricing: { inputPerMillion: 2, outputPerMillion: 8 } },
    agent: Agent.make({
      name: "calculator",
      instructions: "Use the tool.",
      tools: [add],
      model: Layer.orDie(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }], usage: { inputTokens: 31, outputTokens: 9 }, delay: "20 millis" },
        { text: "2 + 3 = 5.", usage: { inputTokens: 52, outputTokens: 6 }, delay: "20 millis" }
      ]))
    }) as Agent.Agent<never>
  },
  // A DeepAgent keeping a plan: each change a row of the events table.
  Agent.make({
    name: "planner",
    instructions: "",
    architecture: DeepAgent.makeUnsafe({}),
    model: Layer.orDie(ScriptedModel.layer([
      { toolCalls: [{ name: "write_todos", arguments: { todos: [{ content: "Look", status: "in_progress" }, { content: "Answer", status: "pending" }] } }] },
      { toolCalls: [{ name: "write_todos", arguments: { todos: [{ content: "Look", status: "done" }, { content: "Answer", status: "in_progress" }] } }] },
      "Done."
    ]))
  }) as Agent.Agent<never>
]

// A real 1×1 PNG (one transparent pixel).
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

/**
 * A priced agent behind a fallback chain whose first model is down (the backup answers, with prompt-cache counts),
 * with an output redactor that rewrites the answer's email address.
 */
const describer = (() => {
  const down = Context.get(ScriptedModel.context(() => ({ error: new ModelError.ServerError({ status: 503, message: "upstream down" }) })), Model.Model)
  const backup = Context.get(
    ScriptedModel.context([{
      text: "A transparent pixel. Write to ann@example.com.",
      usage: { inputTokens: 2006, outputTokens: 300, cachedInputTokens: 1920, cacheWriteTokens: 0 },
      delay: "20 millis"
    }]),
    Model.Model
  )
  return {
    name: "describer",
    description: "Describes images.",
    architecture: "react",
    budget: { pricing: { inputPerMillion: 2, cachedInputPerMillion: 0.5, outputPerMillion: 8 } },
    agent: Agent.make({
      name: "describer",
      instructions: "Describe the image.",
      guardrails: { output: [Guardrail.redact()] },
      model: Layer.orDie(Model.fallback([{ name: "primary", model: down }, { name: "backup", model: backup }]))
    }) as Agent.Agent<never>
  }
})()

const serveWith = (options: Server.Options) => Effect.gen(function*() {
  const context = yield* Layer.build(Server.layerNode({ ...options, port: 0 }).pipe(Layer.provide(Agents.layer([...agents, describer]))))
  const address = Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }
  return `http://127.0.0.1:${address.port}`
})
const serve = serveWith({})

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })),
  (browser) => Effect.promise(() => browser.close())
)

const post = (url: string, body: unknown) =>
  Effect.promise(() =>
    fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) =>
      r.json() as Promise<{ runId: string }>
    )
  )

/** The waterfall's rows as drawn: kind, depth, label, the bar's place and width (px), the hover text. */
const waterfallRows = (page: Page) =>
  Effect.promise(() =>
    page.locator("#waterfall .wf-rows .wf-row").evaluateAll((rows) =>
      rows.map((row) => {
        const bar = row.querySelector(".wf-bar")!.getBoundingClientRect()
        return {
          kind: row.getAttribute("data-kind"),
          depth: Number(row.getAttribute("data-depth")),
          label: row.getAttribute("data-label"),
          left: bar.left,
          width: bar.width,
          tip: row.getAttribute("data-tip") ?? ""
        }
      })
    ))

describe("Viewer", () => {
  it.live("GET / is one self-contained page: HTML, nothing loaded from another origin", () =>
    Effect.gen(function*() {
      const url = yield* serve
      const response = yield* Effect.promise(() => fetch(`${url}/`))
      expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8")
      expect(response.headers.get("x-frame-options")).toBe("DENY")
      expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
      const html = yield* Effect.promise(() => response.text())
      expect(html).toBe(Viewer.html)
      expect(html).not.toMatch(/(src|href)=["']?(https?:)?\/\//)
      expect(html).not.toContain("innerHTML")
      // Images only from data: URLs: the page never makes the browser fetch an image from another host.
      expect(response.headers.get("content-security-policy")).toContain("img-src data:")
    }).pipe(Effect.scoped))

  it.live.skipIf(!haveChromium && !required)(
    `in headless Chromium: a model call's cached tokens, cost and fallback, a guardrail's rewrite, the input's image as a thumbnail (an http image not fetched)${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
    Effect.gen(function*() {
      expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
      const url = yield* serve
      const run = yield* post(`${url}/runs`, {
        agent: "describer",
        input: [
          { type: "text", text: "What is in these?" },
          { type: "image", data: png, mediaType: "image/png" },
          { type: "image", url: "http://192.0.2.1/cat.png" }
        ]
      })
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1280, height: 760 } }))
      const errors: Array<string> = []
      const requested: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      page.on("request", (request) => requested.push(request.url()))
      yield* Effect.promise(async () => {
        await page.goto(`${url}/#run=${run.runId}`)
        await page.getByText("Run " + run.runId + " — completed").waitFor({ timeout: 10_000 })
        await page.locator("#run-input img.thumb").waitFor()
      })
      // The input: its text, the PNG drawn from its own bytes, the http image as its address only.
      const thumb = yield* Effect.promise(() =>
        page.locator("#run-input img.thumb").evaluate((img) => ({ src: img.getAttribute("src"), width: (img as unknown as { naturalWidth: number }).naturalWidth }))
      )
      expect(thumb).toEqual({ src: `data:image/png;base64,${png}`, width: 1 })
      expect(yield* Effect.promise(() => page.locator("#run-input .image-url").innerText())).toBe("image (not loaded): http://192.0.2.1/cat.png")
      expect(yield* Effect.promise(() => page.locator("#run-input").innerText())).toContain("What is in these?")
      expect(requested.filter((address) => !address.startsWith(url) && !address.startsWith("data:"))).toEqual([])
      // The model call: which model answered and why the first did not, its cached tokens and its cost
      // (86 uncached in at 2, 1920 cached at 0.5, 300 out at 8 per million: 0.003532).
      const model = (yield* waterfallRows(page)).find((row) => row.kind === "model")!
      expect(model.tip).toContain("2306 tokens (2006 in, 1920 cached, 0 cache write, 300 out) · cost 0.003532")
      expect(model.tip).toContain("answered by backup")
      expect(model.tip).toContain("primary did not answer: ServerError")
      // The redactor's rewrite is a mark on the waterfall.
      const guard = (yield* waterfallRows(page)).find((row) => row.kind === "guard")!
      expect(guard.label).toBe("guardrail redact")
      expect(guard.tip).toContain("rewritten")
      expect(guard.width).toBeGreaterThan(0)
      // The tree counts the cached input; the events table says the same, with the fallback.
      expect(yield* Effect.promise(() => page.locator("ul.tree").innerText())).toMatch(/root describer completed 1 calls · 2306 tokens · 1920 cached/)
      yield* Effect.promise(() => page.locator("details.events summary").click())
      const timeline = yield* Effect.promise(() => page.locator("details.events table").innerText())
      expect(timeline).toMatch(/fell back\s+react\.turn_1: primary → backup \(ServerError/)
      expect(timeline).toContain("2306 tokens (2006 in, 1920 cached, 0 cache write, 300 out) · cost 0.003532 · answered by backup")
      expect(timeline).toContain("guardrail rewrote")
      expect(errors).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live.skipIf(!haveChromium && !required)(
    `in headless Chromium: a DeepAgent's plan, each change a row of the events table${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
    Effect.gen(function*() {
      expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
      const url = yield* serve
      const run = yield* post(`${url}/runs`, { agent: "planner", input: "Plan it." })
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1280, height: 760 } }))
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      yield* Effect.promise(async () => {
        await page.goto(`${url}/#run=${run.runId}`)
        await page.getByText("Run " + run.runId + " — completed").waitFor({ timeout: 10_000 })
        await page.locator("details.events summary").click()
      })
      const timeline = yield* Effect.promise(() => page.locator("details.events table").innerText())
      expect(timeline).toMatch(/plan\s+▶ Look · ○ Answer/)
      expect(timeline).toMatch(/plan\s+✓ Look · ▶ Answer/)
      expect(errors).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live.skipIf(!haveChromium && !required)(
    `in headless Chromium: the runs list, a run's waterfall, its sub-session tree and its raw events${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
    Effect.gen(function*() {
      expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
      const url = yield* serve
      const writer = yield* post(`${url}/runs`, { agent: "writer", input: "What is the capital of France?" })
      const calculator = yield* post(`${url}/runs`, { agent: "calculator", input: "2 + 3?" })
      const browser = yield* launch
      const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1280, height: 760 } }))
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))
      yield* Effect.promise(async () => {
        await page.goto(`${url}/#run=${writer.runId}`)
        // The runs list shows both runs; the open run is selected.
        await page.locator(`#runs a[data-run="${writer.runId}"].selected`).waitFor()
        await page.locator(`#runs a[data-run="${calculator.runId}"]`).waitFor()
        // The page follows the run to its end.
        await page.getByText("Run " + writer.runId + " — completed").waitFor({ timeout: 10_000 })
      })
      const tree = yield* Effect.promise(() => page.locator("ul.tree").innerText())
      // The root and its four sub-sessions, each with its calls and tokens.
      for (const role of ["base", "critic_1", "refiner_1", "critic_2"]) expect(tree).toContain(role)
      expect(tree).toMatch(/root writer completed 4 calls · \d+ tokens/)
      expect(tree).toMatch(/critic_1 critic completed 1 calls · \d+ tokens · \d+ ms/)
      const output = yield* Effect.promise(() => page.locator("#output").innerText())
      expect(output).toBe("Output: Paris is the capital of France.")
      // The waterfall: the run, then each sub-agent indented under it with its model call under it, in the order
      // they ran.
      const writerRows = yield* waterfallRows(page)
      expect(writerRows.map((row) => [row.kind, row.depth, row.label])).toEqual([
        ["session", 0, "writer"],
        ["session", 1, "base · writer"],
        ["model", 2, "react.turn_1"],
        ["session", 1, "critic_1"],
        ["model", 2, "react.turn_1"],
        ["session", 1, "refiner_1"],
        ["model", 2, "react.turn_1"],
        ["session", 1, "critic_2"],
        ["model", 2, "react.turn_1"]
      ])
      for (const row of writerRows) expect(row.width).toBeGreaterThan(0)
      // Bars follow one another on the time axis: each sub-agent starts where the one before it ended, or later.
      const subSessions = writerRows.filter((row) => row.kind === "session" && row.depth === 1)
      for (let i = 1; i < subSessions.length; i++) expect(subSessions[i]!.left).toBeGreaterThanOrEqual(subSessions[i - 1]!.left + subSessions[i - 1]!.width - 1)
      // The raw events stay reachable, collapsed.
      yield* Effect.promise(() => page.locator("details.events summary").click())
      const timeline = yield* Effect.promise(() => page.locator("details.events table").innerText())
      expect(timeline).toContain("self_refine.critique")
      expect(timeline).toContain("run completed")

      mkdirSync(join(root, "test", "artifacts"), { recursive: true })
      yield* Effect.promise(() => page.screenshot({ path: join(root, "test", "artifacts", "viewer.png"), fullPage: false }))

      // The other run: its model calls and its tool call, tokens on hover.
      yield* Effect.promise(async () => {
        await page.click(`#runs a[data-run="${calculator.runId}"]`)
        await page.getByText("Run " + calculator.runId + " — completed").waitFor({ timeout: 10_000 })
      })
      const calculatorRows = yield* waterfallRows(page)
      expect(calculatorRows.map((row) => [row.kind, row.depth, row.label])).toEqual([
        ["session", 0, "calculator"],
        ["model", 1, "react.turn_1"],
        ["tool", 1, "add"],
        ["model", 1, "react.turn_2"]
      ])
      for (const row of calculatorRows) expect(row.width, JSON.stringify(calculatorRows)).toBeGreaterThan(0)
      expect(calculatorRows[2]!.left).toBeGreaterThanOrEqual(calculatorRows[1]!.left + calculatorRows[1]!.width - 1)
      expect(calculatorRows[3]!.left).toBeGreaterThanOrEqual(calculatorRows[2]!.left)
      expect(calculatorRows[2]!.tip).toContain(`arguments: {"a":2,"b":3}`)
      expect(calculatorRows[2]!.tip).toContain("result: 5")
      expect(calculatorRows[0]!.tip).toContain("2 model calls · 98 tokens")
      // Hovering a model call shows its tokens.
      const tip = yield* Effect.promise(async () => {
        await page.locator('.wf-row[data-label="react.turn_2"] .wf-bar').hover()
        return page.locator("#wf-tip").innerText()
      })
      expect(tip).toContain("model call react.turn_2")
      // 52 in at 2 per million and 6 out at 8 per million: 0.000152.
      expect(tip).toContain("58 tokens (52 in, 6 out) · cost 0.000152")
      yield* Effect.promise(() => page.locator("details.events summary").click())
      const tools = yield* Effect.promise(() => page.locator("details.events table").innerText())
      expect(tools).toContain('add({"a":2,"b":3})')
      expect(tools).toContain("add → 5")
      expect(errors).toEqual([])
    }).pipe(Effect.scoped), 60_000)

  it.live.skipIf(!haveChromium && !required)(
    `in headless Chromium, a server with a token: the viewer signs in once with ?token=, then lists and starts runs with its cookie${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
    Effect.gen(function*() {
      expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
      const token = "viewer-token-123"
      const url = yield* serveWith({ token })
      const browser = yield* launch
      const context = yield* Effect.promise(() => browser.newContext())
      const page = yield* Effect.promise(() => context.newPage())
      // Not signed in: the page is refused.
      const refused = yield* Effect.promise(() => page.goto(`${url}/`))
      expect(refused!.status()).toBe(401)
      yield* Effect.promise(() => page.goto(`${url}/?token=${token}`))
      // The token is gone from the address bar; the cookie is HttpOnly (the page's script cannot read it).
      expect(page.url()).toBe(`${url}/`)
      expect(yield* Effect.promise(() => page.evaluate("document.cookie"))).toBe("")
      const cookies = yield* Effect.promise(() => context.cookies())
      expect(cookies).toEqual([expect.objectContaining({ name: "valet_session", httpOnly: true, sameSite: "Strict" })])
      // The page's own requests carry the cookie: agents listed, a run started and followed to its end.
      yield* Effect.promise(async () => {
        await page.locator('#agent option[value="calculator"]').waitFor({ state: "attached" })
        await page.selectOption("#agent", "calculator")
        await page.fill("#input", "2 + 3?")
        await page.click('#start button[type="submit"]')
        await page.getByText(/Run run_\w+ — completed/).waitFor({ timeout: 10_000 })
      })
      expect(yield* Effect.promise(() => page.locator('.wf-row[data-kind="tool"]').getAttribute("data-tip"))).toContain("result: 5")
    }).pipe(Effect.scoped), 60_000)
})
