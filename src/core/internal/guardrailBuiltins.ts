/**
 * The built-in guardrails (`Guardrail.maxLength`, `redact`, `schema`, `judge`): size limits, a regular-expression and
 * PII redactor (emails, card numbers that pass the Luhn check, API keys), the output's schema, and a check a model
 * judges. Each is a plain `Guardrail`; none holds state between checks.
 */
import { Effect, Layer, Option, Result, Schema } from "effect"
import * as Model from "../Model.js"
import type { Guardrail, Subject, Verdict } from "./guardrail.js"
import { pass } from "./guardrail.js"
import * as Output from "./output.js"
import * as Runtime from "./runtime.js"

/** Options of `maxLength`. */
export interface MaxLengthOptions {
  /** The most characters the text may have. */
  readonly maxChars: number
  readonly name?: string | undefined
}

/** Trips when the text is longer than `maxChars` characters. */
export const maxLength = (options: MaxLengthOptions): Guardrail => {
  const max = options.maxChars
  return {
    name: options.name ?? "max_length",
    check: (subject) =>
      Effect.succeed(
        subject.text.length <= max
          ? pass
          : { _tag: "Trip", reason: `${subject.text.length} characters, over the limit of ${max}` }
      )
  }
}

/** The kinds of personal data and secrets `redact` knows. */
export type Pii = "email" | "card" | "key"

/** Options of `redact`. */
export interface RedactOptions {
  /** Which built-in patterns to look for; all three by default, none with `[]`. */
  readonly pii?: ReadonlyArray<Pii> | undefined
  /** More patterns, by the label their matches are replaced with (`{ ticket: /TCK-\d+/ }`). */
  readonly patterns?: Readonly<Record<string, RegExp | string>> | undefined
  /** `redact` (the default) rewrites each match to `[redacted <label>]`; `trip` trips naming what was found. */
  readonly mode?: "redact" | "trip" | undefined
  readonly name?: string | undefined
}

// Emails: a local part, an @, a domain with a dot; kept simple on purpose (a redactor errs towards redacting). The
// lengths are bounded (RFC 5321: 64 for the local part, 63 per label): unbounded, a long run of letters with no @
// made every start position rescan to the end (quadratic: 200,000 characters blocked the event loop ~50 s).
const emailPattern = /[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,63}/g
// 13 to 19 digits, optionally grouped by single spaces or dashes; only those that pass the Luhn check are cards.
const cardCandidate = /\b\d(?:[ -]?\d){12,18}\b/g
// Well-known key shapes: OpenAI / Anthropic-style `sk-…`, AWS access key ids, GitHub tokens, Slack tokens, Google
// API keys, and `Bearer` tokens.
const keyPattern = new RegExp(
  [
    String.raw`\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}`,
    String.raw`\bAKIA[0-9A-Z]{16}\b`,
    String.raw`\bgh[pousr]_[A-Za-z0-9]{36,}\b`,
    String.raw`\bxox[abprs]-[A-Za-z0-9-]{10,}`,
    String.raw`\bAIza[0-9A-Za-z_-]{35}`,
    String.raw`\bBearer\s+[A-Za-z0-9._~+/-]{20,}=*`
  ].join("|"),
  "g"
)

/** Whether a string of digits passes the Luhn check (card numbers do; most other long numbers do not). */
export const luhn = (digits: string): boolean => {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48
    if (double) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
    double = !double
  }
  return sum % 10 === 0
}

interface Finder {
  readonly label: string
  readonly replace: (text: string, found: Array<string>) => string
}

const regexFinder = (label: string, pattern: RegExp): Finder => {
  const global = pattern.global ? pattern : new RegExp(pattern.source, pattern.flags + "g")
  return {
    label,
    replace: (text, found) =>
      text.replace(global, (match) => {
        if (match === "") return match
        found.push(label)
        return `[redacted ${label}]`
      })
  }
}

const cardFinder: Finder = {
  label: "card",
  replace: (text, found) =>
    text.replace(cardCandidate, (match) => {
      const digits = match.replace(/[ -]/g, "")
      if (!luhn(digits)) return match
      found.push("card")
      return "[redacted card]"
    })
}

/**
 * Rewrites (or trips on) personal data and secrets: emails, card numbers (Luhn-checked), API keys, and the patterns
 * given. On an input — already on its way to the model — a rewrite is a trip.
 */
export const redact = (options: RedactOptions = {}): Guardrail => {
  const pii = options.pii ?? ["email", "card", "key"]
  const finders: Array<Finder> = []
  // Keys first: a key may hold digits a card pattern would take, or an @.
  if (pii.includes("key")) finders.push(regexFinder("key", keyPattern))
  if (pii.includes("email")) finders.push(regexFinder("email", emailPattern))
  if (pii.includes("card")) finders.push(cardFinder)
  for (const [label, pattern] of Object.entries(options.patterns ?? {})) {
    finders.push(regexFinder(label, typeof pattern === "string" ? new RegExp(pattern, "g") : pattern))
  }
  const trip = options.mode === "trip"
  return {
    name: options.name ?? "redact",
    check: (subject) =>
      Effect.sync((): Verdict => {
        const found: Array<string> = []
        let text = subject.text
        for (const finder of finders) text = finder.replace(text, found)
        if (found.length === 0) return pass
        const reason = `found ${summarize(found)}`
        return trip ? { _tag: "Trip", reason } : { _tag: "Rewrite", text, reason }
      })
  }
}

