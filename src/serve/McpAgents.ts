/**
 * valet's agents as MCP tools, on `effect/ai`'s `McpServer`: each agent of `Agents` is a tool taking an `input`
 * string and answering the run's output. While a run goes on, a client that sent a `progressToken` receives
 * `notifications/progress` from its events (model calls, tool calls, sub-agents); a client's
 * `notifications/cancelled` interrupts the run (its requests aborted, its processes killed). A run that fails is
 * an `isError` result carrying the typed error's message; a run stopped by a budget cap answers its partial
 * output, with `interrupted` in the structured content (and, for an agent with a valet.yaml `workspace:`, the
 * `workspace` its run changed: `changedFiles` and the `diff`).
 *
 * People in the loop (`HumanLoop`): a run's tool call that needs approval, or a question it asks (`Architecture.ask`,
 * the `ask_human` tool), is put to the client that called the tool as an `elicitation/create` request (form mode),
 * and a progress notification says it waits. An approval's form has `approve`, `reason` and `arguments` (the
 * model's JSON, prefilled: edited ones are checked by the tool's schema); a question's form has the fields of its
 * answer's schema when they are primitives (strings, numbers, booleans, choices), one `answer` field for a primitive,
 * else one `answer` field of JSON text. An answer that does not fit is asked again with the error, at most 3 times;
 * then the call is rejected (the question dismissed: the run gets `Unanswered`). Declined or cancelled, the call is
 * rejected with that reason, which the model reads. A client that cannot answer — no elicitation capability, or
 * protocol 2025-03-26 — has the call rejected (the question dismissed) at once with a reason saying so: the MCP call
 * still returns a result. The waits of one turn (parallel tool calls) are asked at once, each on its own request. A
 * cancelled call, a closed stdin or an ended HTTP session (DELETE) interrupts the run and its open forms (a client
 * still connected gets `notifications/cancelled` for them), as does a call's `approvalTimeout`. With a `HumanLoop`
 * in the context the tools are registered in (an app's), the waits are listed there and may be decided there too —
 * the first decision wins — and a client that cannot answer leaves them to it.
 *
 * A server obeys the limits of `valet.yaml`'s `server:` (`Limits`): at most `maxConcurrentRuns` runs at once (more
 * calls wait for a slot), and no message longer than `maxBodyBytes`. effect's `McpServer` speaks the protocol;
 * over stdio valet reads the wire itself first (`internal/mcp/`), so that stdout carries JSON-RPC only and a bad
 * line costs one error answer, never the server.
 *
 * `registrations` / `registrationsWith` add the tools to an `McpServer` a user already runs; `serveStdio`,
 * `layerStdio` and `layerHttp` are whole servers (`valet mcp` runs `serveStdio`, or `layerHttp` with `--http`).
 *
 * @example
 * ```ts
 * import * as NodeStdio from "@effect/platform-node/NodeStdio"
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as McpAgents from "valet/McpAgents"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * // `valet mcp` in code: each agent an MCP tool (`input` → the run's output) on stdin / stdout, at most 4 runs at
 * // once; it returns when the client closes stdin.
 * const main = McpAgents.serveStdio({ name: "my-agents", version: "1.0.0", maxConcurrentRuns: 4 }).pipe(
 *   Effect.provide(Agents.layer([assistant])),
 *   Effect.provide(NodeStdio.layer)
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Console as NodeConsole } from "node:console"
import { ByteSize, Console, Context, Effect, Exit, Fiber, Layer, Option, Schema, Semaphore, Stdio, Stream } from "effect"
import { McpProtocol, McpSchema, McpServer } from "effect/ai"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import type * as AgentEvent from "../core/AgentEvent.js"
import * as HumanLoop from "../core/HumanLoop.js"
import * as Decode from "../core/internal/decode.js"
import * as Agents from "./Agents.js"
import * as Elicit from "./internal/mcp/elicit.js"
import * as StdioTransport from "./internal/mcp/stdioTransport.js"

/**
 * The protocol versions a valet MCP server speaks, newest first.
 *
 * @since 0.2.0
 * @category constants
 */
