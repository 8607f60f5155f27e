/**
 * ReAct: the model is called with the agent's tools; when it asks for tool calls they all run concurrently and
 * their results go back in call order; when it answers in text, that text is the output. The loop stops with
 * `max_turns_exceeded` after `maxTurns` model turns, and with `repeated_tool_call` when the model asks for the
 * same tool with the same arguments `maxRepeatedToolCalls` times in a row (a model that makes no progress).
 *
 * Tool-call arguments nested deeper than 100 levels come back to the model as an `ERROR:` result without being
 * decoded, and before reading a reply of more than 64 KiB the loop yields to the event loop, so timers and
 * timeouts run (see `core/internal/parse.ts`).
 *
 * It is the default architecture of `Agent.make`. Options: `maxTurns` (default the agent's), `maxRepeatedToolCalls`
 * (3; 0 never stops), `concurrency` (tool calls of a turn at once; `toolConcurrency` is its deprecated name),
 * `maxResultChars`, and `request` (sampling options sent on every call).
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, ReAct, ScriptedModel, Tool } from "valet"
 *
 * const add = Tool.make({
 *   name: "add",
 *   description: "Adds two numbers",
 *   parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
 *   handler: ({ a, b }) => Effect.succeed(a + b)
 * })
 * const agent = Agent.make({ name: "calc", instructions: "Use add.", tools: [add], architecture: ReAct.makeUnsafe({ maxTurns: 4, request: { temperature: 0 } }) })
 * const model = ScriptedModel.layer([{ toolCalls: [{ name: "add", arguments: { a: 2, b: 40 } }] }, "42"])
 *
 * Effect.runPromise(Agent.run(agent, "2 + 40?").pipe(Effect.provide(model))).then((result) => console.log(result.output)) // "42"
 * ```
 *
 * @since 0.1.0
 */
import * as Architecture from "../core/Architecture.js"
import * as internal from "../core/internal/toolLoop.js"
import type * as Model from "../core/Model.js"

/**
 * ReAct, declared once: its name, options and program (the tool loop every agent runs by default).
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: internal.name,
  title: "ReAct",
  description: "the tool loop: the model calls tools until it answers in text",
  options: internal.optionFields,
  deprecated: { toolConcurrency: "concurrency" },
  program: (input, options) => internal.program(options)(input)
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.1.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of ReAct, as a schema.
 *
 * @since 0.1.0
 * @category definition
 */
export const Options = internal.Options
/**
 * The options of ReAct.
 *
 * @since 0.1.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * ReAct with its default options (the default architecture of `Agent.make`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = internal.defaultArchitecture

/**
 * ReAct with options, checked here: `maxTurns: 0` and the like fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe
