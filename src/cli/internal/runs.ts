/**
 * `valet runs …`: what waits for a person in a run, and the person's part — of a `valet serve` (`--url`, default the
 * one `valet serve` listens on, its token `--token` or `VALET_TOKEN`; through `RunsClient`) or of a durable store
 * (`--store`: a SQLite file or a postgres:// URL; through `Durable.decide` / `answer`, from this process, while the
 * run's process is up or not: it resumes the run when it serves it).
 *
 * - `valet runs pending <runId>`: the calls and questions that wait, one line each.
 * - `valet runs decide <runId> <callId> --approve|--reject [--reason r]`: decides a call.
 * - `valet runs answer <runId> <questionId> <answer> [--json]`: answers a question (the answer as text, or JSON).
 *
 * Every refusal is one line saying what and the status: no such run or nothing waiting with that id (404), decided
 * already (409), a bad decision or answer (400), the wrong token (401), a server or store that cannot be reached.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Config, Effect, type Layer, Option } from "effect"
import { existsSync } from "node:fs"
import { Argument, Command, Flag } from "effect/cli"
import type { WorkflowEngine } from "effect/workflow"
import type * as HumanLoop from "../../core/HumanLoop.js"
import * as Durable from "../../rollouts/Durable.js"
import * as RunsClient from "../../serve/RunsClient.js"
import { describeStore, storeFailureAsError, storeOf } from "./durable.js"
import { CommandFailed } from "./failure.js"

/** Where `valet serve` listens by default (`server:`'s defaults). */
export const defaultUrl = "http://127.0.0.1:8787"

/** Where the run is: a server, or a durable store. */
export type Target =
  | { readonly _tag: "Server"; readonly url: string; readonly token: string | undefined }
  | { readonly _tag: "Store"; readonly store: string }

/** What a refusal says, on one line (the status first, then the message). */
export const describeDecideError = (error: { readonly _tag: string; readonly message: string }, where: string): string => {
  switch (error._tag) {
    case "RunNotFound":
    case "NotWaiting":
      return `404: ${error.message}`
    case "AlreadyDecided":
      return `409: ${error.message}`
    case "InvalidDecision":
    case "BadRequest":
      return `400: ${error.message}`
    case "Unauthorized":
      return `401: ${where} refused the token (pass --token, or set VALET_TOKEN)`
    case "HttpClientError":
      return `cannot reach ${where}: ${error.message}`
    default:
      return error.message
  }
}

/** What waits, one line each. */
export interface Waiting {
  readonly pending: ReadonlyArray<HumanLoop.ApprovalRequest>
  readonly questions: ReadonlyArray<HumanLoop.QuestionRequest>
}

/** The lines `valet runs pending` prints. */
export const waitingLines = (waiting: Waiting): ReadonlyArray<string> => [
  ...waiting.pending.map((call) => `call ${call.toolCallId} ${call.name} ${call.arguments}${call.sessionId.includes("__") ? ` (session ${call.sessionId})` : ""}`),
  ...waiting.questions.map((question) => `question ${question.questionId} ${JSON.stringify(question.question)}`)
]

/** The durable engine of `store`, as a client: it runs no workflow, the process that runs them is woken. */
const engineOf = (store: string): Layer.Layer<Durable.HumanLoopStore | WorkflowEngine.WorkflowEngine, Durable.DurableStoreError | Config.ConfigError> => {
  const parsed = storeOf(store)
  return parsed._tag === "Postgres" ? Durable.layerPostgresClient({ url: parsed.url }) : Durable.layerSqlite(parsed.file, { clientOnly: true })
}

/**
 * `use` on the target's side: a `RunsClient` for a server, the durable engine for a store. Failures become one
 * line (`CommandFailed`).
 */
