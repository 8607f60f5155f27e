/** valet: `Agent.run` / `Agent.stream` (read to the end) with a `ScriptedModel` and one tool. */
import { Context, Effect, Layer, Schema, Stream } from "effect"
import * as Valet from "valet"
import { Agent, Model, ScriptedModel, Tool } from "valet"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

/** What a variant adds to the plain run: the model layer's features whose per-step cost `bench/modelLayer.ts` measures. */
interface Variant {
  /**
   * The model behind a one-model `Model.fallback` chain (which always answers) with its circuit breaker: its layer
   * provided to each run (as `Agent.make({ model })` rebuilds it), or built once and shared by the runs (as
   * `valet serve` builds a `valet.yaml` chain once).
   */
  readonly fallback?: "per-run" | "once"
  /** A pass-through guardrail of each kind (input, output, tool: the tool one checks each call's arguments and result). */
  readonly guardrails?: boolean
  /** The history holds a user message with an image part (a 1×1 PNG), sent with every model call. */
  readonly parts?: boolean
}

// A real 1×1 PNG: the parts variant's image.
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

// The shared chain's one model: it answers with the script of the run in progress (runs are one at a time here).
let current: Model.Service | undefined
let shared: Model.Service | undefined
const forwarding: Model.Service = {
  generate: (request) => Effect.suspend(() => current!.generate(request)),
  stream: (request) => Stream.unwrap(Effect.sync(() => current!.stream(request))),
  streamInto: (request, onChunk) => Effect.suspend(() => Model.streamIntoWith(current!, request, onChunk))
}

const make = (name: string, variant: Variant = {}): Framework => ({
  name,
  run: (steps, options) => {
    // Read through the namespace only when asked: the bench also runs against builds that have no `Guardrail`.
    const passThrough = variant.guardrails === true ? Valet.Guardrail.make("pass", () => Effect.succeed(Valet.Guardrail.pass)) : undefined
    const agent = Agent.make({
      name: "calculator",
      instructions,
      tools: [add],
      maxTurns: steps + 1,
      ...(passThrough !== undefined ? { guardrails: { input: [passThrough], output: [passThrough], tool: [passThrough] } } : {})
    })
    const history: ReadonlyArray<Model.Message> = variant.parts === true
      ? [{ role: "user", content: [Model.textPart("The figure:"), Model.imagePart({ data: png, mediaType: "image/png" })] }]
      : []
    const turn = (index: number): ScriptedModel.Turn =>
      index < steps - 1 ? { toolCalls: [{ name: "add", arguments: argsAt(index + 1) }] } : finalText
    // A model of its own per session, as the other frameworks have their mock per session (a context: no layer to build).
    const model = ScriptedModel.context(
      options.yieldPerCall
        ? (_request, index) => Effect.as(Effect.promise(yieldToEventLoop), turn(index))
        : (_request, index) => turn(index)
    )
    const runOptions = history.length > 0 ? { history } : undefined
    const program = options.stream
      ? Agent.stream(agent, prompt, runOptions).pipe(
        Stream.runFold(() => "", (output, event) => (event._tag === "RunCompleted" ? event.result.output : output))
      )
      : Effect.map(Agent.run(agent, prompt, runOptions), (result) => result.output)
    if (variant.fallback === undefined) return Effect.runPromise(Effect.provide(program, model))
    if (variant.fallback === "per-run") {
      return Effect.runPromise(Effect.provide(program, Model.fallback([Context.get(model, Model.Model)])))
    }
    // One chain for every run, over a model that forwards to this run's script.
    current = Context.get(model, Model.Model)
    shared ??= Effect.runSync(Effect.scoped(Effect.map(Layer.build(Model.fallback([forwarding])), Context.get(Model.Model))))
    return Effect.runPromise(Effect.provide(program, Model.Model.context(shared)))
  }
})

export const valet: Framework = make("valet")

/** valet with its model behind `Model.fallback` (one model that always answers): the wrapper's cost per step. */
export const valetFallback: Framework = make("valet-fallback", { fallback: "per-run" })

/** valet with its model behind one `Model.fallback` chain built once for all runs. */
export const valetFallbackOnce: Framework = make("valet-fallback-once", { fallback: "once" })

/** valet with a pass-through guardrail of each kind. */
export const valetGuardrails: Framework = make("valet-guardrails", { guardrails: true })

/** valet with an image part in the history. */
export const valetParts: Framework = make("valet-parts", { parts: true })
