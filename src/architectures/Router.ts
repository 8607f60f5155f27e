/**
 * Router: one classifier call picks the agent that takes the task; that agent runs the task as it was asked.
 *
 * The classifier is the running agent's own model (one call, step `router.classify`): it sees the routes (their
 * names and descriptions) and the task, and answers `route: <name>`, optionally with `confidence: <0..1>` (`0.8`,
 * `80%`, `8/10`). Names match case-insensitively, ignoring markdown emphasis and quotes (`**Billing**`,
 * `"billing"`); an answer without a `route:` line is read as a route when it is exactly one name, or mentions
 * exactly one route by name. No route, an unknown route, or a confidence below `minConfidence` (a missing
 * confidence counts as 1 when `minConfidence` is 0, else as 0) sends the task to the `fallback` route, or without
 * one fails the run with a typed `Unroutable` naming the answer.
 *
 * The chosen agent runs the original task under `<parent>__route_<name>`; its result is the run's. A route that
 * fails fails the run with its `SubAgentFailed` (the rule of every architecture); one that stops at a limit ends
 * the run interrupted with `route_<name>:<reason>` (a spent budget: `budget:<limit>`) and its partial output.
 *
 * Events: `router.classified` (`route`, `confidence`, `answer`), `router.fallback` (`reason`, `route`),
 * `router.dispatched` (`route`, `session_id`).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, Router, ScriptedModel } from "valet"
 *
 * const specialist = (name: string, answer: string) =>
 *   Agent.make({ name, instructions: `You handle ${name}.`, model: Layer.orDie(ScriptedModel.layer([answer])) })
 *
 * const program = Effect.gen(function*() {
 *   const architecture = yield* Router.make({
 *     routes: [
 *       { name: "billing", agent: specialist("billing", "Refund issued."), description: "invoices and refunds" },
 *       { name: "general", agent: specialist("general", "Happy to help.") }
 *     ],
 *     fallback: "general"
 *   })
 *   const desk = Agent.make({ name: "front-desk", instructions: "Route customer requests.", architecture })
 *   const result = yield* Agent.run(desk, "I was charged twice.")
 *   console.log(result.output, result.metadata.route) // "Refund issued." billing
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(ScriptedModel.layer(["route: **Billing**\nconfidence: 0.9"]))))
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Result, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import { Unroutable } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Model from "../core/Model.js"

/**
 * One route: a name the classifier answers with, the agent that takes the task, and what it is for.
 *
 * @since 0.2.0
 * @category models
 */
export interface Route<R> {
  /** Letters and digits joined by single `-` or `_` (it is part of a session id), unique case-insensitively. */
  readonly name: string
  readonly agent: Agent.Agent<R>
  /** What the classifier is told about the route; default: the first line of the agent's instructions. */
  readonly description?: string | undefined
}

/**
 * The classifier's default prompt; `{instructions}` are the running agent's, `{routes}` the route list.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultClassifierPrompt = `{instructions}

Choose the one route below that should handle the user's request. Answer with exactly two lines:
route: <the route's name>
confidence: <a number between 0 and 1>

Routes:
{routes}`

const { agent, name: routeName, optional, template, unit, withDefault } = Architecture.option

const RouteSchema = Schema.Struct({
  /** Letters and digits joined by single `-` or `_` (it is part of a session id). */
  name: routeName,
  /** The agent that takes the task. */
  agent,
  /** What the classifier is told about the route; default: the first line of the agent's instructions. */
  description: optional(Schema.String)
})

/**
 * Router, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "router",
  title: "Router",
  description: "one classifier call hands the task to the route (an agent) that fits, with a fallback",
  options: {
    /** The routes (at least one), `{ name, agent, description? }`; names are unique case-insensitively. */
    routes: Schema.Array(RouteSchema).check(
      Schema.isMinLength(1, { expected: "at least one route" }),
      Schema.makeFilter((routes: ReadonlyArray<{ readonly name: string }>) => {
        const seen = new Set<string>()
        for (const route of routes) {
          const key = route.name.toLowerCase()
          if (seen.has(key)) return `two routes are named ${JSON.stringify(route.name)} (names are compared case-insensitively)`
          seen.add(key)
        }
        return true
      })
    ),
    /** The route taken when the classifier's answer cannot be used. Without it, such a run fails with `Unroutable`. */
    fallback: optional(Schema.String),
    /** A confidence below this sends the task to the fallback (in [0, 1], default 0). */
    minConfidence: unit.pipe(withDefault(0)),
    /** The classifier's system prompt (`{instructions}`, `{routes}`). */
    classifierPrompt: template(["instructions", "routes"]).pipe(withDefault(defaultClassifierPrompt))
  },
  agentOptions: ["routes.*.agent"],
  // Case-insensitively, as the classifier's answer is read.
  check: (options) =>
    options.fallback === undefined ||
    options.routes.some((route) => route.name.toLowerCase() === options.fallback!.toLowerCase()) ||
    { path: ["fallback"], issue: "names no route" },
  program: (input, options) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const names = options.routes.map((route) => route.name)
      const system = Architecture.fill(options.classifierPrompt, {
        instructions: input.agent.instructions,
        routes: options.routes.map(describeRoute).join("\n")
      }).trim()
      const response = yield* Architecture.generate(
        { messages: [Model.system(system), ...Architecture.conversation(input)] },
        { step: "router.classify" }
      )
      const answer = Model.text(response)
      const classified = parseClassification(answer, names)
      yield* Architecture.progress("router.classified", {
        route: classified.route ?? null,
        confidence: classified.confidence ?? null,
        answer: answer.length > 500 ? `${answer.slice(0, 499)}…` : answer,
        ...(classified.confidenceError !== undefined ? { confidence_error: classified.confidenceError } : {})
      })
      // A missing confidence does not stand in the way when none is asked for, and counts as none when one is.
      const confidence = classified.confidence ?? (options.minConfidence === 0 ? 1 : 0)
      const refusal = classified.route === undefined
        ? classified.named === undefined ? "the answer names no route" : `no route is named ${JSON.stringify(classified.named)}`
        : confidence < options.minConfidence
        ? `confidence ${confidence} is below ${options.minConfidence}${classified.confidenceError !== undefined ? ` (${classified.confidenceError})` : ""}`
        : undefined
      let chosen = classified.route
      if (refusal !== undefined) {
        if (options.fallback === undefined) {
          return yield* new Unroutable({
            sessionId: run.sessionId,
            answer: answer.length > 300 ? `${answer.slice(0, 299)}…` : answer,
            reason: refusal
          })
        }
        chosen = names.find((name) => name.toLowerCase() === options.fallback!.toLowerCase())!
        yield* Architecture.progress("router.fallback", { reason: refusal, route: chosen })
      }
      const route = options.routes.find((r) => r.name === chosen)!
      const metadata = {
        route: route.name,
        confidence: classified.confidence ?? null,
        fallback: refusal !== undefined,
        classifier: answer
      }
      // The route's run is this run: stopped at a limit, it ends this one with its partial output and this metadata.
      yield* Architecture.setMetadata(() => metadata)
      yield* Architecture.progress("router.dispatched", { route: route.name, session_id: `${run.sessionId}__route_${route.name}` })
      const ran = yield* Architecture.role(route.agent, input.prompt, {
        role: "route",
        index: route.name,
        label: `route_${route.name}`,
        answers: true
      })
      return { output: ran.output, metadata }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of Router.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Router with options, checked here: no routes, two routes with one name, a name that cannot be part of a session
 * id, a fallback that names no route, or `minConfidence` outside [0, 1] fail with `InvalidOptions`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

