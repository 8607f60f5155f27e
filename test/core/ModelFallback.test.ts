import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import { recordingTracer } from "../support/spans.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

const ask = (content = "hi") => Model.generate({ messages: [Model.user(content)] })

/** A scripted model as a service, with the count of the calls it received. */
const scripted = (script: ScriptedModel.Script) => {
  const context = ScriptedModel.context(script)
  const service = Context.get(context, Model.Model)
  return {
    service,
    calls: Effect.map(Context.get(context, ScriptedModel.ScriptedModel).calls, (calls) => calls.length)
  }
}

/** A model that always fails with `error`. */
const failing = (error: ModelError.ModelError) => scripted(() => ({ error }))

const errors: ReadonlyArray<readonly [string, ModelError.ModelError, boolean]> = [
  ["RateLimited", new ModelError.RateLimited({ message: "slow down" }), true],
  ["ServerError", new ModelError.ServerError({ status: 503, message: "upstream down" }), true],
  ["Timeout", new ModelError.Timeout({ message: "no answer", timeoutMs: 60_000 }), true],
  ["Transport", new ModelError.Transport({ message: "connection reset" }), true],
  ["ContextLengthExceeded", new ModelError.ContextLengthExceeded({ message: "too long" }), true],
  ["InvalidRequest", new ModelError.InvalidRequest({ status: 400, message: "bad field" }), false],
  ["Unauthorized", new ModelError.Unauthorized({ status: 401, message: "no key" }), false],
  ["ModelNotFound", new ModelError.ModelNotFound({ model: "m", message: "not served" }), false],
  ["MalformedResponse", new ModelError.MalformedResponse({ message: "not json", body: "<html>" }), false]
]

