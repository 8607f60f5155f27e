/**
 * The run viewer's controls for people in the loop, in a real browser (Debian's `chromium` driven by
 * `playwright-core`), on a server with a token (the page signs in once; its decisions go through the same guard as
 * any client's): a run waits on three approvals and a question; the page lists them with the tool, its arguments and
 * the session; a decision made elsewhere (a bearer-token client, as curl would) leaves the page; Approve, Reject with
 * a reason, a refused answer (the server's message shown, the run still waits), then an accepted one; the run ends,
 * the approved call ran once, the rejected ones did not; and the waits are bars of the waterfall. A tool argument
 * holding HTML is shown as text. Without Chromium the test is skipped, unless VALET_REQUIRE_CHROMIUM=1 (CI).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { chromium } from "playwright-core"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import { chromiumPath, chromiumRequired, chromiumUnavailable } from "../support/chromium.js"
import { serveAgents } from "../support/serve.js"

const haveChromium = chromiumUnavailable === undefined

/** HTML in a tool argument: the page must show it as text, never build an element from it. */
const attack = "<img src=x onerror=window.__pwned=1>"

/** A desk agent: `refund` waits for approval on every call (its runs counted), `seats` asks a person for a number. */
const deskAgent = () => {
  const refunded: Array<number> = []
  const refund = Tool.make({
    name: "refund",
    description: "Refunds",
    parameters: Schema.Struct({ amount: Schema.Number, memo: Schema.optional(Schema.String) }),
    handler: ({ amount }) => Effect.sync(() => (refunded.push(amount), `refunded ${amount}`)),
    needsApproval: true
  })
  const seats = Tool.make({
    name: "seats",
    description: "Asks how many seats to book.",
    parameters: Schema.Struct({}),
    // The question is the run's (its events, its id): asked inside the run the tool is called by.
    handler: () =>
      Effect.flatMap(Effect.serviceOption(Architecture.CurrentRun), (run) =>
        Option.isNone(run)
          ? Effect.fail("outside a run")
          : Architecture.ask("How many seats?", Schema.Int).pipe(
            Effect.provideService(Architecture.CurrentRun, run.value),
            Effect.map((n) => `booked ${n} seats`),
            Effect.mapError((error) => error.reason)
          )),
    timeout: "1 hour"
  })
  const agent = Agent.make({
    name: "desk",
    instructions: "Help.",
    tools: [refund, seats],
    model: Layer.orDie(ScriptedModel.layer([
      {
        toolCalls: [
          { id: "c1", name: "refund", arguments: { amount: 250 } },
          { id: "c2", name: "refund", arguments: { amount: 900, memo: attack } },
          { id: "c3", name: "refund", arguments: { amount: 5 } },
          { id: "s1", name: "seats", arguments: {} }
        ],
        usage: { inputTokens: 40, outputTokens: 12 },
        delay: "20 millis"
      },
      { text: "Refunded 250; booked 3 seats.", usage: { inputTokens: 90, outputTokens: 8 }, delay: "20 millis" }
    ]))
  }) as Agent.Agent<never>
  return { agent, refunded }
}

const launch = Effect.acquireRelease(
  Effect.promise(() => chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] })),
  (browser) => Effect.promise(() => browser.close())
)