export const protocols = [McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26] as const

/**
 * Who the server says it is.
 *
 * @since 0.2.0
 * @category options
 */
export interface ServerInfo {
  readonly name?: string | undefined
  readonly version?: string | undefined
}

const Arguments = Schema.Struct({ input: Schema.String })
const decodeArguments = Schema.decodeUnknownOption(Arguments)

/**
 * The JSON schema of every agent tool's arguments.
 *
 * @since 0.2.0
 * @category constants
 */
export const inputSchema = {
  type: "object",
  properties: { input: { type: "string", description: "The task or question for the agent." } },
  required: ["input"]
} as const

/**
 * What a progress notification says about an event, or `undefined` for events not reported.
 *
 * @since 0.2.0
 * @category utils
 */
export const describe = (event: AgentEvent.AgentEvent): string | undefined => {
  switch (event._tag) {
    case "ModelCalled":
      return `${event.sessionId}: model call ${event.step}`
    case "ToolCalled":
      return `${event.sessionId}: tool ${event.name}`
    case "SubRunStarted":
      return `${event.sessionId}: sub-agent ${event.agent} started`
    case "SubRunCompleted":
      return `${event.sessionId}: sub-agent ${event.childSessionId} ${event.error !== undefined ? "failed" : "completed"}`
    case "BudgetWarning":
      return `${event.sessionId}: budget ${event.limit} at ${event.used} of ${event.max}`
    case "ContextCompacted":
      return `${event.sessionId}: context compacted (${event.strategy}), ${event.tokensBefore} → ${event.tokensAfter} tokens`
    case "ApprovalRequested":
      return `${event.sessionId}: tool ${event.name} waits for approval [call ${event.toolCallId}]`
    case "QuestionAsked":
      return `${event.sessionId}: question ${event.questionId} waits for an answer`
    default:
      return undefined
  }
}

const textResult = (text: string, isError: boolean, structured?: Record<string, unknown>) =>
  new McpSchema.CallToolResult({
    content: [{ type: "text" as const, text }],
    isError,
    ...(structured !== undefined ? { structuredContent: structured } : {})
  })


/**
 * What a valet MCP server allows: the `server:` section of `valet.yaml` (`valet serve` reads the same numbers).
 *
 * @since 0.2.0
 * @category options
 */
export interface Limits {
  /** Tool calls running an agent at once, at most (default 16, as `valet serve`); more wait for a slot. */
  readonly maxConcurrentRuns?: number | undefined
  /**
   * The largest message, in bytes (default 1 MiB): a request body over HTTP (413 beyond, and a body without a
   * length is cut there while it is read), a line over stdio (-32600 beyond; at most 16 MiB, effect's own limit).
   */
  readonly maxBodyBytes?: number | undefined
}

/**
 * The default of `Limits.maxConcurrentRuns`, `valet serve`'s.
 *
 * @since 0.2.0
 * @category options
 */
export const defaultMaxConcurrentRuns = 16

/**
 * The default of `Limits.maxBodyBytes`, `valet serve`'s.
 *
 * @since 0.2.0
 * @category options
 */
export const defaultMaxBodyBytes = 1_048_576

const LimitsSchema = Schema.Struct({
  maxConcurrentRuns: Schema.optional(Decode.IntAtLeast(1)),
  maxBodyBytes: Schema.optional(Decode.IntAtLeast(1))
})

/** `limits` checked (one line naming the field on a bad one), with the defaults filled in. */
const checkLimits = (limits: Limits): Effect.Effect<Required<{ [K in keyof Limits]: number }>, InvalidOptions> =>
  Effect.map(
    Decode.decode("McpAgents", LimitsSchema, { maxConcurrentRuns: limits.maxConcurrentRuns, maxBodyBytes: limits.maxBodyBytes }),
    (checked) => ({
      maxConcurrentRuns: checked.maxConcurrentRuns ?? defaultMaxConcurrentRuns,
      maxBodyBytes: checked.maxBodyBytes ?? defaultMaxBodyBytes
    })
  )

