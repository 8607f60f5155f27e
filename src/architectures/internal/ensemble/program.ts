/**
 * The Ensemble's rounds (see `Ensemble.ts` for the behaviour): solver, critic and judge phases with their calls
 * counted before they start, answers pooled by normalized form, the policy's decision, and the metadata trail.
 *
 * Every role runs with `Architecture.roleResult`, not `role`: the Ensemble documents a recovery (a failed or stopped
 * solver, critic or judge is recorded in `failures` and the others go on; a spent budget — the run's or `maxCalls` —
 * ends the run early, and only every solver of a round failing, with no answer yet, fails it).
 */
import { Effect } from "effect"
import * as Agent from "../../../core/Agent.js"
import { ArchitectureFailed, type SubAgentFailed } from "../../../core/AgentError.js"
import * as Architecture from "../../../core/Architecture.js"
import { yieldBeforeReading } from "../../../core/internal/parse.js"
import * as Evidence from "./evidence.js"
import type { Config } from "./options.js"
import { completionsOf, oneCall } from "./role.js"

type Critique = Evidence.Critique
type Judgement = Evidence.Judgement
type Decision = Evidence.Decision

const { finalAnswer, lastNonEmptyLine, preview } = Architecture.parse

interface Supporter {
  readonly round: number
  readonly solver: string
  readonly choice: number
}

interface State {
  readonly index: number
  readonly answer: string
  readonly key: string
  support: number
  readonly firstRound: number
  readonly supporters: Array<Supporter>
  critique: (Critique & { readonly round: number; readonly sessionId: string }) | undefined
  judgement: (Judgement & { readonly round: number; readonly sessionId: string }) | undefined
}

interface Failure {
  readonly round: number
  readonly role: string
  readonly sessionId: string
  readonly reason: string
  readonly error?: string
}

interface TrailEntry {
  readonly round: number
  readonly accepted: boolean
  readonly selected: number | null
  readonly answer: string | null
  readonly margin: number | null
  readonly scores: Readonly<Record<string, number>>
  readonly reason: string
}

interface BudgetStop {
  readonly round: number
  readonly phase: "solvers" | "critics" | "judges"
  readonly needed: number
  readonly used: number
  readonly maxCalls: number
}

const cut = (text: string, max = 240): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/** The event saying a critique or judgement could not be read (its score then counts as described in evidence.ts). */
const parseError = (round: number, index: number, what: "critique" | "judgement", error: string, output: string) =>
  Architecture.progress("ensemble.parse_error", { round, index, what, error, text: preview(output) })

