/**
 * ToolVote (DESIGN §5.2): several attempts at a problem run at once, each a Python tool loop — the model replies
 * `{"tool":"python","code":"..."}` to run a program (its output comes back as `PYTHON_OUTPUT:`) or
 * `FINAL: <answer>` to finish — and their final answers vote. Answers are normalized before counting (whitespace,
 * `$…$`, `\boxed{…}`, `42.0` = `42`; the normalizer is replaceable). As soon as one answer has `earlyStop` votes the
 * other attempts are interrupted, their Python processes killed. The winner has the most votes; ties go to the
 * answer that reached that count first. `timeBudget` is a hard deadline: when it passes, every attempt still
 * running is interrupted and the votes so far decide (interrupted `time_budget`).
 *
 * Python runs through the `Sandbox` in context — never as a bare child of this process — with a timeout (6 s by
 * default) and the sandbox's limits and isolation (no network where bubblewrap works), one workspace per attempt.
 * Code over `maxCodeChars` (50,000) is answered with an error instead of being run; a request for any other tool
 * (`bash`…) is refused with an error message to the model.
 *
 * Attempts are sub-agents `<parent>__attempt_<k>` (k from 1): the running agent (its instructions are added to
 * the protocol's system prompt, its model is used) with the tool loop as architecture.
 *
 * Events: `tool_vote.attempt_started`, `.python_ran` (in the attempt's session), `.answer`, `.early_stop`,
 * `.decided`. `RunResult.metadata`: `accepted` (some answer got a vote), `answer`, `votes` (per distinct answer),
 * `attempts` (each attempt's status, answer, turns and Python runs), `earlyStop`, `timedOut`.
 *
 * @since 0.1.0
 */
import { Deferred, Duration, Effect, Option, Schema } from "effect"
import * as Agent from "../core/Agent.js"
import type { InvalidOptions, SubAgentFailed } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { normalizeAnswer } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import { RequestOptions } from "./internal/sampling.js"
import { FunctionSchema, withDefault } from "../core/internal/decode.js"
import * as Template from "../core/internal/template.js"
import * as Attempt from "./internal/toolVote/attempt.js"
import * as Protocol from "./internal/toolVote/protocol.js"
import type * as Model from "../core/Model.js"
import type * as Sandbox from "../environment/Sandbox.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "tool_vote"

/** The default system prompt of every attempt; placeholder `{timeout_seconds}`. */
export const defaultSystemPrompt: string = Protocol.defaultSystemPrompt

/** What one model reply asks for: a final answer, a Python program, a refused tool request, or neither. */
export type Turn = Protocol.Turn

/** Reads one model reply by the protocol: `FINAL:` first (last occurrence), else the python tool JSON. */
export const parseTurn: (text: string) => Turn = Protocol.parseTurn

/** The options of ToolVote; every one has a default. */
export interface Options {
  /** Attempts in all (≥ 1, default 8). */
  readonly attempts?: number | undefined
  /** Attempts running at once (≥ 1, default: all of them). */
  readonly maxConcurrency?: number | undefined
  /** Votes for one answer that end the vote at once (≥ 1, default 4). */
  readonly earlyStop?: number | undefined
  /** Model turns per attempt (≥ 1, default 32). */
  readonly maxTurns?: number | undefined
  /** A hard deadline for the whole vote (e.g. `"2 minutes"`, or milliseconds). Default none. */
  readonly timeBudget?: Duration.Input | undefined
  /** How long one Python program may run (default 6 seconds). */
  readonly pythonTimeout?: Duration.Input | undefined
  /** Longer code is answered with an error instead of being run (default 50,000 characters). */
  readonly maxCodeChars?: number | undefined
  /** Longer program output is cut, with a note, before it goes back to the model (default 8,000 characters). */
  readonly maxOutputChars?: number | undefined
  /** How answers are compared (default: the shared normalizer). */
  readonly normalize?: ((answer: string) => string) | undefined
  /** The attempts' system prompt template (`{timeout_seconds}`). */
  readonly systemPrompt?: string | undefined
  /** Sampling options of every call; a `seed` is offset by the attempt's number. */
  readonly request?: RequestOptions | undefined
}

/** A positive duration, or undefined when `u` is not one. */
const positiveDuration = (u: unknown): Duration.Duration | undefined => {
  try {
    const decoded = Duration.fromInput(u as Duration.Input)
    return Option.isSome(decoded) && Duration.isGreaterThan(decoded.value, Duration.zero) ? decoded.value : undefined
  } catch {
    return undefined
  }
}

