/**
 * Guardrails: checks around a run, each an `Effect` that passes, trips with a reason, or (a redactor) rewrites.
 *
 * - **input** guardrails check every user and system message the caller supplies with the run — each of the `history`'s, then
 *   the prompt, one after the other (by their text: a part's bytes are not read) — beside the run's first model
 *   call, concurrently: a trip interrupts that call and the run fails with `GuardrailTripped`; the first reply is
 *   used only once every input guardrail passed. A thread turn's stored history is not checked again: each of its
 *   user messages was checked in its own turn (the history a caller adds to a turn is).
 * - **output** guardrails check the final answer (after structured output decodes): a trip fails the run, or, with
 *   `onOutputTrip: "repair"`, the model is shown the reason and asked once more (a second trip fails). A rewrite
 *   (a redactor) becomes the output. A run with output guardrails does not stream its text (no `TextDelta`
 *   events): a delta would reach the watcher before the answer is checked.
 * - **tool** guardrails check a call's arguments before it runs and its result before the model reads it: a trip
 *   becomes the call's `ERROR:` result (`onToolTrip: "error"`, the default) or fails the run (`"fail"`).
 *
 * A guardrail that itself fails (a judge whose model is down) fails the run with `GuardrailFailed`: a check that did
 * not run is no pass. Each trip or rewrite is a `GuardrailTripped` event. Guardrails are given per agent
 * (`Agent.make({ guardrails })`), per run (`Agent.run(…, { guardrails })`, added after the agent's) and in
 * `valet.yaml` (the built-ins by name). A sub-agent's run is checked by its own agent's guardrails; its tool calls
 * by its parent's tool guardrails first (a worker's calls like the supervisor's, each trip handled by its own run's
 * `onToolTrip`), then by its own (one its parent already applies is not run twice).
 * An output that a limit made (a spent budget, a cancel: the best output so far) is checked too, without a repair.
 *
 * With a tracer installed (`Telemetry.layer`), each check is a `guardrail <name>` span under the run's (a tool
 * guardrail's under its call's `execute_tool` span): `valet.guardrail.name`, `.kind`, `.outcome` (`pass`, `trip`,
 * `rewrite`, or `fail` with the guardrail's error tag in `error.type`) and `.reason`; a judge's `chat` span nests in it.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Guardrail, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({
 *   name: "support",
 *   instructions: "Help the customer.",
 *   guardrails: {
 *     input: [Guardrail.maxLength({ maxChars: 4_000 })],
 *     output: [Guardrail.redact()]
 *   }
 * })
 * // The answer's email address is redacted before anyone reads it.
 * const output = Agent.run(agent, "Who do I write to?").pipe(
 *   Effect.map((result) => result.output), // "Write to [redacted email]."
 *   Effect.provide(ScriptedModel.layer(["Write to help@example.com."]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import type { Effect, Schema } from "effect"
import * as Builtins from "./internal/guardrailBuiltins.js"
import * as Internal from "./internal/guardrail.js"

/**
 * Where a guardrail runs: `input`, `output` or `tool`.
 *
 * @since 0.2.0
 * @category models
 */
export type Kind = Internal.Kind

/**
 * What a guardrail says: `Pass`, `Trip` with a reason, or `Rewrite` with the new text and why (a redactor).
 *
 * @since 0.2.0
 * @category models
 */
export type Verdict = Internal.Verdict

/**
 * What a guardrail checks: its `kind`, the `text`, the run's session and agent, and for tool guardrails the call.
 *
 * @since 0.2.0
 * @category models
 */
export type Subject = Internal.Subject

/**
 * A guardrail: a `name` (in events and errors) and a `check`. A check that fails fails the run (`GuardrailFailed`).
 *
 * @since 0.2.0
 * @category models
 */
export type Guardrail = Internal.Guardrail

/**
 * A run's guardrails by kind, with `onOutputTrip` (`fail` | `repair`) and `onToolTrip` (`error` | `fail`).
 *
 * @since 0.2.0
 * @category models
 */
export type Guardrails = Internal.Guardrails

/**
 * The verdict of a text that passes.
 *
 * @since 0.2.0
 * @category constructors
 */
export const pass: Verdict = Internal.pass

/**
 * The verdict of a text that trips, with the reason (shown in the event, the error, and to the model on a repair).
 *
 * @since 0.2.0
 * @category constructors
 */