/** The message of a call waiting for a slot (its progress notification). */
const waitingMessage = (limit: number) => `${limit} runs are going on, the most this server runs at once: waiting for one to end`

/** Where a server's runs wait for people: the `HumanLoop` that lists them, and whether anyone but the client decides. */
interface People {
  readonly base: HumanLoop.Service
  readonly others: boolean
}

/**
 * Runs one agent for one `tools/call`, sending progress to the caller when it asked for it.
 *
 * Beyond `maxConcurrentRuns` a call waits for a slot, first come first served, where `valet serve` refuses a run
 * with 429: an MCP tool call is a request its client is already waiting on (over stdio the one client chose to send
 * them together — an LLM's parallel tool calls), and a refusal would reach the model as a failed tool it has no
 * reason to call again, where waiting makes the server slower, never broken. The model server never sees more than
 * the limit; a waiting call costs one fiber, says why in a progress notification (which also restarts the
 * client's timeout when it asked for that), and leaves the queue when its client cancels it or times out.
 */
const call = (
  server: McpServer.McpServer["Service"],
  entry: Agents.Entry,
  args: unknown,
  slots: { readonly semaphore: Semaphore.Semaphore; readonly limit: number },
  stopping: Effect.Effect<McpSchema.CallToolResult>,
  people: People
): Effect.Effect<McpSchema.CallToolResult, McpSchema.InvalidParams, McpSchema.McpRequestContext> =>
  Effect.gen(function*() {
    const decoded = decodeArguments(args)
    if (Option.isNone(decoded)) {
      return yield* new McpSchema.InvalidParams({ message: `${entry.name}: the arguments must be {"input": "<text>"}` })
    }
    const context = yield* McpSchema.McpRequestContext
    const token = context.requestMetadata?.progressToken as string | number | undefined
    let progress = 0
    const notify = (message: string) =>
      token === undefined
        ? Effect.void
        : server.notifications["notifications/progress"]({ progressToken: token, progress: ++progress, message }).pipe(
          // A client that went away does not stop the run; its cancellation does.
          Effect.ignore
        )
    // The calling client answers the run's approvals and questions (`elicitation/create`), when it can.
    const humanLoop = Elicit.humanLoop(people.base, yield* Effect.serviceOption(McpSchema.McpServerClient), { agent: entry.name, others: people.others })
    let result: AgentEvent.RunResult | undefined
    const run = Agent.stream(entry.agent, decoded.value.input, {
      textDeltas: false,
      ...(entry.budget !== undefined ? { budget: entry.budget } : {})
    }).pipe(
      Stream.provideService(HumanLoop.HumanLoop, humanLoop),
      Stream.runForEach((event) => {
        if (event._tag === "RunCompleted" && event.sessionId === event.result.sessionId && result === undefined) {
          // The root run's result (sub-agents' RunCompleted come first, with their own session ids).
          if (event.sessionId.indexOf("__") === -1) result = event.result
        }
        const message = describe(event)
        return message === undefined ? Effect.void : notify(message)
      }),
      Effect.map(() => {
        const done = result!
        return textResult(done.output, false, {
          output: done.output,
          sessionId: done.sessionId,
          interrupted: done.interrupted,
          ...(done.interruptionReason !== undefined ? { interruptionReason: done.interruptionReason } : {}),
          modelCalls: done.modelCalls,
          usage: done.usage,
          // A deep_agent with a valet.yaml workspace: its run's copy is gone, its changes are here.
          ...(done.metadata.workspace !== undefined ? { workspace: done.metadata.workspace } : {})
        })
      }),
      Effect.catch((error) => Effect.succeed(textResult(`${entry.name} failed: ${error.message}`, true)))
    )
    const limited = Effect.gen(function*() {
      const started = yield* slots.semaphore.withPermitsIfAvailable(1)(run)
      if (Option.isSome(started)) return started.value
      yield* notify(waitingMessage(slots.limit))
      return yield* slots.semaphore.withPermits(1)(run)
    })
    return yield* Effect.raceFirst(limited, stopping)
  })