const DurationSchema = Schema.declare((u: unknown): u is Duration.Input => positiveDuration(u) !== undefined, {
  expected: "a positive duration (milliseconds, or a string such as \"6 seconds\")"
})

const OptionsSchema = Schema.Struct({
  attempts: Opts.IntAtLeast(1).pipe(withDefault(8)),
  maxConcurrency: Schema.optional(Opts.IntAtLeast(1)),
  earlyStop: Opts.IntAtLeast(1).pipe(withDefault(4)),
  maxTurns: Opts.IntAtLeast(1).pipe(withDefault(32)),
  timeBudget: Schema.optional(DurationSchema),
  pythonTimeout: DurationSchema.pipe(withDefault<typeof DurationSchema>("6 seconds")),
  maxCodeChars: Opts.IntAtLeast(1).pipe(withDefault(50_000)),
  maxOutputChars: Opts.IntAtLeast(1).pipe(withDefault(8_000)),
  normalize: FunctionSchema<(answer: string) => string>("normalize").pipe(withDefault(normalizeAnswer)),
  systemPrompt: Template.Template(["timeout_seconds"]).pipe(withDefault(defaultSystemPrompt)),
  request: Schema.optional(RequestOptions)
})
type Config = typeof OptionsSchema.Type

/**
 * ToolVote with options, checked here: `attempts: 0`, a non-positive duration, an unknown placeholder or option
 * fail with `InvalidOptions`.
 */
export const make = (options: Options = {}): Effect.Effect<Architecture.Architecture<Model.Model | Sandbox.Sandbox>, InvalidOptions> =>
  Effect.map(Opts.decode("ToolVote", OptionsSchema, options), (config) => Architecture.make({ name, program: program(config) }))

/** `make` for a module-level value: ToolVote, or the `InvalidOptions` thrown. */
export const makeUnsafe = (options: Options = {}): Architecture.Architecture<Model.Model | Sandbox.Sandbox> =>
  Opts.runUnsafe(make(options))

let defaultProgramCache: ReturnType<typeof program> | undefined
const defaultProgram = () => (defaultProgramCache ??= program(Schema.decodeUnknownSync(OptionsSchema)({})))

/** ToolVote with its defaults: 8 attempts at once, early stop at 4 votes, 32 turns, 6 s per program. */
export const architecture: Architecture.Architecture<Model.Model | Sandbox.Sandbox> = Architecture.make({
  name,
  // Decoded and built once: the default program holds no per-run state.
  program: (input) => defaultProgram()(input)
})

// ---------------------------------------------------------------------------------------------------------
// The vote
// ---------------------------------------------------------------------------------------------------------

interface Tally {
  readonly key: string
  /** The answer as first written. */
  readonly answer: string
  readonly attempts: Array<number>
  /** `reachedAt[c - 1]`: when (in order of counted votes) this answer reached c votes. */
  readonly reachedAt: Array<number>
}

type Status = "not_started" | "running" | "answered" | "no_answer" | "failed" | "cancelled"

interface AttemptRecord {
  attempt: number
  sessionId: string
  status: Status
  answer: string | null
  key: string | null
  turns: number | null
  pythonRuns: number | null
  reason?: string
  error?: string
}

/** The most votes; ties to the answer that reached that count first. */
const winnerOf = (tallies: Iterable<Tally>): Tally | undefined => {
  let best: Tally | undefined
  for (const tally of tallies) {
    const votes = tally.attempts.length
    if (
      best === undefined || votes > best.attempts.length ||
      (votes === best.attempts.length && tally.reachedAt[votes - 1]! < best.reachedAt[votes - 1]!)
    ) best = tally
  }
  return best
}

const numberOr = (value: unknown): number | null => (typeof value === "number" ? value : null)