describe("Viewer: people in the loop", () => {
  it.live.skipIf(!haveChromium && !chromiumRequired)(
    `in headless Chromium: pending approvals and a question, decided and answered from the page; waits in the waterfall${haveChromium ? "" : ` (skipped: ${chromiumUnavailable})`}`,
    () =>
      Effect.gen(function*() {
        expect(chromiumUnavailable, "VALET_REQUIRE_CHROMIUM=1").toBeUndefined()
        const token = "viewer-approvals-token"
        const { agent, refunded } = deskAgent()
        const url = yield* serveAgents([agent], { token })
        const auth = { authorization: `Bearer ${token}`, "content-type": "application/json" }
        const call = (path: string, init?: RequestInit) =>
          Effect.promise(() => fetch(`${url}${path}`, { ...init, headers: auth }).then(async (r) => ({ status: r.status, body: await r.json() as Record<string, unknown> })))
        const started = yield* call("/runs", { method: "POST", body: JSON.stringify({ agent: "desk", input: "Refund and book." }) })
        const runId = started.body.runId as string

        const browser = yield* launch
        const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1280, height: 900 } }))
        const errors: Array<string> = []
        page.on("pageerror", (error) => errors.push(error.message))
        // Signed in once; every request of the page after that carries only the cookie.
        yield* Effect.promise(() => page.goto(`${url}/?token=${token}`))
        yield* Effect.promise(() => page.goto(`${url}/#run=${runId}`))
        const request = (attribute: string, id: string) => page.locator(`#pending .request[${attribute}="${id}"]`)

        // The three calls and the question wait, and the page lists them.
        yield* Effect.promise(async () => {
          await page.getByText(`Run ${runId} — waiting`).waitFor({ timeout: 10_000 })
          for (const id of ["c1", "c2", "c3"]) await request("data-call", id).waitFor()
          await request("data-question", "q1").waitFor()
        })
        expect(yield* Effect.promise(() => page.locator("#pending h3").innerText())).toMatch(/Waiting for you \(4\)/i)
        // The session tree says the run waits for a person, not that it runs.
        expect(yield* Effect.promise(() => page.locator("ul.tree").innerText())).toMatch(/^root desk waiting /)
        // While they wait, the waits are open bars of the waterfall, as is the run's own (they grow as time passes).
        yield* Effect.promise(() => page.locator(".wf-bar.wait.open").nth(3).waitFor())
        expect(yield* Effect.promise(() => page.locator(".wf-bar.wait.open").count())).toBe(4)
        expect(yield* Effect.promise(() => page.locator('.wf-row[data-depth="0"] .wf-bar.session.open').count())).toBe(1)
        const first = yield* Effect.promise(() => request("data-call", "c1").innerText())
        expect(first).toContain("refund")
        expect(first).toContain("session root")
        // The arguments pretty-printed.
        expect(yield* Effect.promise(() => request("data-call", "c1").locator("pre").innerText())).toBe(`{\n  "amount": 250\n}`)
        // The argument's HTML is text: no element built from it, its handler never ran.
        expect(yield* Effect.promise(() => request("data-call", "c2").locator("pre").innerText())).toContain(attack)
        expect(yield* Effect.promise(() => page.locator("#detail img").count())).toBe(0)
        expect(yield* Effect.promise(() => page.evaluate("window.__pwned"))).toBeUndefined()
        const question = yield* Effect.promise(() => request("data-question", "q1").innerText())
        expect(question).toContain("How many seats?")
        expect(question).toContain(`"type":"integer"`)

        // Decided elsewhere (a client with the bearer token, as curl): the entry leaves the page.
        const elsewhere = yield* call(`/runs/${runId}/decisions/c3`, { method: "POST", body: JSON.stringify({ approved: false, reason: "decided elsewhere" }) })
        expect(elsewhere.status).toBe(200)
        yield* Effect.promise(() => request("data-call", "c3").waitFor({ state: "detached" }))

        // Approve one; reject another with a reason.
        yield* Effect.promise(async () => {
          await request("data-call", "c1").getByRole("button", { name: "Approve" }).click()
          await request("data-call", "c1").waitFor({ state: "detached" })
          await request("data-call", "c2").getByLabel("reason").fill("too much")
          await request("data-call", "c2").getByRole("button", { name: "Reject" }).click()
          await request("data-call", "c2").waitFor({ state: "detached" })
        })

        // A bad answer: the server's refusal is shown and the run still waits.
        yield* Effect.promise(async () => {
          await request("data-question", "q1").getByLabel("answer").fill("2.5")
          await request("data-question", "q1").getByRole("button", { name: "Answer" }).click()
          await request("data-question", "q1").locator(".refusal:not(:empty)").waitFor()
        })
        const refusal = yield* Effect.promise(() => request("data-question", "q1").locator(".refusal").innerText())
        expect(refusal).toMatch(/^answer: .*integer/i)
        const still = yield* call(`/runs/${runId}`)
        expect(still.body.status).toBe("waiting")
        expect(still.body.questions).toMatchObject([{ questionId: "q1" }])
        expect(yield* Effect.promise(() => page.locator("h2").innerText())).toBe(`Run ${runId} — waiting`)

        // A good one: the run goes on to its end.
        yield* Effect.promise(async () => {
          await request("data-question", "q1").getByLabel("answer").fill("3")
          await request("data-question", "q1").getByRole("button", { name: "Answer" }).click()
          await page.getByText(`Run ${runId} — completed`).waitFor({ timeout: 10_000 })
        })
        expect(yield* Effect.promise(() => page.locator("#pending .request").count())).toBe(0)
        expect(yield* Effect.promise(() => page.locator("#pending").isHidden())).toBe(true)
        expect(yield* Effect.promise(() => page.locator("ul.tree").innerText())).toMatch(/^root desk completed /)
        // The approved call ran once; the rejected ones never.
        expect(refunded).toEqual([250])
        const done = yield* call(`/runs/${runId}`)
        expect(done.body).toMatchObject({ status: "completed", result: { output: "Refunded 250; booked 3 seats." } })

        // The waits are bars of the waterfall, each from asked to decided, in the root session's rows.
        const waits = yield* Effect.promise(() =>
          page.locator('.wf-row[data-kind="wait"]').evaluateAll((rows) =>
            rows.map((row) => ({
              label: row.getAttribute("data-label"),
              depth: row.getAttribute("data-depth"),
              status: [...row.querySelector(".wf-bar")!.classList].filter((c) => c !== "wf-bar" && c !== "wait").join(" "),
              width: row.querySelector(".wf-bar")!.getBoundingClientRect().width,
              tip: row.getAttribute("data-tip")
            }))))
        expect(waits.map((wait) => [wait.label, wait.depth, wait.status]).sort()).toEqual([
          ["approval refund", "1", "approved"],
          ["approval refund", "1", "rejected"],
          ["approval refund", "1", "rejected"],
          ["question How many seats?", "1", "answered"]
        ])
        for (const wait of waits) expect(wait.width).toBeGreaterThan(0)
        expect(waits.find((wait) => wait.tip!.includes("reason: too much"))).toBeDefined()
        // The tools ran (the rejected ones answered with their rejection) after their waits.
        const tools = yield* Effect.promise(() => page.locator('.wf-row[data-kind="tool"]').evaluateAll((rows) => rows.map((row) => row.getAttribute("data-label"))))
        expect(tools.sort()).toEqual(["refund", "refund", "refund", "seats"])
        expect(errors).toEqual([])
      }).pipe(Effect.scoped),
    60_000
  )
})
