/**
 * What `valet solve` and `valet eval` share: the agent for an architecture and its flags, the model layer (flags,
 * then environment, then `configs/vllm_actors.yaml`), progress on a terminal or as plain lines, the summary
 * table. The commands' work is in functions that take the model and sandbox layers as parameters, so tests run
 * them on `ScriptedModel` and the test sandbox.
 */
import { type Config, Effect, type FileSystem, Layer, Option, Stream } from "effect"
import type { SqlError } from "effect/sql"
import { Flag } from "effect/cli"
import * as Agent from "../../core/Agent.js"
import type { InvalidOptions } from "../../core/AgentError.js"
import * as AgentEvent from "../../core/AgentEvent.js"
import * as Durable from "../../rollouts/Durable.js"
import * as Evaluate from "../../rollouts/Evaluate.js"
import type * as Model from "../../core/Model.js"
import * as Sandbox from "../../environment/Sandbox.js"
import * as Vllm from "../../providers/Vllm.js"
import { acceptedNames, agentFor, type ArchitectureName, architectureOf, architectures, budgetOf, type Settings } from "./evalAgents.js"
import { agentNameOf, describeStore, engineFor, storeFailureAsError, storeOf } from "./durable.js"
import { modelLayer } from "./model.js"
import { commandSandbox } from "./sandbox.js"
import { oneLine, type Output, progressLine, seconds, verdict } from "./output.js"

/** The layers a command runs on. */
export interface Layers<E1, E2> {
  readonly model: Layer.Layer<Model.Model, E1>
  /** Built only for ToolVote. */
  readonly sandbox: Layer.Layer<Sandbox.Sandbox, E2>
}

export { agentFor, type ArchitectureName, architectures, budgetOf, type Settings }

// ---------------------------------------------------------------------------------------------------------
// Flags
// ---------------------------------------------------------------------------------------------------------

// Checked here, so a bad count is a usage error naming its flag, not an architecture's option error.
const count = (name: string, description: string) =>
  Flag.Int(name).pipe(Flag.filter((n) => n >= 1, () => "an integer >= 1"), Flag.withDescription(description), Flag.optional)
const textFlag = (name: string, description: string) => Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

/** The flags `solve` and `eval` share. */
export const flags = {
  architecture: Flag.Literals("architecture", acceptedNames).pipe(
    Flag.withDescription(`How each problem is solved: ${architectures.join(", ")} (default ensemble).`),
    Flag.withDefault<string>("ensemble")
  ),
  out: textFlag("out", "The results file (JSONL), appended to and resumed from. Default: <dataset>.results.jsonl."),
  maxCalls: count("max-calls", "Model calls per problem at most (the Ensemble's hard cap; a budget for the others)."),
  maxRounds: count("max-rounds", "Rounds at most (Ensemble, Self-Refine)."),
  maxConcurrency: count("call-concurrency", "Model calls in flight per problem (Ensemble phases, ToolVote attempts)."),
  deprecatedMaxConcurrency: count("max-concurrency", "Deprecated: --call-concurrency (valet 0.x's name, still read)."),
  n: count("n", "Completions per solver call (Ensemble)."),
  attempts: count("attempts", "Attempts that vote (ToolVote)."),
  earlyStop: count("early-stop", "Votes for one answer that end the vote (ToolVote)."),
  concurrency: count("concurrency", "Problems at once (default 4)."),
  shareReference: Flag.Boolean("share-reference").pipe(
    Flag.withDescription("Tell the architecture each problem's reference (the Ensemble's judge grades against it)."),
    Flag.withDefault(false)
  ),
  baseUrl: textFlag("base-url", "The OpenAI-compatible server (else VALET_BASE_URL, else the vLLM pool file)."),
  model: textFlag("model", "The model name (else VALET_MODEL, else the server's first model)."),
  apiKey: textFlag("api-key", "The API key (else VALET_API_KEY or OPENAI_API_KEY)."),
  config: textFlag("config", `The vLLM pool file used without a base URL (default ${Vllm.defaultConfigPath}).`)
}