describe("Model.fallback", () => {
  for (const [tag, error, movesOn] of errors) {
    it.effect(`${tag}: ${movesOn ? "the next model answers" : "fails without asking the next model"}`, () =>
      Effect.gen(function*() {
        const first = failing(error)
        const second = scripted(["from the backup"])
        const exit = yield* Effect.exit(ask().pipe(
          Effect.provide(Model.fallback([{ name: "primary", model: first.service }, { name: "backup", model: second.service }]))
        ))
        if (movesOn) {
          expect(Exit.isSuccess(exit) && Model.text(exit.value)).toBe("from the backup")
          expect(yield* second.calls).toBe(1)
        } else {
          expect(exit).toEqual(Exit.fail(error))
          expect(yield* second.calls).toBe(0)
        }
        expect(yield* first.calls).toBe(1)
      }))
  }

  it.effect("the primary answering: the others are not asked", () =>
    Effect.gen(function*() {
      const first = scripted(["primary"])
      const second = scripted(["backup"])
      const response = yield* ask().pipe(Effect.provide(Model.fallback([first.service, second.service])))
      expect(Model.text(response)).toBe("primary")
      expect(yield* second.calls).toBe(0)
    }))

  it.effect("every model failing: the last model's error", () =>
    Effect.gen(function*() {
      const last = new ModelError.ServerError({ status: 502, message: "bad gateway" })
      const error = yield* Effect.flip(ask().pipe(Effect.provide(Model.fallback([
        failing(new ModelError.RateLimited({ message: "slow down" })).service,
        failing(last).service
      ]))))
      expect(error).toEqual(last)
    }))

  it.effect("when: the tags given replace the default", () =>
    Effect.gen(function*() {
      const unauthorized = new ModelError.Unauthorized({ status: 401, message: "no key" })
      const chain = (when: ReadonlyArray<ModelError.ModelError["_tag"]>, primary: ModelError.ModelError) =>
        ask().pipe(Effect.provide(Model.fallback([failing(primary).service, scripted(["backup"]).service], { when })))
      expect(Model.text(yield* chain(["Unauthorized"], unauthorized))).toBe("backup")
      const server = new ModelError.ServerError({ status: 500, message: "boom" })
      expect(yield* Effect.flip(chain(["Unauthorized"], server))).toEqual(server)
    }))

  it.effect("ContextLengthExceeded moves on only to a model with a larger declared window", () =>
    Effect.gen(function*() {
      const tooLong = new ModelError.ContextLengthExceeded({ message: "8192 tokens max" })
      const small = scripted(["small"])
      const large = scripted(["large"])
      const response = yield* ask().pipe(Effect.provide(Model.fallback([
        { name: "8k", model: failing(tooLong).service, contextWindow: 8192 },
        { name: "4k", model: small.service, contextWindow: 4096 },
        { name: "32k", model: large.service, contextWindow: 32768 }
      ])))
      expect(Model.text(response)).toBe("large")
      expect(yield* small.calls).toBe(0)
      // No larger window in the list: the error itself.
      const error = yield* Effect.flip(ask().pipe(Effect.provide(Model.fallback([
        { name: "8k", model: failing(tooLong).service, contextWindow: 8192 },
        { name: "4k", model: small.service, contextWindow: 4096 }
      ]))))
      expect(error).toEqual(tooLong)
      expect(yield* small.calls).toBe(0)
    }))

  it.effect("an empty list fails to build with InvalidOptions naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(ask(), Model.fallback([])))
      expect(error).toBeInstanceOf(AgentError.InvalidOptions)
      expect(error.message).toBe("the list of models is empty: give at least one model")
    }))

  it.effect("bad breaker settings fail to build with InvalidOptions naming the field", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(ask(), Model.fallback([scripted(["x"]).service], { breaker: { failures: 0 } })))
      expect(error).toBeInstanceOf(AgentError.InvalidOptions)
      expect(error.message).toBe("breaker.failures must be an integer >= 1, got 0")
    }))

  it.effect("layers are built once, in the chain's scope", () =>
    Effect.gen(function*() {
      let builds = 0
      const counted = Layer.effect(Model.Model, Effect.sync(() => {
        builds++
        return Context.get(ScriptedModel.context(["a", "b"]), Model.Model)
      }))
      const texts = yield* Effect.all([ask(), ask()]).pipe(Effect.provide(Model.fallback([counted])))
      expect(texts.map(Model.text)).toEqual(["a", "b"])
      expect(builds).toBe(1)
    }))

  it.effect("a stream moves on before its first chunk, not after", () =>
    Effect.gen(function*() {
      const backup = scripted(["the backup answers"])
      const chain = Model.fallback([failing(new ModelError.ServerError({ status: 503, message: "down" })).service, backup.service])
      const chunks = yield* Stream.runCollect(Model.stream({ messages: [Model.user("hi")] })).pipe(Effect.provide(chain))
      expect(Model.text(yield* Model.accumulate(Stream.fromIterable(chunks)))).toBe("the backup answers")

      // A primary that cuts its stream after a chunk: the error, the backup not asked.
      const cut = new ModelError.Transport({ message: "stream cut" })
      const halfway = Model.make({
        generate: () => Effect.fail(cut),
        stream: () => Stream.concat(Stream.make<Array<Model.Chunk>>({ _tag: "TextDelta", index: 0, text: "Hel" }), Stream.fail(cut))
      })
      const second = scripted(["unused"])
      const error = yield* Effect.flip(Stream.runCollect(Model.stream({ messages: [Model.user("hi")] })).pipe(
        Effect.provide(Model.fallback([halfway, second.service]))
      ))
      expect(error).toEqual(cut)
      expect(yield* second.calls).toBe(0)
    }))

  describe("circuit breaker", () => {
    it.effect("opens after N failures in the window: the dead model is not asked until the cool-down ends, then one probe", () =>
      Effect.gen(function*() {
        const dead = failing(new ModelError.Timeout({ message: "no answer", timeoutMs: 60_000 }))
        const backup = scripted(() => "backup")
        const chain = Model.fallback([{ name: "dead", model: dead.service }, { name: "backup", model: backup.service }], {
          breaker: { failures: 3, window: "1 minute", coolDown: "30 seconds" }
        })
        yield* Effect.gen(function*() {
          for (let i = 0; i < 10; i++) expect(Model.text(yield* ask())).toBe("backup")
          // Three failures opened it; the seven calls after went straight to the backup.
          expect(yield* dead.calls).toBe(3)
          yield* TestClock.adjust("29 seconds")
          yield* ask()
          expect(yield* dead.calls).toBe(3)
          // Cool-down over: one probe; it fails, so the circuit opens again for another 30 s.
          yield* TestClock.adjust("1 second")
          yield* ask()
          yield* ask()
          expect(yield* dead.calls).toBe(4)
          yield* TestClock.adjust("30 seconds")
          yield* ask()
          expect(yield* dead.calls).toBe(5)
        }).pipe(Effect.provide(chain))
      }))

    it.effect("failures spread wider than the window do not open it; a successful probe closes it", () =>
      Effect.gen(function*() {
        let up = false
        const flaky = scripted(() => up ? "primary" : { error: new ModelError.ServerError({ status: 500, message: "boom" }) })
        const backup = scripted(() => "backup")
        const chain = Model.fallback([flaky.service, backup.service], { breaker: { failures: 2, window: "10 seconds", coolDown: "1 minute" } })
        yield* Effect.gen(function*() {
          yield* ask()
          yield* TestClock.adjust("11 seconds")
          yield* ask()
          // Two failures, 11 s apart: still closed, so the next call asks the primary again (and opens it).
          yield* ask()
          expect(yield* flaky.calls).toBe(3)
          yield* ask()
          expect(yield* flaky.calls).toBe(3)
          up = true
          yield* TestClock.adjust("1 minute")
          expect(Model.text(yield* ask())).toBe("primary")
          expect(Model.text(yield* ask())).toBe("primary")
          expect(yield* flaky.calls).toBe(5)
        }).pipe(Effect.provide(chain))
      }))

    it.effect("a probe that fails with an error the breaker does not count settles it: the model is asked again", () =>
      Effect.gen(function*() {
        // The probe's 400 says the server is up (the request was wrong for it): the circuit must not stay half-open.
        let answer: "down" | "bad request" | "up" = "down"
        const primary = scripted(() =>
          answer === "up" ? "primary"
          : answer === "down" ? { error: new ModelError.ServerError({ status: 503, message: "down" }) }
          : { error: new ModelError.InvalidRequest({ status: 400, message: "bad field" }) }
        )
        const backup = scripted(() => "backup")
        const chain = Model.fallback([primary.service, backup.service], { breaker: { failures: 1, coolDown: "30 seconds" } })
        yield* Effect.gen(function*() {
          expect(Model.text(yield* ask())).toBe("backup")
          yield* TestClock.adjust("30 seconds")
          answer = "bad request"
          yield* Effect.exit(ask())
          expect(yield* primary.calls).toBe(2)
          answer = "up"
          yield* TestClock.adjust("1 minute")
          expect(Model.text(yield* ask())).toBe("primary")
        }).pipe(Effect.provide(chain))
      }))

    it.effect("a probe interrupted before it settles does not leave the circuit half-open for good", () =>
      Effect.gen(function*() {
        let state: "down" | "hang" | "up" = "down"
        const down = failing(new ModelError.ServerError({ status: 503, message: "down" }))
        const up = scripted(() => "primary")
        const primary: Model.Service = {
          ...down.service,
          generate: (request) =>
            state === "hang" ? Effect.never : state === "up" ? up.service.generate(request) : down.service.generate(request)
        }
        const backup = scripted(() => "backup")
        const chain = Model.fallback([primary, backup.service], { breaker: { failures: 1, coolDown: "30 seconds" } })
        yield* Effect.gen(function*() {
          expect(Model.text(yield* ask())).toBe("backup")
          yield* TestClock.adjust("30 seconds")
          // The probe hangs and its caller gives up (a run's timeout, a cancelled request).
          state = "hang"
          const probe = yield* Effect.forkChild(ask())
          yield* TestClock.adjust("5 seconds")
          yield* Fiber.interrupt(probe)
          state = "up"
          yield* TestClock.adjust("1 minute")
          expect(Model.text(yield* ask())).toBe("primary")
        }).pipe(Effect.provide(chain))
      }))

    it.effect("the last model's circuit open: a fast failure with the error that opened it, not a call", () =>
      Effect.gen(function*() {
        const down = new ModelError.ServerError({ status: 503, message: "down" })
        const only = failing(down)
        const chain = Model.fallback([{ name: "only", model: only.service }], { breaker: { failures: 1 } })
        yield* Effect.gen(function*() {
          expect(yield* Effect.flip(ask())).toEqual(down)
          expect(yield* Effect.flip(ask())).toEqual(down)
          expect(yield* only.calls).toBe(1)
        }).pipe(Effect.provide(chain))
      }))

    it.effect("errors that are about the request (InvalidRequest) do not count against the model", () =>
      Effect.gen(function*() {
        const bad = failing(new ModelError.InvalidRequest({ status: 400, message: "bad" }))
        const chain = Model.fallback([bad.service, scripted(() => "backup").service], { breaker: { failures: 1 } })
        yield* Effect.gen(function*() {
          yield* Effect.flip(ask())
          yield* Effect.flip(ask())
          expect(yield* bad.calls).toBe(2)
        }).pipe(Effect.provide(chain))
      }))
  })

  it.effect("a run's events say which model did not answer and why (ModelFellBack), and which answered", () =>
    Effect.gen(function*() {
      const chain = Model.fallback([
        { name: "primary", model: failing(new ModelError.RateLimited({ message: "slow down" })).service },
        { name: "backup", model: scripted(["Paris"]).service }
      ], { breaker: false })
      const agent = Agent.make({ name: "assistant", instructions: "Be brief.", model: chain })
      const events = yield* Stream.runCollect(Agent.stream(agent, "Capital of France?"))
      const fellBack = events.filter((event): event is AgentEvent.Of<"ModelFellBack"> => event._tag === "ModelFellBack")
      expect(fellBack.map(({ from, reason, step, to }) => ({ from, to, reason, step }))).toEqual([
        { from: "primary", to: "backup", reason: "RateLimited: slow down", step: expect.any(String) }
      ])
      const replied = events.find((event) => event._tag === "ModelReplied")
      expect(replied !== undefined && "step" in replied && replied.step).toBe(fellBack[0]!.step)
      expect(events.at(-1)?._tag === "RunCompleted" && events.at(-1)).toMatchObject({ result: { output: "Paris" } })
    }))

  it.effect("the call's chat span says why the others did not answer (span events) and which model did", () =>
    Effect.gen(function*() {
      const { ended, layer: tracing } = recordingTracer()
      const chain = Model.fallback([
        { name: "primary", model: failing(new ModelError.ServerError({ status: 503, message: "down" })).service },
        { name: "second", model: failing(new ModelError.Timeout({ message: "no answer", timeoutMs: 1000 })).service },
        { name: "third", model: scripted(["Paris"]).service }
      ], { breaker: false })
      yield* Agent.run(Agent.make({ name: "assistant", instructions: "Be brief.", model: chain }), "Capital of France?").pipe(
        Effect.provide(tracing)
      )
      const chat = ended.find((span) => span.name === "chat")!
      expect(chat.events.map(([name, , attributes]) => [name, attributes])).toEqual([
        ["valet.fallback", { from: "primary", to: "second", reason: "ServerError: down" }],
        ["valet.fallback", { from: "second", to: "third", reason: "Timeout: no answer" }]
      ])
      expect(chat.attributes.get("valet.fallback.model")).toBe("third")
    }))
})
