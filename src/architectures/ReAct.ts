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
 * It is the default architecture of `Agent.make`.
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import * as internal from "../core/internal/toolLoop.js"
import type * as Model from "../core/Model.js"

/** The options of ReAct. */
export const Options = internal.Options
/** The options of ReAct. */
export type Options = internal.Options

/** ReAct with its default options. */
export const architecture: Architecture.Architecture<Model.Model> = internal.defaultArchitecture

/** ReAct with options, checked here: `maxTurns: 0` and the like fail with `InvalidOptions`. */
export const make = (options: Options = {}): Effect.Effect<Architecture.Architecture<Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("ReAct", Options, options),
    (valid) => Architecture.make({ name: internal.name, program: internal.program(valid) })
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = (options: Options = {}): Architecture.Architecture<Model.Model> => Opts.runUnsafe(make(options))