export const trip = (reason: string): Verdict => ({ _tag: "Trip", reason })

/**
 * The verdict of a text rewritten (`text`), saying why; later guardrails check the new text.
 *
 * @since 0.2.0
 * @category constructors
 */
export const rewrite = (text: string, reason: string): Verdict => ({ _tag: "Rewrite", text, reason })

/**
 * A guardrail from a name and a check.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Guardrail } from "valet"
 *
 * const noShouting = Guardrail.make("no_shouting", (subject) =>
 *   Effect.succeed(subject.text === subject.text.toUpperCase() ? Guardrail.trip("all capitals") : Guardrail.pass))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (name: string, check: (subject: Subject) => Effect.Effect<Verdict, unknown>): Guardrail => ({ name, check })

/**
 * Options of `maxLength`.
 *
 * @since 0.2.0
 * @category built-ins
 */
export type MaxLengthOptions = Builtins.MaxLengthOptions

/**
 * Trips when the text is longer than `maxChars` characters (named `max_length` unless `name` is given).
 *
 * @since 0.2.0
 * @category built-ins
 */
export const maxLength: (options: MaxLengthOptions) => Guardrail = Builtins.maxLength

/**
 * The kinds of personal data and secrets `redact` finds: `email`, `card` (13–19 digits passing the Luhn check),
 * `key` (`sk-…`, AWS `AKIA…`, GitHub `ghp_…`, Slack `xox…`, Google `AIza…`, `Bearer …`).
 *
 * @since 0.2.0
 * @category built-ins
 */
export type Pii = Builtins.Pii

/**
 * Options of `redact`: which `pii` (all by default), more `patterns` by label, `mode` (`redact` | `trip`).
 *
 * @since 0.2.0
 * @category built-ins
 */
export type RedactOptions = Builtins.RedactOptions

/**
 * Rewrites personal data, secrets and the given patterns to `[redacted <label>]` (or trips naming what it found,
 * never the values, with `mode: "trip"`). On an input a rewrite is a trip: the prompt is already on its way.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const redact: (options?: RedactOptions) => Guardrail = Builtins.redact

/**
 * Whether a string of digits passes the Luhn check (what `redact` asks of a card number).
 *
 * @since 0.2.0
 * @category built-ins
 */
export const luhn: (digits: string) => boolean = Builtins.luhn

/**
 * Options of `schema`.
 *
 * @since 0.2.0
 * @category built-ins
 */
export type SchemaOptions = Builtins.SchemaOptions

/**
 * Trips when the text is not JSON the schema decodes (also JSON inside prose or a fence); the reason names the
 * field and the rule. For the output, with `onOutputTrip: "repair"`, the model is shown it once.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const schema: <A, I>(codec: Schema.Codec<A, I>, options?: SchemaOptions) => Guardrail = Builtins.schema

/**
 * Options of `judge`: the `criteria` in words, the `model` (a client or a `Model` layer; the run's by default).
 *
 * @since 0.2.0
 * @category built-ins
 */
export type JudgeOptions = Builtins.JudgeOptions

/**
 * A check a model judges: it is asked whether the text keeps `criteria` and answers `{ pass, reason }` (decoded with
 * `JudgeVerdict`); an answer that does not decode fails the guardrail (`JudgeUnreadable`), as does the model's error.
 * Within a run its call is the run's: counted in `modelCalls`, held to the budget, but silent (no events, no text
 * streamed), on the `model` given or else the run's.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const judge: (options: JudgeOptions) => Guardrail = Builtins.judge

/**
 * The schema of a judge's answer: `{ pass: boolean, reason: string }`.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const JudgeVerdict = Builtins.JudgeVerdict

/**
 * A judge's answer that is not a verdict: the guardrail's error (the run then fails with `GuardrailFailed`).
 *
 * @since 0.2.0
 * @category errors
 */
export const JudgeUnreadable = Builtins.JudgeUnreadable

/**
 * An agent's guardrails and a run's together (the agent's first, the run's options winning); `undefined` when
 * there are none.
 *
 * @since 0.2.0
 * @category combinators
 */
export const merge: (agent: Guardrails | undefined, run: Guardrails | undefined) => Guardrails | undefined = Internal.merge