/**
 * Adds every agent of `Agents` to the `McpServer` as a tool, at most `maxConcurrentRuns` of their calls running
 * at once (the others wait, see `Limits`). The runs' approvals and questions are asked of the calling client (see
 * the module's documentation), and listed in the `HumanLoop` of this layer's context when it has one.
 *
 * @since 0.2.0
 * @category layers
 */
export const registrationsWith = (
  limits: Limits = {}
): Layer.Layer<never, InvalidOptions, McpServer.McpServer | Agents.Agents> => register(limits, Effect.never)

/** `registrationsWith`, the runs in flight stopped (their calls answered `isError`) when `stop` completes. */
const register = (
  limits: Limits,
  stop: Effect.Effect<void>
): Layer.Layer<never, InvalidOptions, McpServer.McpServer | Agents.Agents> =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const limit = (yield* checkLimits(limits)).maxConcurrentRuns
      const server = yield* McpServer.McpServer
      const agents = yield* Agents.Agents
      const slots = { semaphore: yield* Semaphore.make(limit), limit }
      // Where the runs' waits are listed: the app's `HumanLoop` (whose deciders may answer too), or the server's own.
      const app = yield* Effect.serviceOption(HumanLoop.HumanLoop)
      const people: People = Option.isSome(app) ? { base: app.value, others: true } : { base: yield* HumanLoop.make, others: false }
      for (const entry of agents.list) {
        const stopped = Effect.as(
          stop,
          textResult(`${entry.name} stopped: the client closed the connection before the run ended`, true)
        )
        yield* server.addTool({
          tool: new McpSchema.Tool({
            name: entry.name,
            description: entry.description,
            inputSchema,
            annotations: { title: entry.name, readOnlyHint: false, openWorldHint: true }
          }),
          annotations: Context.empty(),
          handle: (args) => call(server, entry, args, slots, stopped, people)
        })
      }
    })
  )

/**
 * `registrationsWith` the default limits.
 *
 * @since 0.2.0
 * @category layers
 */
export const registrations: Layer.Layer<never, never, McpServer.McpServer | Agents.Agents> = Layer.orDie(registrationsWith())

/**
 * The options of a whole server: who it says it is and its limits.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options extends ServerInfo, Limits {}

const info = (options: ServerInfo) => ({ name: options.name ?? "valet", version: options.version ?? "0.2.0" })

// stdout is the protocol's: every log line of a stdio server goes to stderr, effect's loggers and `Console` alike.
const stderrConsole = new NodeConsole({ stdout: process.stderr, stderr: process.stderr })

/** A note on the `Stdio`'s stderr, one line, named after the server. */
const noteOn = (stdio: Stdio.Stdio, name: string) => (text: string) =>
  Stream.make(`${name}: ${text}\n`).pipe(Stream.run(stdio.stderr()), Effect.ignore)

/** effect's MCP server over valet's stdio transport (made in the current scope), with the transport. */
const stdioServer = (options: Options) =>
  Effect.gen(function*() {
    const real = yield* Stdio.Stdio
    const limits = yield* checkLimits(options)
    const transport = yield* StdioTransport.make({ maxMessageBytes: limits.maxBodyBytes, note: noteOn(real, info(options).name) })
    const layer = McpServer.layerStdio({ ...info(options), protocols, registrations: register(limits, transport.closed) }).pipe(
      Layer.provide(Layer.succeed(Stdio.Stdio, transport.stdio)),
      // Cannot fail: the limits are checked, and its other error is a bad cache hint, which valet never gives.
      Layer.orDie
    )
    return { layer, transport }
  })

/**
 * A whole MCP server on stdin / stdout (the `Stdio` in context: the process's), until the client closes stdin;
 * then the runs in flight are stopped (their model requests aborted, their processes killed, their calls answered
 * `isError`), what was read before is answered, and it returns. What `valet mcp` runs.
 *
 * Only JSON-RPC reaches stdout: a malformed line is answered -32700 with id null, a message that is not a valid
 * request (a non-scalar id, no method…) -32600, a line longer than `maxBodyBytes` -32600 (read no further than the
 * limit), each on its own — the other lines of the same read are answered as usual; logs and notes go to stderr.
 *
 * @since 0.2.0
 * @category servers
 */
