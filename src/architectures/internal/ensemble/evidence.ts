/**
 * What the Ensemble knows about its candidate answers — support, critiques, judgements — and how it decides: the
 * parsers of the critic's and the judge's replies, and the default policy.
 */
import { Result, Schema } from "effect"
import { decodeJson, parseScore, unitScore } from "../../../core/internal/parse.js"

// ---------------------------------------------------------------------------------------------------------
// Critiques and judgements
// ---------------------------------------------------------------------------------------------------------

/** How a reply was read: as JSON, or not at all (the documented fallback values apply). */
export type Parsed = "json" | "none"

/** A critic's verdict on one answer. */
export interface Critique {
  /** The estimated chance the answer is wrong, in [0, 1]. */
  readonly risk: number
  readonly notes: string
  readonly parsed: Parsed
  /** Why the risk could not be read (a fallback value stands in); absent when it was. */
  readonly error?: string | undefined
}

/** A judge's verdict on one answer. */
export interface Judgement {
  readonly score: number
  readonly confidence: number
  /** The judge's verdict against the reference; null without a reference. */
  readonly isCorrect: boolean | null
  readonly notes: string
  readonly parsed: Parsed
  /** Why the score or the confidence could not be read (each is then 0); absent when both were. */
  readonly error?: string | undefined
}

// Checked by `unitScore`: a number in [0, 1], or a string such as "0.7", "7/10" or "70%".
const Probability = Schema.Union([Schema.Number, Schema.String])
const Notes = Schema.NullOr(Schema.Union([Schema.String, Schema.Array(Schema.Unknown)]))

const CritiqueJson = Schema.Struct({ risk: Schema.optional(Schema.NullOr(Probability)), notes: Schema.optional(Notes) })

const Verdict = Schema.Union([Schema.Boolean, Schema.Literals(["true", "false", "yes", "no", "correct", "incorrect"])])
const JudgementJson = Schema.Struct({
  score: Schema.optional(Schema.NullOr(Probability)),
  confidence: Schema.optional(Schema.NullOr(Probability)),
  is_correct: Schema.optional(Schema.NullOr(Verdict)),
  notes: Schema.optional(Notes)
})

const notesText = (notes: typeof Notes.Type | undefined): string =>
  notes === undefined || notes === null
    ? ""
    : typeof notes === "string"
    ? notes.trim()
    : notes.map((note) => (typeof note === "string" ? note : JSON.stringify(note))).join("; ")

/** The risk a critique gets when the critic's reply is not JSON. */
export const unparsedRisk = 0.6
/** The risk a critique gets when its JSON has no `risk`. */
export const missingRisk = 0.5

/**
 * Reads a critic's reply: JSON `{risk, notes}` (in code fences or among prose too). Not JSON → risk 0.6 with the
 * text as notes; no `risk` → 0.5; a risk that is not in [0, 1] (never clamped) → 0.6. Each fallback sets `error`
 * to why. Reads a bounded part of the reply in linear time (see `core/internal/parse.ts`).
 */
export const parseCritique = (text: string): Critique => {
  const json = decodeJson(CritiqueJson, text, { expect: "object" })
  if (Result.isFailure(json)) return { risk: unparsedRisk, notes: text.trim(), parsed: "none", error: json.failure }
  const { notes, risk } = json.success
  const checked = unitScore(risk, "risk")
  if (Result.isSuccess(checked)) return { risk: checked.success, notes: notesText(notes), parsed: "json" }
  const missing = risk === undefined || risk === null
  return { risk: missing ? missingRisk : unparsedRisk, notes: notesText(notes), parsed: "json", error: checked.failure }
}

/**
 * Reads a judge's reply: JSON `{score, confidence, is_correct, notes}` (fences and prose tolerated). Not JSON →
 * confidence 0 and the score of a `score: 0.8` pattern in the text, else 0. A score or confidence that is missing
 * or not in [0, 1] (never clamped: `7` is another scale, not 1) is 0, and `error` says why. `is_correct` is kept
 * only when the judge was given a reference (`hasReference`), else null. Reads a bounded part of the reply in
 * linear time.
 */
export const parseJudgement = (text: string, hasReference: boolean): Judgement => {
  const json = decodeJson(JudgementJson, text, { expect: "object" })
  if (Result.isFailure(json)) {
    const score = parseScore(text)
    return {
      score: Result.isSuccess(score) ? score.success : 0,
      confidence: 0,
      isCorrect: null,
      notes: text.trim(),
      parsed: "none",
      error: json.failure
    }
  }
  const { confidence, is_correct, notes, score } = json.success
  const verdict = is_correct === undefined || is_correct === null
    ? null
    : typeof is_correct === "boolean"
    ? is_correct
    : is_correct === "true" || is_correct === "yes" || is_correct === "correct"
  const checkedScore = unitScore(score, "score")
  const checkedConfidence = unitScore(confidence, "confidence")
  const errors = [checkedScore, checkedConfidence].flatMap((checked) => (Result.isFailure(checked) ? [checked.failure] : []))
  return {
    score: Result.isSuccess(checkedScore) ? checkedScore.success : 0,
    confidence: Result.isSuccess(checkedConfidence) ? checkedConfidence.success : 0,
    isCorrect: hasReference ? verdict : null,
    notes: notesText(notes),
    parsed: "json",
    ...(errors.length > 0 ? { error: errors.join("; ") } : {})
  }
}

