/**
 * Who decides, in `valet run`, the tool calls that wait for a person (a `valet.yaml` agent's `approvals:`): on a
 * terminal, the person at it (y/n, and a reason when rejecting); otherwise `--approve all|none`; with neither, every
 * such call is rejected with a reason saying to pass `--approve` (nobody could approve it). The run gets a
 * `HumanLoop`, and a fiber beside it takes each waiting call (`awaitPending`) and decides it.
 */
import { Effect, Terminal } from "effect"
import * as HumanLoop from "../../core/HumanLoop.js"

/** How to ask a person: where the questions go (stderr: stdout is the answer) and how a line is read. */
export interface Prompter {
  readonly write: (text: string) => Effect.Effect<void>
  readonly readLine: Effect.Effect<string, Terminal.QuitError>
}

/** Who decides: a person on the terminal, `--approve all`, `--approve none`, or nobody. */
export type Decider =
  | { readonly _tag: "Ask"; readonly prompter: Prompter }
  | { readonly _tag: "All" }
  | { readonly _tag: "None" }
  | { readonly _tag: "Nobody"; readonly note: (text: string) => Effect.Effect<void> }

/** The reason the model reads under `--approve none`. */
export const noneReason = "rejected by --approve none"

/** The reason the model reads when nobody could decide. */
export const nobodyReason = "nobody could approve it: valet run had no terminal to ask on; pass --approve all or --approve none"

/** `--approve` when given; else the terminal when stdin is one; else nobody. */
export const deciderOf = (
  approve: "all" | "none" | undefined,
  stdinIsTerminal: boolean,
  prompter: Prompter,
  note: (text: string) => Effect.Effect<void>
): Decider =>
  approve === "all"
    ? { _tag: "All" }
    : approve === "none"
    ? { _tag: "None" }
    : stdinIsTerminal
    ? { _tag: "Ask", prompter }
    : { _tag: "Nobody", note }

/** The prompter of the process: questions on stderr, answers read from the `Terminal` (stdin). */
export const terminalPrompter: Effect.Effect<Prompter, never, Terminal.Terminal> = Effect.gen(function*() {
  const terminal = yield* Terminal.Terminal
  return {
    write: (text) => Effect.sync(() => void process.stderr.write(text)),
    readLine: terminal.readLine
  }
})

/** The arguments of a request as one line (the model's JSON, compacted when it parses). */
const argumentsLine = (text: string): string => {
  try {
    return JSON.stringify(JSON.parse(text))
  } catch {
    return text
  }
}

/**
 * Asks the person about `request`: `y` / `yes` approves, `n` / `no` rejects (then an optional reason), anything else
 * asks again; input that ends (Ctrl+D) rejects.
 */
export const ask = (request: HumanLoop.ApprovalRequest, prompter: Prompter): Effect.Effect<HumanLoop.Decision> =>
  Effect.gen(function*() {
    yield* prompter.write(`The tool ${request.name} wants to run with ${argumentsLine(request.arguments)}\n`)
    for (;;) {
      yield* prompter.write("Approve? [y/n] ")
      const answer = (yield* prompter.readLine).trim().toLowerCase()
      if (answer === "y" || answer === "yes") return { approved: true }
      if (answer === "n" || answer === "no") {
        yield* prompter.write("Reason (optional): ")
        const reason = (yield* prompter.readLine).trim()
        return { approved: false, reason: reason === "" ? "rejected on the terminal" : reason }
      }
      yield* prompter.write("Please answer y or n.\n")
    }
  }).pipe(Effect.catchTag("QuitError", () => Effect.succeed({ approved: false, reason: "no answer on the terminal (its input ended)" })))

/** The decision of `decider` on `request`. */
export const decisionOf = (decider: Decider, request: HumanLoop.ApprovalRequest): Effect.Effect<HumanLoop.Decision> => {
  switch (decider._tag) {
    case "All":
      return Effect.succeed({ approved: true })
    case "None":
      return Effect.succeed({ approved: false, reason: noneReason })
    case "Ask":
      return ask(request, decider.prompter)
    case "Nobody":
      return Effect.as(
        decider.note(`valet run: rejected a call of ${request.name}: stdin is not a terminal; pass --approve all or --approve none`),
        { approved: false, reason: nobodyReason }
      )
  }
}

/**
 * Decides every call that waits, one at a time, oldest first, forever (interrupted when the run ends). A call that
 * stopped waiting meanwhile (its `approvalTimeout` passed while the person thought) is left alone.
 */
export const decideEach = (decider: Decider): Effect.Effect<never, never, HumanLoop.HumanLoop> =>
  Effect.forever(
    Effect.gen(function*() {
      const [request] = yield* HumanLoop.awaitPending(1)
      const decision = yield* decisionOf(decider, request!)
      yield* HumanLoop.decide(request!.toolCallId, decision, { sessionId: request!.sessionId }).pipe(
        Effect.catch(() => Effect.void)
      )
    })
  )

/** Why a question was not answered when nobody on a terminal could. */
export const noAnswerReason = "nobody could answer it: valet run had no terminal to ask on"

/**
 * Answers every question that waits (`Architecture.ask`, the `ask_human` tool), oldest first: on a terminal, the
 * person types the answer (one that does not fit the question's schema is said, and asked again; input that ends
 * dismisses it); otherwise it is dismissed (`--approve` decides calls, not questions), and the run reads why.
 */
export const answerEach = (decider: Decider): Effect.Effect<never, never, HumanLoop.HumanLoop> =>
  Effect.forever(
    Effect.gen(function*() {
      const [question] = yield* HumanLoop.awaitQuestions(1)
      const at = { sessionId: question!.sessionId }
      if (decider._tag !== "Ask") {
        if (decider._tag === "Nobody") yield* decider.note(`valet run: a question went unanswered: stdin is not a terminal`)
        yield* Effect.ignore(HumanLoop.dismiss(question!.questionId, noAnswerReason, at))
        return
      }
      const prompter = decider.prompter
      yield* prompter.write(`Question: ${question!.question}\n`)
      for (;;) {
        yield* prompter.write("Answer: ")
        const line = yield* Effect.result(prompter.readLine)
        if (line._tag === "Failure") {
          yield* Effect.ignore(HumanLoop.dismiss(question!.questionId, "no answer on the terminal (its input ended)", at))
          return
        }
        const given = yield* Effect.result(HumanLoop.answer(question!.questionId, line.success.trim(), at))
        if (given._tag === "Success" || given.failure._tag !== "InvalidDecision") return
        yield* prompter.write(`${given.failure.message}\n`)
      }
    })
  )

/** `run` with a `HumanLoop`, its waiting calls decided and its questions answered by `decider` as long as it runs. */
export const withDecider = <A, E, R>(
  decider: Decider,
  run: Effect.Effect<A, E, R>
): Effect.Effect<A, E, Exclude<R, HumanLoop.HumanLoop>> =>
  Effect.scoped(Effect.gen(function*() {
    yield* Effect.forkScoped(decideEach(decider))
    yield* Effect.forkScoped(answerEach(decider))
    return yield* run
  })).pipe(Effect.provide(HumanLoop.layer)) as Effect.Effect<A, E, Exclude<R, HumanLoop.HumanLoop>>