export const serveStdio = (options: Options = {}): Effect.Effect<void, InvalidOptions, Agents.Agents | Stdio.Stdio> =>
  Effect.scoped(Effect.gen(function*() {
    const { layer, transport } = yield* stdioServer(options)
    const server = yield* Effect.forkScoped(Layer.launch(layer))
    yield* Effect.raceFirst(
      transport.drained,
      // The server stops on its own only when it fails.
      Effect.flatMap(Fiber.await(server), (exit) => Exit.isFailure(exit) ? Effect.failCause(exit.cause) : Effect.void)
    )
  })).pipe(Effect.provideService(Console.Console, stderrConsole))

/**
 * A whole MCP server on stdin / stdout, as a layer (its `McpServer` open to more registrations): what `serveStdio`
 * serves. When the client has closed stdin and its last requests are answered, it interrupts the fiber that built
 * it, as effect's `McpServer.layerStdio` does (`Layer.launch(layerStdio())` then ends interrupted); a program that
 * should end normally runs `serveStdio`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerStdio = (options: Options = {}): Layer.Layer<McpServer.McpServer, InvalidOptions, Agents.Agents | Stdio.Stdio> =>
  Layer.unwrap(Effect.gen(function*() {
    const builder = Fiber.getCurrent()
    const { layer, transport } = yield* stdioServer(options)
    // Detached: the builder's scope, closing, interrupts this fiber, which must not wait for the builder to end.
    if (builder !== undefined) {
      yield* Effect.forkScoped(Effect.andThen(transport.drained, Effect.forkDetach(Fiber.interrupt(builder))))
    }
    return layer
  })).pipe(Layer.provide(Layer.succeed(Console.Console, stderrConsole)))

/**
 * The `maxBodyBytes` of an MCP endpoint, on its own routes: effect's transport reads a POST body whole, so a body
 * announced longer is refused before a byte is read (413, with a JSON-RPC error), and one without a length is cut
 * at the limit while it is read.
 */
const bodyLimit = (maxBodyBytes: number) =>
  HttpRouter.middleware((httpEffect) =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const length = Number(request.headers["content-length"] ?? "0")
      if (length > maxBodyBytes) {
        return HttpServerResponse.jsonUnsafe({
          jsonrpc: "2.0",
          id: null,
          error: {
            code: -32600,
            message: `Invalid Request: the request body is ${length} bytes, more than this server's limit of ${maxBodyBytes}`
          }
        }, { status: 413 })
      }
      return yield* Effect.provideService(httpEffect, HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBodyBytes))
    })
  ).layer

/**
 * A whole Streamable HTTP MCP server at `path` (default `/mcp`) of the `HttpRouter` in context, with the body
 * limit on its routes and at most `maxConcurrentRuns` runs at once. A client's DELETE ends its session, and the
 * runs of its calls in flight with it. Authentication, the Host / Origin allow-list
 * and the like are the router's: add them as a route middleware (`Layer.provide(HttpRouter.middleware(f).layer)`
 * on this layer) or a global one beside it.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerHttp = (options: Options & { readonly path?: HttpRouter.PathInput | undefined } = {}) =>
  Layer.unwrap(Effect.map(checkLimits(options), (limits) =>
    McpServer.layerHttp({
      ...info(options),
      path: options.path ?? "/mcp",
      protocols,
      // A client's DELETE ends its session and interrupts its calls in flight (their runs, their elicitations): the
      // router's guard decides who may send it, as for every other request.
      allowSessionTermination: true,
      registrations: registrationsWith(limits)
    }).pipe(
      Layer.provide(bodyLimit(limits.maxBodyBytes)),
      // Cannot fail: the limits are checked, and its other error is a bad cache hint, which valet never gives.
      Layer.orDie
    )))