// ---------------------------------------------------------------------------------------------------------
// Reading the classifier
// ---------------------------------------------------------------------------------------------------------

/**
 * What the classifier answered.
 *
 * @since 0.2.0
 * @category parsing
 */
export interface Classification {
  /** The route's name as the routes spell it, or `undefined` when the answer names none of them. */
  readonly route: string | undefined
  /** What the answer named, cleaned (for messages). */
  readonly named: string | undefined
  readonly confidence: number | undefined
  /** Why the confidence could not be read, when it was written but is not a number in [0, 1]. */
  readonly confidenceError?: string | undefined
}

const maxAnswerChars = 16_384

/** A name as written, without markdown emphasis, quotes, brackets and a trailing full stop. */
const clean = (text: string): string =>
  text.trim().replace(/^[*_`"'“”‘’<\[(\s]+|[*_`"'“”‘’>\])\s.,;:!]+$/g, "").trim()

const labelled = (text: string, label: string): string | undefined => {
  const pattern = new RegExp(`(?:^|\\n)[\\s>*_#-]*${label}[*_\\s]*[:=][*_\\s]*([^\\n]*)`, "i")
  const found = pattern.exec(text)
  return found === null ? undefined : found[1]!
}

/**
 * Reads a classifier's answer against the route names: the `route:` line (or a bare name, or exactly one route
 * mentioned), and the `confidence:` line.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseClassification = (answer: string, routeNames: ReadonlyArray<string>): Classification => {
  const text = answer.length > maxAnswerChars ? answer.slice(0, maxAnswerChars) : answer
  const byKey = new Map(routeNames.map((routeName) => [routeName.toLowerCase(), routeName]))
  const confidenceText = labelled(text, "confidence")
  let confidence: number | undefined
  let confidenceError: string | undefined
  if (confidenceText !== undefined) {
    const read = Architecture.parse.unitScore(clean(confidenceText).split(/\s/)[0] ?? "", "confidence")
    if (Result.isSuccess(read)) confidence = read.success
    else confidenceError = read.failure
  }
  const common = { confidence, ...(confidenceError !== undefined ? { confidenceError } : {}) }
  const routeText = labelled(text, "route")
  if (routeText !== undefined) {
    const named = clean(routeText)
    return { route: byKey.get(named.toLowerCase()), named, ...common }
  }
  const whole = clean(text)
  if (byKey.has(whole.toLowerCase())) return { route: byKey.get(whole.toLowerCase()), named: whole, ...common }
  // Prose: a route counts when exactly one of them is mentioned as a word.
  const lower = text.toLowerCase()
  const mentioned = routeNames.filter((routeName) =>
    new RegExp(`(^|[^a-z0-9_-])${routeName.toLowerCase().replace(/[-_]/g, "[-_]")}($|[^a-z0-9_-])`).test(lower)
  )
  return mentioned.length === 1
    ? { route: mentioned[0], named: mentioned[0], ...common }
    : { route: undefined, named: undefined, ...common }
}

// ---------------------------------------------------------------------------------------------------------
// The route list the classifier reads
// ---------------------------------------------------------------------------------------------------------

const describeRoute = (route: { readonly name: string; readonly agent: Agent.Agent<unknown>; readonly description?: string | undefined }) => {
  const text = route.description ?? route.agent.instructions.split(/\r?\n/).map((line) => line.trim()).find((line) => line !== "") ??
    "(no description)"
  return `- ${route.name}: ${text.length <= 200 ? text : `${text.slice(0, 199)}…`}`
}