/** The parsed values of `flags`. */
export interface FlagValues {
  readonly architecture: string
  readonly out: Option.Option<string>
  readonly maxCalls: Option.Option<number>
  readonly maxRounds: Option.Option<number>
  readonly maxConcurrency: Option.Option<number>
  readonly deprecatedMaxConcurrency: Option.Option<number>
  readonly n: Option.Option<number>
  readonly attempts: Option.Option<number>
  readonly earlyStop: Option.Option<number>
  readonly concurrency: Option.Option<number>
  readonly shareReference: boolean
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  readonly apiKey: Option.Option<string>
  readonly config: Option.Option<string>
}

/** The results file for a dataset: `--out`, else the dataset's name with `.results.jsonl`. */
export const defaultOut = (dataset: string): string => `${dataset.replace(/\.jsonl?$/i, "")}.results.jsonl`

const said = new Set<string>()

/** Says once per process that a flag was spelled as valet 0.x spelled it (`--architecture self-refine`, `--max-concurrency`). */
export const noteDeprecatedFlags = (values: FlagValues): Effect.Effect<void> =>
  Effect.suspend(() => {
    const notes: Array<string> = []
    const name = values.architecture
    if (!(architectures as ReadonlyArray<string>).includes(name)) {
      notes.push(`--architecture ${name} is deprecated, use ${architectureOf(name)} (valet 0.x reads both)`)
    }
    if (Option.isSome(values.deprecatedMaxConcurrency)) notes.push("--max-concurrency is deprecated, use --call-concurrency (valet 0.x reads both)")
    const fresh = notes.filter((note) => !said.has(note))
    for (const note of fresh) said.add(note)
    return Effect.forEach(fresh, (note) => Effect.logWarning(note), { discard: true })
  })

/** The settings the flags ask for. */
export const settingsOf = (values: FlagValues, dataset: string | undefined): Settings => ({
  architecture: architectureOf(values.architecture),
  maxCalls: Option.getOrUndefined(values.maxCalls),
  maxRounds: Option.getOrUndefined(values.maxRounds),
  // The current flag wins when both are given.
  maxConcurrency: Option.getOrUndefined(Option.orElse(values.maxConcurrency, () => values.deprecatedMaxConcurrency)),
  n: Option.getOrUndefined(values.n),
  attempts: Option.getOrUndefined(values.attempts),
  earlyStop: Option.getOrUndefined(values.earlyStop),
  concurrency: Option.getOrUndefined(values.concurrency),
  shareReference: values.shareReference,
  out: dataset === undefined ? undefined : Option.getOrElse(values.out, () => defaultOut(dataset))
})

/** The layers the real commands run on: the configured model, and the process sandbox (configured from the environment). */
export const realLayers = (values: FlagValues) => ({
  model: modelLayer(values),
  sandbox: commandSandbox()
})

// ---------------------------------------------------------------------------------------------------------
// The commands' work
// ---------------------------------------------------------------------------------------------------------

/**
 * Evaluates the dataset at `dataset` with the agent for `settings`: progress after each problem (a status line on a
 * terminal, a plain line per problem otherwise), then the summary table.
 */