// ---------------------------------------------------------------------------------------------------------
// Evidence and decisions
// ---------------------------------------------------------------------------------------------------------

/** One distinct answer (solvers' answers pooled by their normalized form) and what is known about it. */
export interface Candidate {
  /** The distinct answer's number, from 1, in order of first appearance; names its critic and judge sessions. */
  readonly index: number
  /** The answer as a solver first wrote it. */
  readonly answer: string
  /** The normalized answer: what pools candidates. */
  readonly key: string
  /** How many solver completions gave it, all rounds so far. */
  readonly support: number
  /** The round it first appeared in. */
  readonly firstRound: number
  readonly critique: Critique | undefined
  readonly judgement: Judgement | undefined
}

/** What a policy decides from: every distinct answer so far with its evidence, and the thresholds. */
export interface Evidence {
  readonly round: number
  readonly maxRounds: number
  readonly candidates: ReadonlyArray<Candidate>
  readonly acceptConfidence: number
  readonly acceptMargin: number
}

/**
 * A policy's decision: accept `selected` (a candidate's `index`) or go on with it as the best so far. The
 * Ensemble refuses to accept an answer that was never judged, whatever a policy says.
 */
export interface Decision {
  readonly accept: boolean
  readonly selected: number | undefined
  /** The policy's score per candidate index, for the decision trail. */
  readonly scores?: Readonly<Record<string, number>>
  readonly margin?: number | undefined
  readonly reason: string
}

/** A replaceable decision rule: a function of the round's evidence. */
export type Policy = (evidence: Evidence) => Decision

/** The default policy's score of a judged answer: `0.75·confidence + 0.25·score − 0.5·risk`. */
export const defaultScore = (candidate: Candidate): number =>
  0.75 * (candidate.judgement?.confidence ?? 0) + 0.25 * (candidate.judgement?.score ?? 0) -
  0.5 * (candidate.critique?.risk ?? missingRisk)

/** The best-supported, lowest-risk answer (earliest first on ties): the pick when nothing can be judged. */
export const bestSupported = (candidates: ReadonlyArray<Candidate>): Candidate | undefined => {
  let best: Candidate | undefined
  for (const candidate of candidates) {
    if (
      best === undefined ||
      candidate.support > best.support ||
      (candidate.support === best.support &&
        (candidate.critique?.risk ?? missingRisk) < (best.critique?.risk ?? missingRisk))
    ) best = candidate
  }
  return best
}

const round3 = (n: number): number => Math.round(n * 1000) / 1000

/**
 * The default policy (DESIGN §5.1): the best judged answer by `defaultScore` (ties: more support, then the
 * earlier answer); the margin over the runner-up, or the best's score + 1 when there is one distinct answer;
 * accept when the best's confidence ≥ `acceptConfidence` and the margin ≥ `acceptMargin`. A competing answer
 * that was never judged leaves the margin unknown: not accepted.
 */
export const defaultPolicy: Policy = (evidence) => {
  const judged = evidence.candidates.filter((candidate) => candidate.judgement !== undefined)
  if (judged.length === 0) {
    return { accept: false, selected: bestSupported(evidence.candidates)?.index, reason: "no answer has been judged" }
  }
  const scores: Record<string, number> = {}
  for (const candidate of judged) scores[candidate.index] = round3(defaultScore(candidate))
  const ranked = [...judged].sort((a, b) =>
    scores[b.index]! - scores[a.index]! || b.support - a.support || a.index - b.index
  )
  const best = ranked[0]!
  const bestScore = scores[best.index]!
  const unjudged = evidence.candidates.length - judged.length
  const margin = ranked.length > 1
    ? round3(bestScore - scores[ranked[1]!.index]!)
    : unjudged > 0
    ? undefined
    : round3(bestScore + 1)
  const confidence = best.judgement!.confidence
  const confident = confidence >= evidence.acceptConfidence
  const clear = margin !== undefined && margin >= evidence.acceptMargin
  const reason = confident && clear
    ? `answer ${best.index} has confidence ${confidence} ≥ ${evidence.acceptConfidence} and margin ${margin} ≥ ${evidence.acceptMargin}`
    : !confident
    ? `the best answer (${best.index}) has confidence ${confidence} < ${evidence.acceptConfidence}`
    : margin === undefined
    ? `${unjudged} competing answer${unjudged > 1 ? "s were" : " was"} not judged`
    : `the margin ${margin} of answer ${best.index} is below ${evidence.acceptMargin}`
  return { accept: confident && clear, selected: best.index, scores, margin, reason }
}
