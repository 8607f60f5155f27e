/**
 * Router: one classifier call, then the chosen agent runs the task. Every way a classifier writes its answer
 * (a route line, markdown, quotes, a bare name, prose, garbage), confidence and fallback, the typed Unroutable,
 * budgets, interruption, a failing route, record / replay.
 */
import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Router from "../../src/architectures/Router.js"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import * as Journal from "../../src/core/Journal.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

/** A route's agent on its own scripted model (a fresh script per run). */
const specialist = (name: string, script: ScriptedModel.Script) =>
  Agent.make({ name, instructions: `You handle ${name} questions.`, model: Layer.orDie(ScriptedModel.layer(script)) }) as Agent.Agent<never>

const routes = (extra: Omit<Router.Options, "routes"> = {}) =>
  Router.makeUnsafe({
    routes: [
      { name: "billing", agent: specialist("billing", ["Your invoice is attached."]), description: "invoices and payments" },
      { name: "tech-support", agent: specialist("tech", ["Restart the router."]) },
      { name: "general", agent: specialist("general", ["Happy to help."]) }
    ],
    ...extra
  })

const front = (architecture: ReturnType<typeof routes>) => Agent.make({ name: "front-desk", instructions: "Route customer requests.", architecture })

/** The run with the classifier answering `answer`. */
const routed = (answer: string, extra: Omit<Router.Options, "routes"> = {}) =>
  Agent.run(front(routes(extra)), "My invoice is wrong.").pipe(Effect.provide(ScriptedModel.layer([answer])))