/** The Ensemble's program: its rounds over `input`, with the options decoded. */
export const program = (input: Architecture.Input, config: Config) => {
  const solverArchitecture = oneCall({ step: "ensemble.solve", n: config.n, request: config.request, instructionsLast: true })
  const solvers = config.solvers.map((solver) => ({
    name: solver.name,
    agent: Agent.clone(solver.agent ?? Architecture.plainAgent(solver.name), {
      name: solver.agent?.name ?? solver.name,
      instructions: solver.prompt ?? solver.agent!.instructions,
      architecture: solverArchitecture
    })
  }))
  const critic = Agent.clone(config.critic ?? Architecture.plainAgent("critic"), {
    architecture: oneCall({ step: "ensemble.critique", n: 1, request: config.request })
  })
  const judge = Agent.clone(config.judge ?? Architecture.plainAgent("judge"), {
    architecture: oneCall({ step: "ensemble.judge", n: 1, request: config.request })
  })
  const normalize = config.normalize
  const each = { concurrency: config.concurrency }

  return Effect.gen(function*() {
    const run = yield* Architecture.CurrentRun
    const reference = config.reference ?? (yield* Architecture.currentReference)
    const hasReference = reference !== undefined
    const callsBefore = run.modelCalls
    const used = () => run.modelCalls - callsBefore

    const candidates: Array<State> = []
    const byKey = new Map<string, State>()
    const trail: Array<TrailEntry> = []
    const failures: Array<Failure> = []
    let budgetStop: BudgetStop | undefined
    let externalStop: string | undefined
    let lastFailure: SubAgentFailed | undefined
    let decision: Decision | undefined
    // Whether the evidence changed since the last decision (a stop right after one needs no new decision).
    let changed = false
    let rounds = 0

    /** Whether a phase of `needed` calls fits in what is left of `maxCalls`; if not, records why it stopped. */
    const fits = (round: number, phase: BudgetStop["phase"], needed: number) =>
      Effect.suspend(() => {
        if (used() + needed <= config.maxCalls) return Effect.succeed(true)
        budgetStop = { round, phase, needed, used: used(), maxCalls: config.maxCalls }
        return Effect.as(Architecture.progress("ensemble.budget_exhausted", { ...budgetStop }), false)
      })

    /** The result of a role's run, or undefined after recording why there is none. */
    const settle = (round: number, role: string, sessionId: string, ran: Architecture.RoleResult) => {
      if (ran._tag === "Completed") return ran.result
      if (ran._tag === "Interrupted" && Architecture.isBudgetStop(ran.reason)) externalStop ??= ran.reason
      else {
        if (ran._tag === "Failed") lastFailure = ran.error
        failures.push({
          round,
          role,
          sessionId,
          reason: ran.reason,
          ...(ran._tag === "Failed" ? { error: `${ran.error.error._tag}: ${ran.error.error.message}` } : {})
        })
      }
      return undefined
    }

    const feedback = (): string =>
      candidates.length === 0 ? "" : [
        "\n\nEarlier answers that were not accepted:",
        ...candidates.map((c) =>
          `- ${c.answer} (given ${c.support} time${c.support > 1 ? "s" : ""}` +
          `${c.critique !== undefined && c.critique.notes !== "" ? `; a reviewer noted: ${cut(c.critique.notes)}` : ""})`
        ),
        "Check them critically and give the answer you find correct."
      ].join("\n")

    const decide = (round: number, final: "budget" | undefined) =>
      Effect.gen(function*() {
        const evidence: Evidence.Evidence = {
          round,
          maxRounds: config.maxRounds,
          candidates,
          acceptConfidence: config.acceptConfidence,
          acceptMargin: config.acceptMargin
        }
        let made = yield* Effect.try({
          try: () => config.policy(evidence),
          catch: (error) =>
            new ArchitectureFailed({ architecture: run.architecture, message: `the policy failed in round ${round}: ${String(error)}` })
        })
        const chosen = made.selected === undefined ? undefined : candidates.find((c) => c.index === made.selected)
        if (made.selected !== undefined && chosen === undefined) {
          return yield* new ArchitectureFailed({
            architecture: run.architecture,
            message: `the policy selected answer ${made.selected} in round ${round}, but the answers are 1..${candidates.length}`
          })
        }
        if (made.accept && chosen?.judgement === undefined) {
          made = { ...made, accept: false, reason: `${made.reason}; not accepted: the answer was never judged` }
        }
        if (made.accept && final === "budget") {
          made = { ...made, accept: false, reason: `${made.reason}; not accepted: calls ran out before the round's reviews` }
        }
        decision = made
        changed = false
        const entry: TrailEntry = {
          round,
          accepted: made.accept,
          selected: chosen?.index ?? null,
          answer: chosen?.answer ?? null,
          margin: made.margin ?? null,
          scores: made.scores ?? {},
          reason: made.reason
        }
        trail.push(entry)
        if (chosen !== undefined) yield* Architecture.setOutput(chosen.answer)
        yield* Architecture.progress("ensemble.decision", { ...entry })
        if (made.accept) yield* Architecture.progress("ensemble.accepted", { round, index: chosen!.index, answer: chosen!.answer })
        return made
      })

    const result = (accepted: boolean, interrupted: string | undefined): Architecture.Outcome => {
      const chosen = decision?.selected !== undefined
        ? candidates.find((c) => c.index === decision!.selected)
        : Evidence.bestSupported(candidates)
      const output = chosen?.answer ?? ""
      return {
        output,
        ...(interrupted !== undefined ? { interrupted } : {}),
        metadata: {
          accepted,
          answer: output,
          selected: chosen?.index ?? null,
          rounds,
          calls: used(),
          maxCalls: config.maxCalls,
          reference: reference ?? null,
          isCorrect: reference === undefined ? null : output !== "" && normalize(output) === normalize(reference),
          judgeIsCorrect: chosen?.judgement?.isCorrect ?? null,
          candidates: candidates.map((c) => ({
            index: c.index,
            answer: c.answer,
            key: c.key,
            support: c.support,
            firstRound: c.firstRound,
            supporters: c.supporters,
            critique: c.critique ?? null,
            judgement: c.judgement ?? null
          })),
          trail,
          failures,
          budgetExhausted: budgetStop ?? null
        }
      }
    }

    /** Ends the run early: the budget's pick, never accepted. */
    const stopEarly = (round: number, reason: string) =>
      Effect.map(changed ? decide(round, "budget") : Effect.void, () => result(false, reason))

    for (let round = 1; round <= config.maxRounds; round++) {
      // Solvers: one call each, all or none.
      if (!(yield* fits(round, "solvers", solvers.length))) return yield* stopEarly(round, "budget:max_calls")
      rounds = round
      yield* Architecture.progress("ensemble.round_started", { round, callsUsed: used() })
      const prompt = Architecture.fill(config.solverPrompt, { task: input.prompt, feedback: round === 1 ? "" : feedback() })
      const answered = yield* Effect.forEach(
        solvers,
        (solver) => Architecture.roleResult(solver.agent, prompt, { role: "solver", index: `${solver.name}_round_${round}` }),
        each
      )
      let solverFailures = 0
      for (let s = 0; s < solvers.length; s++) {
        const solver = solvers[s]!
        const sessionId = Agent.childSessionId(run.sessionId, "solver", `${solver.name}_round_${round}`)
        const done = settle(round, "solver", sessionId, answered[s]!)
        if (done === undefined) {
          solverFailures++
          continue
        }
        const completions = completionsOf(done.metadata, done.output)
        for (let choice = 0; choice < completions.length; choice++) {
          const text = completions[choice]!
          // Kept by hand: a phase's replies are all read here, after the phase (`roleResult` does not yield as
          // `role` does), and the completions after the first were never read by the runtime at all.
          yield* yieldBeforeReading(text)
          const answer = finalAnswer(text, "first") ?? lastNonEmptyLine(text)
          if (answer === undefined) continue
          const key = normalize(answer)
          if (key === "") continue
          let candidate = byKey.get(key)
          const isNew = candidate === undefined
          if (candidate === undefined) {
            candidate = {
              index: candidates.length + 1,
              answer,
              key,
              support: 0,
              firstRound: round,
              supporters: [],
              critique: undefined,
              judgement: undefined
            }
            candidates.push(candidate)
            byKey.set(key, candidate)
          }
          candidate.support++
          changed = true
          candidate.supporters.push({ round, solver: solver.name, choice })
          yield* Architecture.progress("ensemble.candidate", {
            round,
            solver: solver.name,
            choice,
            index: candidate.index,
            answer,
            support: candidate.support,
            isNew
          })
        }
      }
      if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
      if (candidates.length === 0 && solverFailures === solvers.length && lastFailure !== undefined) {
        return yield* lastFailure
      }
      if (candidates.length > 0) yield* Architecture.setOutput(Evidence.bestSupported(candidates)!.answer)

      // Critics: one per distinct answer without a critique.
      const toCritique = candidates.filter((c) => c.critique === undefined)
      if (toCritique.length > 0) {
        if (!(yield* fits(round, "critics", toCritique.length))) return yield* stopEarly(round, "budget:max_calls")
        const reviews = yield* Effect.forEach(
          toCritique,
          (c) =>
            Architecture.roleResult(critic, Architecture.fill(config.criticPrompt, { task: input.prompt, answer: c.answer }), {
              role: "critic",
              index: `${c.index}_round_${round}`
            }),
          each
        )
        for (let i = 0; i < toCritique.length; i++) {
          const c = toCritique[i]!
          const sessionId = Agent.childSessionId(run.sessionId, "critic", `${c.index}_round_${round}`)
          const done = settle(round, "critic", sessionId, reviews[i]!)
          if (done === undefined) continue
          // Kept by hand, as for the solvers: the phase's replies are read here, one after the other.
          yield* yieldBeforeReading(done.output)
          c.critique = { ...Evidence.parseCritique(done.output), round, sessionId }
          changed = true
          yield* Architecture.progress("ensemble.critique", {
            round,
            index: c.index,
            answer: c.answer,
            risk: c.critique.risk,
            notes: c.critique.notes,
            parsed: c.critique.parsed
          })
          if (c.critique.error !== undefined) yield* parseError(round, c.index, "critique", c.critique.error, done.output)
        }
        if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
      }

      // Judges: one per distinct answer without a judgement.
      const toJudge = candidates.filter((c) => c.judgement === undefined)
      if (toJudge.length > 0) {
        if (!(yield* fits(round, "judges", toJudge.length))) return yield* stopEarly(round, "budget:max_calls")
        const verdicts = yield* Effect.forEach(
          toJudge,
          (c) =>
            Architecture.roleResult(
              judge,
              Architecture.fill(config.judgePrompt, {
                task: input.prompt,
                answer: c.answer,
                support: String(c.support),
                risk: c.critique !== undefined ? String(c.critique.risk) : "unknown",
                critique: c.critique !== undefined && c.critique.notes !== "" ? cut(c.critique.notes, 1000) : "(no notes)",
                reference: hasReference ? `\nReference answer (decide is_correct against it): ${reference}\n` : ""
              }),
              { role: "judge", index: `${c.index}_round_${round}` }
            ),
          each
        )
        for (let i = 0; i < toJudge.length; i++) {
          const c = toJudge[i]!
          const sessionId = Agent.childSessionId(run.sessionId, "judge", `${c.index}_round_${round}`)
          const done = settle(round, "judge", sessionId, verdicts[i]!)
          if (done === undefined) continue
          // Kept by hand, as for the solvers: the phase's replies are read here, one after the other.
          yield* yieldBeforeReading(done.output)
          c.judgement = { ...Evidence.parseJudgement(done.output, hasReference), round, sessionId }
          changed = true
          yield* Architecture.progress("ensemble.judgement", {
            round,
            index: c.index,
            answer: c.answer,
            score: c.judgement.score,
            confidence: c.judgement.confidence,
            isCorrect: c.judgement.isCorrect,
            notes: c.judgement.notes,
            parsed: c.judgement.parsed
          })
          if (c.judgement.error !== undefined) yield* parseError(round, c.index, "judgement", c.judgement.error, done.output)
        }
        if (externalStop !== undefined) return yield* stopEarly(round, externalStop)
      }

      const made = yield* decide(round, undefined)
      if (made.accept) return result(true, undefined)
    }
    return result(false, undefined)
  })
}