/** `["email", "email", "card"]` as `2 emails, 1 card`: what was found, never the values. */
const summarize = (found: ReadonlyArray<string>): string => {
  const counts = new Map<string, number>()
  for (const label of found) counts.set(label, (counts.get(label) ?? 0) + 1)
  return [...counts].map(([label, n]) => `${n} ${label}${n === 1 ? "" : "s"}`).join(", ")
}

/** Options of `schema`. */
export interface SchemaOptions {
  readonly name?: string | undefined
}

/** Trips when the text is not a JSON value the schema decodes (the reason names the field and the rule). */
export const schema = <A, I>(codec: Schema.Codec<A, I>, options: SchemaOptions = {}): Guardrail => {
  const spec = Output.make(codec, 0)
  return {
    name: options.name ?? "schema",
    check: (subject) =>
      Effect.sync((): Verdict => {
        const decoded = spec.decode(subject.text)
        return Result.isSuccess(decoded) ? pass : { _tag: "Trip", reason: decoded.failure }
      })
  }
}

/** Options of `judge`. */
export interface JudgeOptions {
  /** The rule the text must keep, in words (`"The answer gives no medical advice."`). */
  readonly criteria: string
  /**
   * The model that judges: a client, or a `Model` layer (provided to each check: a `ScriptedModel` layer starts from
   * its first reply at every check); by default the run's (the `Model` in context where the check runs).
   */
  readonly model?: Model.Service | Layer.Layer<Model.Model> | undefined
  readonly name?: string | undefined
}

/** What the judge answers. */
export const JudgeVerdict = Schema.Struct({ pass: Schema.Boolean, reason: Schema.String })

const judgeSpec = Output.make(JudgeVerdict, 0)

/** The request a judge sends about `subject`. */
export const judgeRequest = (criteria: string, subject: Subject): Model.Request => ({
  messages: [
    Model.system(
      "You check a text against a rule. Reply with only a JSON object " +
        `{"pass": true|false, "reason": "<one sentence>"}: pass is false when the text breaks the rule.`
    ),
    Model.user(`Rule: ${criteria}\n\nThe text (${describeSubject(subject)}):\n<<<\n${subject.text}\n>>>`)
  ],
  responseFormat: judgeSpec.responseFormat,
  temperature: 0
})

const describeSubject = (subject: Subject): string =>
  subject.kind === "tool" && subject.tool !== undefined
    ? `the ${subject.tool.phase} of a call of the tool ${subject.tool.name}`
    : subject.kind === "input" ? "a request to an assistant" : "an assistant's answer"

/** The judge's answer could not be read as a verdict: the guardrail fails (no pass). */
export class JudgeUnreadable extends Schema.TaggedError<JudgeUnreadable>()("JudgeUnreadable", {
  answer: Schema.String,
  error: Schema.String
}) {
  override get message(): string {
    return `the judge's answer is not a verdict (${this.error}): ${JSON.stringify(this.answer.slice(0, 200))}`
  }
}

/**
 * Asks a model whether the text keeps `criteria`; its answer is decoded with `JudgeVerdict`. Within a run the call is
 * the run's (counted, held to its budget, silent); the model is the one given, else the run's.
 */
export const judge = (options: JudgeOptions): Guardrail => {
  const name = options.name ?? "judge"
  return {
    name,
    check: (subject) =>
      Effect.gen(function*() {
        const request = judgeRequest(options.criteria, subject)
        const run = yield* Effect.serviceOption(Runtime.CurrentRun)
        let call: Effect.Effect<Model.Response, unknown, Model.Model>
        if (run._tag === "Some") {
          const state = Runtime.stateOf(run.value)
          call = Runtime.generateAside(state, request, `guardrail.${name}_${state.ownCalls + 1}`)
        } else {
          call = Model.Model.use((model) => model.generate(request))
        }
        const given = options.model
        let response: Model.Response
        if (given !== undefined && Layer.isLayer(given)) {
          response = yield* Effect.provide(call, given as Layer.Layer<Model.Model>)
        } else {
          const model = given !== undefined ? Option.some(given as Model.Service) : yield* Effect.serviceOption(Model.Model)
          if (model._tag === "None") return yield* Effect.fail(new Error("no model to judge with: give one, or run where a Model is provided"))
          response = yield* Effect.provideService(call, Model.Model, model.value)
        }
        const answer = response.choices[0]?.text ?? ""
        const decoded = judgeSpec.decode(answer)
        if (Result.isFailure(decoded)) return yield* Effect.fail(new JudgeUnreadable({ answer, error: decoded.failure }))
        const verdict = decoded.success as typeof JudgeVerdict.Type
        return verdict.pass ? pass : { _tag: "Trip", reason: verdict.reason } satisfies Verdict
      })
  }
}