const program = (config: Config) => {
  const pythonTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(config.pythonTimeout))
  const attemptConfig: Attempt.Config = {
    systemPrompt: Template.fill(config.systemPrompt, { timeout_seconds: String(pythonTimeoutMs / 1000) }),
    maxTurns: config.maxTurns,
    pythonTimeoutMs,
    maxCodeChars: config.maxCodeChars,
    maxOutputChars: config.maxOutputChars,
    request: config.request
  }
  const architectures = Array.from({ length: config.attempts }, (_, i) => Attempt.architecture(attemptConfig, i + 1))
  const concurrency = config.maxConcurrency ?? config.attempts
  const timeBudget = config.timeBudget === undefined ? undefined : Duration.fromInputUnsafe(config.timeBudget)

  return (input: Architecture.Input) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const tallies = new Map<string, Tally>()
      const records: Array<AttemptRecord> = architectures.map((_, i) => ({
        attempt: i + 1,
        sessionId: Agent.childSessionId(run.sessionId, "attempt", i + 1),
        status: "not_started",
        answer: null,
        key: null,
        turns: null,
        pythonRuns: null
      }))
      let counted = 0
      let early: Tally | undefined
      let externalStop: string | undefined
      let lastFailure: SubAgentFailed | undefined
      const stop = yield* Deferred.make<void>()

      const attempt = (index: number) =>
        Effect.gen(function*() {
          const record = records[index]!
          record.status = "running"
          yield* Architecture.progress("tool_vote.attempt_started", { attempt: record.attempt })
          // Cast: a run's `input.agent` is the `Agent` it was started with, typed by its definition only (core's
          // Architecture does not import Agent).
          const agent = Roles.withArchitecture(input.agent as Agent.Agent<unknown>, architectures[index]!)
          const ran = yield* Roles.run(agent, input.prompt, { role: "attempt", index: record.attempt })
          if (ran._tag === "Failed") {
            lastFailure = ran.error
            Object.assign(record, { status: "failed", reason: ran.reason, error: `${ran.error.error._tag}: ${ran.error.error.message}` })
            return
          }
          record.turns = numberOr(ran.result.metadata.turns)
          record.pythonRuns = numberOr(ran.result.metadata.pythonRuns)
          const answer = ran._tag === "Completed" && typeof ran.result.metadata.answer === "string" ? ran.result.metadata.answer : undefined
          const key = answer === undefined ? "" : config.normalize(answer)
          if (answer === undefined || key === "") {
            Object.assign(record, { status: "no_answer", ...(ran._tag === "Interrupted" ? { reason: ran.reason } : {}) })
            if (ran._tag === "Interrupted" && Roles.isBudget(ran.reason)) {
              externalStop ??= ran.reason
              yield* Deferred.succeed(stop, undefined)
            }
            return
          }
          Object.assign(record, { status: "answered", answer, key })
          let tally = tallies.get(key)
          if (tally === undefined) {
            tally = { key, answer, attempts: [], reachedAt: [] }
            tallies.set(key, tally)
          }
          tally.attempts.push(record.attempt)
          tally.reachedAt.push(++counted)
          const votes = tally.attempts.length
          yield* Architecture.progress("tool_vote.answer", { attempt: record.attempt, answer, key, votes })
          if (votes >= config.earlyStop && early === undefined) {
            early = tally
            yield* Architecture.progress("tool_vote.early_stop", { answer: tally.answer, key, votes, attempt: record.attempt })
            yield* Deferred.succeed(stop, undefined)
          }
        })

      // Whichever ends first — every attempt, or an early stop — interrupts the other and waits for it to be gone,
      // so the losers' sandboxed processes are dead when the vote is decided.
      const attempts = Effect.forEach(records, (_, index) => attempt(index), { concurrency, discard: true })
      const vote = Effect.raceFirst(attempts, Deferred.await(stop))
      const timedOut = timeBudget === undefined
        ? yield* Effect.as(vote, false)
        : Option.isNone(yield* Effect.timeoutOption(vote, timeBudget))

      for (const record of records) if (record.status === "running") record.status = "cancelled"
      const winner = winnerOf(tallies.values())
      if (winner === undefined && lastFailure !== undefined && records.every((r) => r.status === "failed")) {
        return yield* lastFailure
      }
      const votes = [...tallies.values()]
        .sort((a, b) => b.attempts.length - a.attempts.length || a.reachedAt[a.attempts.length - 1]! - b.reachedAt[b.attempts.length - 1]!)
        .map((tally) => ({ answer: tally.answer, key: tally.key, votes: tally.attempts.length, attempts: tally.attempts }))
      const output = winner?.answer ?? ""
      if (output !== "") yield* Architecture.setOutput(output)
      const finished = records.filter((r) => r.status === "answered" || r.status === "no_answer" || r.status === "failed").length
      yield* Architecture.progress("tool_vote.decided", {
        answer: winner?.answer ?? null,
        key: winner?.key ?? null,
        votes: winner?.attempts.length ?? 0,
        earlyStop: early !== undefined,
        timedOut,
        attemptsFinished: finished
      })
      const interrupted = timedOut ? "time_budget" : externalStop
      return {
        output,
        ...(interrupted !== undefined ? { interrupted } : {}),
        metadata: {
          accepted: winner !== undefined,
          answer: output,
          key: winner?.key ?? null,
          votes,
          attempts: records,
          earlyStop: early !== undefined,
          timedOut
        }
      }
    })
}
