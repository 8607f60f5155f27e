/**
 * ToolVote (DESIGN §5.2): several attempts at a task run at once, each a Python tool loop — the model replies
 * `{"tool":"python","code":"..."}` to run a program (its output comes back as `PYTHON_OUTPUT:`) or
 * `FINAL: <answer>` to finish — and their final answers vote. Answers are normalized before counting (whitespace,
 * `$…$`, `\boxed{…}`, `42.0` = `42`; the normalizer is replaceable). As soon as one answer has `earlyStop` votes the
 * other attempts are interrupted, their Python processes killed. The winner has the most votes; ties go to the
 * answer that reached that count first. `timeBudget` is a hard deadline: when it passes, every attempt still
 * running is interrupted and the votes so far decide (interrupted `time_budget`).
 *
 * ToolVote is an architecture, not a rollout: it is a program over one task that streams its events and ends with
 * one `RunCompleted`, so it is what an agent does (`Agent.make({ architecture: ToolVote.architecture })`) and runs,
 * streams and nests like any other. The rollouts (`Evaluate`, `ActorLoop`, `Durable`) are the loops that run
 * architectures over datasets and task streams.
 *
 * Python runs through the `Sandbox` in context — never as a bare child of this process — with a timeout (6 s by
 * default) and the sandbox's limits and isolation (no network where bubblewrap works), one workspace per attempt:
 * ToolVote needs a `Sandbox` layer (there is no unsandboxed fallback), and a workspace or a program the sandbox
 * cannot start fails that attempt. Code over `maxCodeChars`
 * (50,000) is answered with an error instead of being run; a request for any other tool (`bash`…) is refused with
 * an error message to the model.
 *
 * Attempts are sub-agents `<parent>__attempt_<k>` (k from 1): the running agent (its instructions are added to
 * the protocol's system prompt, its model is used) with the tool loop as architecture; their model steps are
 * `tool_vote.turn_<t>`. ToolVote documents a recovery: an attempt that fails, or stops at its `maxTurns`, counts as
 * having no vote and the others go on (`metadata.attempts[k].status`); a spent budget ends the vote with the votes
 * so far (interrupted with the budget's reason); the run fails with the last `SubAgentFailed` only when every
 * attempt failed and no answer got a vote.
 *
 * Events: `tool_vote.attempt_started`, `.python_ran` (in the attempt's session), `.answer`, `.early_stop`,
 * `.decided`. `RunResult.metadata`: `accepted` (some answer got a vote), `answer`, `votes` (per distinct answer),
 * `attempts` (each attempt's status, answer, turns and Python runs), `earlyStop`, `timedOut`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Sandbox from "valet/Sandbox"
 * import * as ToolVote from "valet/ToolVote"
 *
 * // Three attempts, one at a time; two equal answers end the vote. The replies stand in for a model: the first
 * // attempt runs a program and reads its output, the second answers at once, and the third never starts.
 * const voter = Agent.make({
 *   name: "voter",
 *   instructions: "",
 *   architecture: ToolVote.makeUnsafe({ attempts: 3, concurrency: 1, earlyStop: 2, pythonTimeout: "10 seconds" })
 * })
 * const model = ScriptedModel.layer([`{"tool": "python", "code": "print(2 ** 10)"}`, "FINAL: 1024", "FINAL: 1024.0"])
 * const result = await Effect.runPromise(
 *   Agent.run(voter, "What is 2 to the 10th?").pipe(Effect.provide(model), Effect.provide(Sandbox.layerProcess()))
 * )
 * console.log(result.output, result.metadata.earlyStop) // "1024 true"
 * ```
 *
 * @since 0.1.0
 */
import { Deferred, Duration, Effect, Option, Schema } from "effect"
import * as Agent from "../core/Agent.js"
import type { SubAgentFailed } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"
import type * as Sandbox from "../environment/Sandbox.js"
import { RequestOptions } from "./internal/sampling.js"
import * as Attempt from "./internal/toolVote/attempt.js"
import * as Protocol from "./internal/toolVote/protocol.js"

/** The default system prompt of every attempt; placeholder `{timeout_seconds}`. @since 0.1.0 @category prompts */
export const defaultSystemPrompt: string = Protocol.defaultSystemPrompt

/** What one model reply asks for: a final answer, a Python program, a refused tool request, or neither. @since 0.1.0 @category protocol */
export type Turn = Protocol.Turn

/** Reads one model reply by the protocol: `FINAL:` first (last occurrence), else the python tool JSON. @since 0.1.0 @category protocol */
export const parseTurn: (text: string) => Turn = Protocol.parseTurn

const { concurrency, duration, function: fn, int, optional, template, withDefault } = Architecture.option

/** A duration above zero: a deadline or a timeout of zero (or less) would stop everything before it starts. */
const positiveDuration = duration.check(
  Schema.makeFilter((input: Duration.Input) => Duration.isGreaterThan(Duration.fromInputUnsafe(input), Duration.zero), {
    expected: "a positive duration"
  })
)

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