describe("Router", () => {
  it.effect("the classifier sees the routes and the task; the chosen agent runs the task as asked, under __route_<name>", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(front(routes()), "My invoice is wrong.", { sessionId: "s1" }))
      const requests = yield* ScriptedModel.calls
      expect(requests).toHaveLength(1)
      const system = requests[0]!.messages![0]!.content
      expect(system).toContain("Route customer requests.")
      expect(system).toContain("- billing: invoices and payments")
      expect(system).toContain("- tech-support: You handle tech questions.")
      expect(requests[0]!.messages!.at(-1)).toEqual(Model.user("My invoice is wrong."))
      const started = events.filter((event) => event._tag === "RunStarted")
      expect(started.map((event) => [event.sessionId, event.prompt])).toEqual([
        ["s1", "My invoice is wrong."],
        ["s1__route_billing", "My invoice is wrong."]
      ])
      const progress = events.filter((event) => event._tag === "Progress").map((event) => event.name)
      expect(progress).toEqual(["router.classified", "router.dispatched"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Your invoice is attached.", metadata: { route: "billing", confidence: 0.9, fallback: false } } })
    }).pipe(Effect.provide(ScriptedModel.layer(["route: billing\nconfidence: 0.9"]))))

  it.effect("route names match case-insensitively, through markdown, quotes, fences, bare names and prose", () =>
    Effect.gen(function*() {
      const answers: ReadonlyArray<readonly [string, string]> = [
        ["Route: **Billing**", "Your invoice is attached."],
        ['route = "TECH-SUPPORT"\nconfidence: 85%', "Restart the router."],
        ["```\nroute: general\nconfidence: 7/10\n```", "Happy to help."],
        ["billing", "Your invoice is attached."],
        ["This is clearly a question for the tech-support team.", "Restart the router."],
        ["- **route:** `billing`.", "Your invoice is attached."]
      ]
      for (const [answer, output] of answers) {
        expect((yield* routed(answer)).output, answer).toBe(output)
      }
      expect(Router.parseClassification("route: Billing\nconfidence: 85%", ["billing"])).toEqual({ route: "billing", named: "Billing", confidence: 0.85 })
    }))

  it.effect("no route, an unknown route, or garbage: the fallback, with an event; without one, a typed Unroutable", () =>
    Effect.gen(function*() {
      for (const answer of ["route: shipping", "I am not sure, could be billing or tech-support.", "%%%"]) {
        const result = yield* routed(answer, { fallback: "General" })
        expect(result.output).toBe("Happy to help.")
        expect(result.metadata).toMatchObject({ route: "general", fallback: true })
      }
      const unknown = yield* Effect.flip(routed("route: shipping"))
      expect(unknown).toBeInstanceOf(AgentError.Unroutable)
      expect(unknown.message).toMatch(/could not be routed \(no route is named "shipping"\); the classifier answered: "route: shipping"/)
      const none = yield* Effect.flip(routed("%%%"))
      expect(none).toMatchObject({ _tag: "Unroutable", reason: "the answer names no route" })
    }))

  it.effect("confidence: below minConfidence → fallback; a missing one counts as 1 at minConfidence 0, else as 0; a bad one as 0", () =>
    Effect.gen(function*() {
      expect((yield* routed("route: billing\nconfidence: 0.4", { minConfidence: 0.5, fallback: "general" })).metadata).toMatchObject({ route: "general", fallback: true })
      expect((yield* routed("route: billing\nconfidence: 0.6", { minConfidence: 0.5, fallback: "general" })).metadata).toMatchObject({ route: "billing", fallback: false })
      expect((yield* routed("route: billing")).metadata).toMatchObject({ route: "billing", fallback: false })
      expect((yield* routed("route: billing", { minConfidence: 0.1, fallback: "general" })).metadata).toMatchObject({ route: "general" })
      // `confidence: 7` is not a confidence (no scale): never read as 1.
      const bad = yield* Effect.flip(routed("route: billing\nconfidence: 7", { minConfidence: 0.5 }))
      expect(bad).toMatchObject({ _tag: "Unroutable", reason: expect.stringMatching(/^confidence 0 is below 0.5 \(the confidence: 7 is outside \[0, 1\]/) })
    }))

  it.effect("options are checked: no routes, a duplicate (case-insensitive), a bad name, a fallback that names no route", () =>
    Effect.gen(function*() {
      const agent = specialist("a", ["x"])
      const message = (options: Router.Options) => Effect.map(Effect.flip(Router.make(options)), (error) => error.message)
      expect(yield* message({ routes: [] })).toMatch(/^Router: routes must be at least one route/)
      expect(yield* message({ routes: [{ name: "a", agent }, { name: "A", agent }] })).toContain('two routes are named "A"')
      expect(yield* message({ routes: [{ name: "a b", agent }] })).toBe(
        'Router: routes[0].name must be a usable name (letters and digits joined by single - or _, at most 48 characters), got "a b"'
      )
      expect(yield* message({ routes: [{ name: "a", agent }], fallback: "b" })).toBe('Router: fallback names no route, got "b"')
    }))

  it.effect("a route that fails fails the run; one stopped by a spent budget ends it interrupted with its output", () =>
    Effect.gen(function*() {
      const failing = Router.makeUnsafe({ routes: [{ name: "billing", agent: specialist("billing", []) }] })
      const failed = yield* Effect.flip(Agent.run(front(failing), "x").pipe(Effect.provide(ScriptedModel.layer(["route: billing"]))))
      expect(failed).toMatchObject({ _tag: "SubAgentFailed", role: "route", error: { _tag: "ScriptExhausted" } })
      const capped = yield* Agent.run(front(routes()), "x", { budget: { maxCalls: 1 } }).pipe(Effect.provide(ScriptedModel.layer(["route: billing"])))
      expect(capped).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", output: "" })
    }))

  it.effect("a route stopped at its turn limit ends the run interrupted route_<name>:<reason>, with its partial output and the routing", () =>
    Effect.gen(function*() {
      const lookup = Tool.make({ name: "lookup", description: "", parameters: Schema.Struct({}), handler: () => Effect.succeed("found") })
      const busy = Agent.make({
        name: "billing",
        instructions: "",
        tools: [lookup],
        maxTurns: 1,
        model: Layer.orDie(ScriptedModel.layer([{ text: "Looking up your invoice.", toolCalls: [{ name: "lookup", arguments: {} }] }]))
      })
      const architecture = Router.makeUnsafe({ routes: [{ name: "billing", agent: busy }] })
      const result = yield* Agent.run(front(architecture), "x").pipe(Effect.provide(ScriptedModel.layer(["route: billing\nconfidence: 0.9"])))
      expect(result).toMatchObject({
        interrupted: true,
        interruptionReason: "route_billing:max_turns_exceeded",
        output: "Looking up your invoice.",
        metadata: { route: "billing", confidence: 0.9, fallback: false, classifier: "route: billing\nconfidence: 0.9" }
      })
    }))

  it.effect("interrupting the run stops the chosen agent at once", () =>
    Effect.gen(function*() {
      const calling = yield* Deferred.make<void>()
      let stopped = false
      const slow = Agent.make({
        name: "slow",
        instructions: "",
        model: Layer.orDie(ScriptedModel.layer(() =>
          Deferred.succeed(calling, undefined).pipe(Effect.andThen(Effect.never), Effect.onInterrupt(() => Effect.sync(() => void (stopped = true))))
        ))
      }) as Agent.Agent<never>
      const architecture = Router.makeUnsafe({ routes: [{ name: "slow", agent: slow }] })
      const fiber = yield* Effect.forkChild(Agent.run(front(architecture), "x").pipe(Effect.provide(ScriptedModel.layer(["route: slow"]))))
      yield* Deferred.await(calling)
      yield* Fiber.interrupt(fiber)
      expect(Exit.hasInterrupts(yield* Effect.exit(Fiber.join(fiber)))).toBe(true)
      expect(stopped).toBe(true)
    }))

  it.effect("record / replay: the classifier's and the route's calls come back from the cassette", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-router-"))
      try {
        const cassette = join(dir, "router.jsonl")
        // One model for the classifier and the route (an agent without its own model), recorded then replayed.
        const shared = Router.makeUnsafe({
          routes: [{ name: "billing", agent: Agent.make({ name: "billing", instructions: "" }) as unknown as Agent.Agent<never> }]
        })
        const agent = front(shared)
        const recorded = yield* Agent.run(agent, "My invoice is wrong.", { sessionId: "rec" }).pipe(
          Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(ScriptedModel.layer(["route: billing", "Your invoice is attached."]))))
        )
        const replayed = yield* Agent.run(agent, "My invoice is wrong.", { sessionId: "rec" }).pipe(Effect.provide(Journal.layerReplay(cassette)))
        expect(replayed.output).toBe(recorded.output)
        expect(replayed.output).toBe("Your invoice is attached.")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))
})