const onTarget = <A>(
  target: Target,
  viaServer: (client: RunsClient.Service) => Effect.Effect<A, { readonly _tag: string; readonly message: string }>,
  viaStore: Effect.Effect<A, { readonly _tag: string; readonly message: string }, Durable.HumanLoopStore | WorkflowEngine.WorkflowEngine>
): Effect.Effect<A, CommandFailed> => {
  if (target._tag === "Server") {
    return Effect.flatMap(RunsClient.make({ baseUrl: target.url, ...(target.token !== undefined ? { token: target.token } : {}) }), viaServer).pipe(
      Effect.catch((error) => Effect.fail(new CommandFailed({ message: describeDecideError(error, target.url) }))),
      Effect.provide(NodeHttpClient.layerUndici)
    )
  }
  const parsed = storeOf(target.store)
  const where = describeStore(parsed)
  // Opening a SQLite file that is not there would make an empty one: a mistyped path is said, not created.
  if (parsed._tag === "Sqlite" && !existsSync(parsed.file)) {
    return Effect.fail(new CommandFailed({ message: `no durable store at ${parsed.file}: give the SQLite file the run's process uses` }))
  }
  return storeFailureAsError(viaStore).pipe(
    Effect.provide(engineOf(target.store)),
    Effect.catch((error) => Effect.fail(new CommandFailed({ message: describeDecideError(error, where) }))),
    Effect.scoped
  )
}

/** The calls and questions of run `runId` that wait. */
export const pending = (target: Target, runId: string): Effect.Effect<Waiting, CommandFailed> =>
  onTarget(
    target,
    (client) => Effect.map(client.get(runId), (run) => ({ pending: run.pending ?? [], questions: run.questions ?? [] })),
    Effect.gen(function*() {
      const waiting = { pending: yield* Durable.pending(runId), questions: yield* Durable.questions(runId) }
      if (waiting.pending.length > 0 || waiting.questions.length > 0) return waiting
      // Nothing waits: a run the store has, or none at all (a mistyped id is said, as the server's 404 says it).
      const known = yield* Durable.AgentRun.poll(yield* Durable.AgentRun.executionId({ agent: "", prompt: "", runId }))
      return Option.isSome(known)
        ? waiting
        : yield* Effect.fail({ _tag: "RunNotFound", message: `no run ${JSON.stringify(runId)} in the store` })
    })
  )

/** Decides the call and answers the line to print. */
export const decide = (
  target: Target,
  options: { readonly runId: string; readonly toolCallId: string; readonly approved: boolean; readonly reason: string | undefined }
): Effect.Effect<string, CommandFailed> => {
  const decision = { approved: options.approved, ...(options.reason !== undefined ? { reason: options.reason } : {}) }
  const line = `${options.approved ? "approved" : "rejected"} the call ${options.toolCallId} of run ${options.runId}`
  return onTarget(
    target,
    (client) => Effect.as(client.decide(options.runId, options.toolCallId, decision), line),
    Effect.as(Durable.decide(options.runId, options.toolCallId, decision), line)
  )
}

/** Answers the question and answers the line to print. */
export const answer = (
  target: Target,
  options: { readonly runId: string; readonly questionId: string; readonly answer: unknown }
): Effect.Effect<string, CommandFailed> => {
  const line = `answered the question ${options.questionId} of run ${options.runId}`
  return onTarget(
    target,
    (client) => Effect.as(client.answer(options.runId, options.questionId, options.answer), line),
    Effect.as(Durable.answer(options.runId, options.questionId, options.answer), line)
  )
}

const runIdArgument = Argument.String("runId").pipe(Argument.withDescription("The run (its id, as POST /runs answered, or the durable run's id)."))

/** `--url` / `--token` / `--store`: where the run is. */
const targetFlags = {
  url: Flag.String("url").pipe(Flag.withDescription(`The valet server (default ${defaultUrl}).`), Flag.optional),
  token: Flag.String("token").pipe(Flag.withDescription("Its bearer token (else VALET_TOKEN)."), Flag.optional),
  store: Flag.String("store").pipe(
    Flag.filter((value) => value.trim() !== "", () => "a SQLite file or a postgres:// URL"),
    Flag.withDescription("A durable store instead of a server: the SQLite file or postgres:// URL the run's runners use."),
    Flag.optional
  )
}

