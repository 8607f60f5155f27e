/**
 * Guardrails (`Guardrail`): what one is, how a run's are put together (the agent's and the run's), and how a list of
 * them checks one text — in order, each seeing the text as the one before left it (a redactor rewrites), a trip
 * stopping the list, a guardrail's own failure becoming `GuardrailFailed`. The runtime decides what a trip does.
 */
import { Cause, Effect } from "effect"
import { GuardrailFailed } from "../AgentError.js"
import * as Spans from "./spans.js"

/** Where a guardrail runs: on the run's input, its final answer, or a tool call (its arguments and its result). */
export type Kind = "input" | "output" | "tool"

/** What a guardrail says of a text: it passes, it trips (with a reason), or it is rewritten (a redactor). */
export type Verdict =
  | { readonly _tag: "Pass" }
  | { readonly _tag: "Trip"; readonly reason: string }
  | { readonly _tag: "Rewrite"; readonly text: string; readonly reason: string }

/** The tool call a tool guardrail checks, and which side of it. */
export interface ToolSubject {
  readonly name: string
  readonly toolCallId: string
  readonly phase: "arguments" | "result"
}

/** What a guardrail is asked to check. */
export interface Subject {
  readonly kind: Kind
  /** The text: the prompt (input), the answer (output), the call's arguments or result (tool). */
  readonly text: string
  readonly sessionId: string
  readonly agent: string
  /** Set for tool guardrails. */
  readonly tool?: ToolSubject | undefined
}

/** A guardrail: a name (in events and errors) and its check. A check that fails is the run's `GuardrailFailed`. */
export interface Guardrail {
  readonly name: string
  readonly check: (subject: Subject) => Effect.Effect<Verdict, unknown>
}

/** A run's guardrails by kind, and what a trip does where there is a choice. */
export interface Guardrails {
  readonly input?: ReadonlyArray<Guardrail> | undefined
  readonly output?: ReadonlyArray<Guardrail> | undefined
  readonly tool?: ReadonlyArray<Guardrail> | undefined
  /** An output trip fails the run (`fail`, the default) or asks the model once more, showing it the reason (`repair`). */
  readonly onOutputTrip?: "fail" | "repair" | undefined
  /** A tool trip becomes the call's error result, read by the model (`error`, the default), or fails the run (`fail`). */
  readonly onToolTrip?: "error" | "fail" | undefined
}

/** The verdicts every check can share (no allocation per pass). */
export const pass: Verdict = { _tag: "Pass" }

const none: ReadonlyArray<Guardrail> = []

/**
 * The agent's guardrails and the run's together (the agent's first); `undefined` when there are none at all, so a
 * run without guardrails carries nothing and its steps check one field. The run's options win over the agent's.
 */
export const merge = (agent: Guardrails | undefined, run: Guardrails | undefined): Guardrails | undefined => {
  if (agent === undefined || run === undefined) return nonEmpty(agent ?? run)
  return nonEmpty({
    input: [...(agent.input ?? none), ...(run.input ?? none)],
    output: [...(agent.output ?? none), ...(run.output ?? none)],
    tool: [...(agent.tool ?? none), ...(run.tool ?? none)],
    onOutputTrip: run.onOutputTrip ?? agent.onOutputTrip,
    onToolTrip: run.onToolTrip ?? agent.onToolTrip
  })
}

const nonEmpty = (guardrails: Guardrails | undefined): Guardrails | undefined =>
  guardrails === undefined ||
    ((guardrails.input?.length ?? 0) === 0 && (guardrails.output?.length ?? 0) === 0 && (guardrails.tool?.length ?? 0) === 0)
    ? undefined
    : guardrails

/** What a list of guardrails made of a text: the text (rewritten or not) and the trip that stopped it, if any. */
export interface Checked {
  readonly text: string
  readonly tripped?: { readonly guardrail: string; readonly reason: string } | undefined
}

/** A trip or a rewrite, for the runtime's `GuardrailTripped` event. */
export interface Report {
  readonly guardrail: string
  readonly reason: string
  readonly rewritten: boolean
}

/**
 * What a verdict on `text` comes to: a pass (a rewrite to the same text is one), a trip (a rewrite of an input is one:
 * the prompt is already on its way), or a rewrite. The runtime acts on it; a guardrail's span says it.
 */
export const outcomeOf = (verdict: Verdict, kind: Kind, text: string): { readonly outcome: Spans.GuardrailOutcome; readonly reason?: string } => {
  switch (verdict._tag) {
    case "Pass":
      return { outcome: "pass" }
    case "Trip":
      return { outcome: "trip", reason: verdict.reason }
    case "Rewrite":
      return verdict.text === text
        ? { outcome: "pass" }
        : { outcome: kind === "input" ? "trip" : "rewrite", reason: verdict.reason }
  }
}

/**
 * Runs `guardrails` over `subject.text` in order. A rewrite goes on with the new text (and is reported); a trip stops
 * the list (reported). A guardrail that fails — or dies: a check that throws — fails with `GuardrailFailed`; an
 * interruption stays one. With `traced` (a tracer is installed), each check is a `guardrail <name>` span.
 */
export const check = (
  guardrails: ReadonlyArray<Guardrail>,
  subject: Subject,
  report: (report: Report) => Effect.Effect<void>,
  traced = false
): Effect.Effect<Checked, GuardrailFailed> => {
  const step = (index: number, text: string): Effect.Effect<Checked, GuardrailFailed> => {
    if (index >= guardrails.length) return Effect.succeed({ text })
    const guardrail = guardrails[index]!
    const current = text === subject.text ? subject : { ...subject, text }
    const raw = Effect.suspend(() => guardrail.check(current))
    const spanned = traced
      ? Spans.guardrailCheck(
        { guardrail: guardrail.name, kind: subject.kind, sessionId: subject.sessionId, tool: subject.tool },
        raw,
        (verdict) => outcomeOf(verdict, subject.kind, text)
      )
      : raw
    const checked = spanned.pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.fail(
            new GuardrailFailed({ sessionId: subject.sessionId, guardrail: guardrail.name, kind: subject.kind, error: describe(cause) })
          ))
    )
    return Effect.flatMap(checked, (verdict): Effect.Effect<Checked, GuardrailFailed> => {
      switch (verdict._tag) {
        case "Pass":
          return step(index + 1, text)
        case "Trip":
          return Effect.as(
            report({ guardrail: guardrail.name, reason: verdict.reason, rewritten: false }),
            { text, tripped: { guardrail: guardrail.name, reason: verdict.reason } }
          )
        case "Rewrite":
          // The input is already on its way to the model (input guardrails run beside the first call): what a
          // redactor would rewrite there is a trip.
          if (subject.kind === "input" && verdict.text !== text) {
            return Effect.as(
              report({ guardrail: guardrail.name, reason: verdict.reason, rewritten: false }),
              { text, tripped: { guardrail: guardrail.name, reason: verdict.reason } }
            )
          }
          return verdict.text === text
            ? step(index + 1, text)
            : Effect.andThen(
              report({ guardrail: guardrail.name, reason: verdict.reason, rewritten: true }),
              Effect.suspend(() => step(index + 1, verdict.text))
            )
      }
    })
  }
  return step(0, subject.text)
}

/** A guardrail's failure as one line: its error's message (a tagged error's tag too), else the cause's text. */
const describe = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  if (error instanceof Error) {
    const tag = (error as { readonly _tag?: unknown })._tag
    return typeof tag === "string" && tag !== error.message ? `${tag}: ${error.message}` : error.message
  }
  return typeof error === "string" ? error : String(error)
}