export const evaluateDataset = <E1, E2>(
  dataset: string,
  settings: Settings,
  layers: Layers<E1, E2>,
  output: Output
): Effect.Effect<
  Evaluate.Report,
  Evaluate.EvaluateError | InvalidOptions | E1 | E2 | Durable.DurableStoreError | Config.ConfigError | SqlError.SqlError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const built = yield* agentFor(settings)
    const budget = budgetOf(settings)
    const options = {
      concurrency: settings.concurrency ?? 4,
      ...(settings.out !== undefined ? { out: settings.out } : {}),
      ...(budget !== undefined ? { budget } : {}),
      shareReference: settings.shareReference ?? false,
      onStart: (start: { readonly total: number; readonly resumed: number; readonly issues: ReadonlyArray<Evaluate.Issue> }) =>
        Effect.gen(function*() {
          for (const issue of start.issues) yield* output.line(`skipped ${issue.path}:${issue.line}: ${issue.message}`)
          yield* output.line(
            `evaluating ${start.total - start.resumed} of ${start.total} problems with ${settings.architecture}` +
              `${start.resumed > 0 ? ` (${start.resumed} already in ${settings.out})` : ""}` +
              `${settings.durable !== undefined ? `, durably on ${describeStore(storeOf(settings.durable))}` : ""}`
          )
        }),
      onResult: (result: Evaluate.ProblemResult, progress: Evaluate.Progress) =>
        output.tty
          ? output.status(progressLine(progress))
          : output.line(
            `[${progress.done}/${progress.total}] ${result.id}: ${verdict(result)} · answer ${JSON.stringify(oneLine(result.answer))} · ` +
              `${result.calls} calls · ${seconds(result.latencyMs)} · ${progressLine(progress)}`
          )
    }
    const report = settings.durable !== undefined
      ? yield* Durable.evaluate(dataset, { ...options, agent: agentNameOf(settings) }).pipe(
        Effect.provide(engineFor(storeOf(settings.durable), layers, built.sandbox)),
        storeFailureAsError
      )
      : built.sandbox
      ? yield* Effect.provide(Evaluate.run(dataset, { ...options, agent: built.agent }), Layer.merge(layers.model, layers.sandbox))
      : yield* Effect.provide(Evaluate.run(dataset, { ...options, agent: built.agent }), layers.model)
    yield* output.line("")
    yield* output.line(Evaluate.formatSummary(report.summary))
    if (settings.out !== undefined) yield* output.line(`results: ${settings.out}`)
    return report
  })

/** The candidates table of an Ensemble run. */
export const candidatesTable = (metadata: Readonly<Record<string, unknown>>): Array<string> => {
  const candidates = Array.isArray(metadata.candidates) ? metadata.candidates as ReadonlyArray<Record<string, any>> : []
  if (candidates.length === 0) return []
  const rows = [["#", "answer", "support", "risk", "confidence", "score"]]
  for (const c of candidates) {
    rows.push([
      String(c.index),
      oneLine(String(c.answer), 40),
      String(c.support),
      c.critique === null ? "—" : String(c.critique.risk),
      c.judgement === null ? "—" : String(c.judgement.confidence),
      c.judgement === null ? "—" : String(c.judgement.score)
    ])
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)))
  return rows.map((row) => row.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd())
}

/**
 * Solves one problem with the agent for `settings`, printing the architecture's milestones as they happen, then the
 * answer, whether it was accepted, the calls spent and (for the Ensemble) the candidates table.
 */
export const solveProblem = <E1, E2>(
  problem: string,
  settings: Settings,
  layers: Layers<E1, E2>,
  output: Output
) =>
  Effect.gen(function*() {
    const built = yield* agentFor(settings)
    const budget = budgetOf(settings)
    let result: AgentEvent.RunResult | undefined
    const onEvent = (event: AgentEvent.AgentEvent) => {
      if (event._tag === "RunCompleted" && !event.sessionId.includes("__")) {
        result = event.result
        return Effect.void
      }
      return event._tag === "Progress" ? output.line(AgentEvent.format(event)) : Effect.void
    }
    const streamOptions = { textDeltas: false, ...(budget !== undefined ? { budget } : {}) }
    if (built.sandbox) {
      yield* Stream.runForEach(Agent.stream(built.agent, problem, streamOptions), onEvent).pipe(
        Effect.provide(Layer.merge(layers.model, layers.sandbox))
      )
    } else {
      yield* Stream.runForEach(Agent.stream(built.agent, problem, streamOptions), onEvent).pipe(Effect.provide(layers.model))
    }
    const done = result!
    const accepted = done.metadata.accepted
    yield* output.line("")
    yield* output.line(`answer: ${done.output === "" ? "(none)" : done.output}`)
    yield* output.line(
      `${accepted === true ? "accepted" : accepted === false ? "not accepted" : "finished"}` +
        `${done.interrupted ? `, interrupted (${done.interruptionReason})` : ""} · ${done.modelCalls} model calls · ` +
        `${done.usage.totalTokens} tokens · ${seconds(done.durationMs)}`
    )
    for (const row of candidatesTable(done.metadata)) yield* output.line(row)
    return done
  })