const targetOf = (values: {
  readonly url: Option.Option<string>
  readonly token: Option.Option<string>
  readonly store: Option.Option<string>
}): Effect.Effect<Target, CommandFailed> =>
  Effect.gen(function*() {
    if (Option.isSome(values.store)) {
      if (Option.isSome(values.url) || Option.isSome(values.token)) {
        return yield* new CommandFailed({ message: "--store names a durable store: it takes no --url or --token" })
      }
      return { _tag: "Store", store: values.store.value } as const
    }
    const token = Option.isSome(values.token)
      ? values.token.value
      : yield* Config.option(Config.String("VALET_TOKEN")).pipe(Effect.map(Option.getOrUndefined), Effect.orElseSucceed(() => undefined))
    return { _tag: "Server", url: Option.getOrElse(values.url, () => defaultUrl), token } as const
  })

const printLines = (lines: ReadonlyArray<string>) => Effect.sync(() => void process.stdout.write(lines.map((line) => `${line}\n`).join("")))

const pendingCommand = Command.make("pending", { runId: runIdArgument, ...targetFlags }, (values) =>
  Effect.gen(function*() {
    const waiting = yield* pending(yield* targetOf(values), values.runId)
    yield* printLines(waitingLines(waiting))
  })).pipe(
    Command.withDescription("Lists what waits for a person in a run: `call <callId> <tool> <arguments>` and `question <questionId> \"<question>\"`.")
  )

const decideCommand = Command.make(
  "decide",
  {
    runId: runIdArgument,
    toolCallId: Argument.String("callId").pipe(Argument.withDescription("The waiting call (valet runs pending lists them).")),
    approve: Flag.Boolean("approve").pipe(Flag.withDescription("Approve the call: the tool runs."), Flag.withDefault(false)),
    reject: Flag.Boolean("reject").pipe(Flag.withDescription("Reject the call: the model reads ERROR: rejected: <reason>."), Flag.withDefault(false)),
    reason: Flag.String("reason").pipe(Flag.withDescription("Why (the model reads it when rejected)."), Flag.optional),
    ...targetFlags
  },
  (values) =>
    Effect.gen(function*() {
      if (values.approve === values.reject) {
        return yield* new CommandFailed({ message: "give one of --approve or --reject" })
      }
      const line = yield* decide(yield* targetOf(values), {
        runId: values.runId,
        toolCallId: values.toolCallId,
        approved: values.approve,
        reason: Option.getOrUndefined(values.reason)
      })
      yield* printLines([line])
    })
).pipe(
  Command.withDescription(
    "Decides a tool call waiting for a person: --approve, or --reject with --reason. In a run of a valet server " +
      "(POST /runs/:runId/decisions/:callId), or with --store in a durable run (its runner resumes it)."
  )
)

const answerCommand = Command.make(
  "answer",
  {
    runId: runIdArgument,
    questionId: Argument.String("questionId").pipe(Argument.withDescription("The waiting question (valet runs pending lists them).")),
    answer: Argument.String("answer").pipe(Argument.withDescription("The answer: text, or JSON with --json.")),
    json: Flag.Boolean("json").pipe(Flag.withDescription("The answer is JSON (for a question whose answer is not text)."), Flag.withDefault(false)),
    ...targetFlags
  },
  (values) =>
    Effect.gen(function*() {
      const value = values.json
        ? yield* Effect.try({
          try: () => JSON.parse(values.answer) as unknown,
          catch: (error) => new CommandFailed({ message: `--json: the answer is not JSON (${error instanceof Error ? error.message : String(error)})` })
        })
        : values.answer
      yield* printLines([yield* answer(yield* targetOf(values), { runId: values.runId, questionId: values.questionId, answer: value })])
    })
).pipe(
  Command.withDescription(
    "Answers a question a run waits on (Architecture.ask, the ask_human tool): in a run of a valet server " +
      "(POST /runs/:runId/answers/:questionId), or with --store in a durable run. An answer its schema refuses is a 400 line; the question still waits."
  )
)

/** `valet runs …`: what waits for a person in a run, decided and answered. */
export const runsCommand = Command.make("runs").pipe(
  Command.withDescription(
    "What waits for a person in a run of a valet server (--url) or a durable store (--store): valet runs pending <runId>, " +
      "decide <runId> <callId> --approve|--reject, answer <runId> <questionId> <answer>."
  ),
  Command.withSubcommands([pendingCommand, decideCommand, answerCommand])
)
