/**
 * `valet runs decide <runId> <callId> --approve|--reject [--reason r]`: decides a tool call that waits for a person in
 * a run of a `valet serve` (`POST /runs/:runId/decisions/:toolCallId`, through `RunsClient.decide`). The server is
 * `--url` (default the one `valet serve` listens on), its token `--token` or `VALET_TOKEN`. Every refusal is one line
 * saying what and the status: no such run or no such waiting call (404), decided already (409), a bad decision (400),
 * the wrong token (401), a server that cannot be reached. Runs of a durable store are not decided here yet: only
 * through the server that runs them.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Config, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as RunsClient from "../../serve/RunsClient.js"
import { CommandFailed } from "./failure.js"

/** Where `valet serve` listens by default (`server:`'s defaults). */
export const defaultUrl = "http://127.0.0.1:8787"

/** What a decision's failure says, on one line (the status first, then the server's message). */
export const describeDecideError = (error: { readonly _tag: string; readonly message: string }, url: string): string => {
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
      return `401: ${url} refused the token (pass --token, or set VALET_TOKEN)`
    case "HttpClientError":
      return `cannot reach ${url}: ${error.message}`
    default:
      return error.message
  }
}

/** Decides the call and answers the line to print. */
export const decide = (options: {
  readonly url: string
  readonly token: string | undefined
  readonly runId: string
  readonly toolCallId: string
  readonly approved: boolean
  readonly reason: string | undefined
}): Effect.Effect<string, CommandFailed, never> =>
  Effect.gen(function*() {
    const client = yield* RunsClient.make({ baseUrl: options.url, ...(options.token !== undefined ? { token: options.token } : {}) })
    const decided = yield* client.decide(options.runId, options.toolCallId, {
      approved: options.approved,
      ...(options.reason !== undefined ? { reason: options.reason } : {})
    })
    return `${decided.approved ? "approved" : "rejected"} the call ${decided.toolCallId} of run ${decided.runId}`
  }).pipe(
    Effect.catch((error) => Effect.fail(new CommandFailed({ message: describeDecideError(error, options.url) }))),
    Effect.provide(NodeHttpClient.layerUndici)
  )

const decideCommand = Command.make(
  "decide",
  {
    runId: Argument.String("runId").pipe(Argument.withDescription("The run (its id, as POST /runs answered).")),
    toolCallId: Argument.String("callId").pipe(Argument.withDescription("The waiting call (GET /runs/:id lists them in pending).")),
    approve: Flag.Boolean("approve").pipe(Flag.withDescription("Approve the call: the tool runs."), Flag.withDefault(false)),
    reject: Flag.Boolean("reject").pipe(Flag.withDescription("Reject the call: the model reads ERROR: rejected: <reason>."), Flag.withDefault(false)),
    reason: Flag.String("reason").pipe(Flag.withDescription("Why (the model reads it when rejected)."), Flag.optional),
    url: Flag.String("url").pipe(Flag.withDescription(`The valet server (default ${defaultUrl}).`), Flag.withDefault(defaultUrl)),
    token: Flag.String("token").pipe(Flag.withDescription("Its bearer token (else VALET_TOKEN)."), Flag.optional)
  },
  (values) =>
    Effect.gen(function*() {
      if (values.approve === values.reject) {
        return yield* new CommandFailed({ message: "give one of --approve or --reject" })
      }
      const token = Option.isSome(values.token)
        ? values.token.value
        : yield* Config.option(Config.String("VALET_TOKEN")).pipe(Effect.map(Option.getOrUndefined), Effect.orElseSucceed(() => undefined))
      const line = yield* decide({
        url: values.url,
        token,
        runId: values.runId,
        toolCallId: values.toolCallId,
        approved: values.approve,
        reason: Option.getOrUndefined(values.reason)
      })
      yield* Effect.sync(() => void process.stdout.write(`${line}\n`))
    })
).pipe(
  Command.withDescription(
    "Decides a tool call waiting for a person in a run of a valet server (POST /runs/:runId/decisions/:callId): " +
      "--approve, or --reject with --reason. Runs of a durable store are decided through the server that runs them."
  )
)

/** `valet runs …`: the runs of a valet server. */
export const runsCommand = Command.make("runs").pipe(
  Command.withDescription("The runs of a valet server: valet runs decide <runId> <callId> --approve|--reject."),
  Command.withSubcommands([decideCommand])
)