/**
 * ToolVote, declared once: its name, options and program; `make`, `makeUnsafe` and the CLI read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "tool_vote",
  title: "ToolVote",
  description: "attempts that run Python in the sandbox, voting on their final answers",
  options: {
    /** Attempts in all (≥ 1, default 8). */
    attempts: int(1).pipe(withDefault(8)),
    /** Attempts running at once (≥ 1 or `"unbounded"`; default: all of them). */
    concurrency: optional(concurrency),
    /** Votes for one answer that end the vote at once (≥ 1, default 4). */
    earlyStop: int(1).pipe(withDefault(4)),
    /** Model turns per attempt (≥ 1, default 32). */
    maxTurns: int(1).pipe(withDefault(32)),
    /** A hard deadline for the whole vote (`"2 minutes"`, milliseconds, a `Duration`). Default none. */
    timeBudget: optional(positiveDuration),
    /** How long one Python program may run (default 6 seconds). */
    pythonTimeout: positiveDuration.pipe(withDefault<typeof positiveDuration>("6 seconds")),
    /** Longer code is answered with an error instead of being run (default 50,000 characters). */
    maxCodeChars: int(1).pipe(withDefault(50_000)),
    /** Longer program output is cut, with a note, before it goes back to the model (default 8,000 characters). */
    maxOutputChars: int(1).pipe(withDefault(8_000)),
    /** How answers are compared (default: the shared normalizer, `42.0` = `42`). */
    normalize: fn<(answer: string) => string>("normalize").pipe(
      withDefault<Schema.declare<(answer: string) => string>>(Architecture.parse.normalizeAnswer)
    ),
    /** The attempts' system prompt template (`{timeout_seconds}`); the running agent's instructions follow it. */
    systemPrompt: template(["timeout_seconds"]).pipe(withDefault(defaultSystemPrompt)),
    /** Sampling options of every call; a `seed` is offset by the attempt's number. */
    request: optional(RequestOptions)
  },
  deprecated: { maxConcurrency: "concurrency" },
  program: (input, options) => {
    const pythonTimeoutMs = Duration.toMillis(Duration.fromInputUnsafe(options.pythonTimeout))
    const attemptConfig: Attempt.Config = {
      systemPrompt: Architecture.fill(options.systemPrompt, { timeout_seconds: String(pythonTimeoutMs / 1000) }),
      maxTurns: options.maxTurns,
      pythonTimeoutMs,
      maxCodeChars: options.maxCodeChars,
      maxOutputChars: options.maxOutputChars,
      request: options.request
    }
    const architectures = Array.from({ length: options.attempts }, (_, i) => Attempt.architecture(attemptConfig, i + 1))
    const atOnce = options.concurrency ?? options.attempts
    const timeBudget = options.timeBudget === undefined ? undefined : Duration.fromInputUnsafe(options.timeBudget)

    return Effect.gen(function*() {
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
          const agent = Architecture.withArchitecture(input.agent, architectures[index]!)
          // `roleResult`, not `role`: an attempt that fails or stops is a missing vote, and the others go on.
          const ran = yield* Architecture.roleResult(agent, input.prompt, { role: "attempt", index: record.attempt })
          if (ran._tag === "Failed") {
            lastFailure = ran.error
            Object.assign(record, { status: "failed", reason: ran.reason, error: `${ran.error.error._tag}: ${ran.error.error.message}` })
            return
          }
          record.turns = numberOr(ran.result.metadata.turns)
          record.pythonRuns = numberOr(ran.result.metadata.pythonRuns)
          const answer = ran._tag === "Completed" && typeof ran.result.metadata.answer === "string" ? ran.result.metadata.answer : undefined
          const key = answer === undefined ? "" : options.normalize(answer)
          if (answer === undefined || key === "") {
            Object.assign(record, { status: "no_answer", ...(ran._tag === "Interrupted" ? { reason: ran.reason } : {}) })
            if (ran._tag === "Interrupted" && Architecture.isBudgetStop(ran.reason)) {
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
          if (votes >= options.earlyStop && early === undefined) {
            early = tally
            yield* Architecture.progress("tool_vote.early_stop", { answer: tally.answer, key, votes, attempt: record.attempt })
            yield* Deferred.succeed(stop, undefined)
          }
        })

      // Whichever ends first — every attempt, or an early stop — interrupts the other and waits for it to be gone,
      // so the losers' sandboxed processes are dead when the vote is decided.
      const attempts = Effect.forEach(records, (_, index) => attempt(index), { concurrency: atOnce, discard: true })
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
})

/** The architecture's name, as `RunStarted.architecture` reports it. @since 0.1.0 @category definition */
export const name = definition.name

/** The options of ToolVote; every one has a default. @since 0.1.0 @category definition */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * ToolVote with options, checked here: `attempts: 0`, a duration that is not positive, an unknown placeholder or
 * option fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/** `make` for a module-level value: ToolVote, or the `InvalidOptions` thrown. @since 0.1.0 @category constructors */
export const makeUnsafe = definition.makeUnsafe

/**
 * ToolVote with its defaults: 8 attempts at once, early stop at 4 votes, 32 turns, 6 s per program.
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model | Sandbox.Sandbox> = definition.makeUnsafe()

