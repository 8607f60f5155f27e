/**
 * valet's agents as MCP tools, on `effect/ai`'s `McpServer`: each agent of `Agents` is a tool taking an `input`
 * string and answering the run's output. While a run goes on, a client that sent a `progressToken` receives
 * `notifications/progress` from its events (model calls, tool calls, sub-agents); a client's
 * `notifications/cancelled` interrupts the run (its requests aborted, its processes killed). A run that fails is
 * an `isError` result carrying the typed error's message; a run stopped by a budget cap answers its partial
 * output, with `interrupted` in the structured content.
 *
 * `registrations` adds the tools to an `McpServer` a user already runs; `layerStdio` / `layerHttp` are whole
 * servers (what `valet mcp` starts).
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, Option, Schema, Stream } from "effect"
import { McpProtocol, McpSchema, McpServer } from "effect/ai"
import type { HttpRouter } from "effect/http"
import * as Agent from "../core/Agent.js"
import type * as AgentEvent from "../core/AgentEvent.js"
import * as Agents from "./Agents.js"

/** The protocol versions a valet MCP server speaks, newest first. */
export const protocols = [McpProtocol.v2025_11_25, McpProtocol.v2025_06_18, McpProtocol.v2025_03_26] as const

/** Who the server says it is. */
export interface ServerInfo {
  readonly name?: string | undefined
  readonly version?: string | undefined
}

const Arguments = Schema.Struct({ input: Schema.String })
const decodeArguments = Schema.decodeUnknownOption(Arguments)

/** The JSON schema of every agent tool's arguments. */
export const inputSchema = {
  type: "object",
  properties: { input: { type: "string", description: "The task or question for the agent." } },
  required: ["input"]
} as const

/** What a progress notification says about an event, or `undefined` for events not reported. */
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

/** Runs one agent for one `tools/call`, sending progress to the caller when it asked for it. */
const call = (
  server: McpServer.McpServer["Service"],
  entry: Agents.Entry,
  args: unknown
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
    let result: AgentEvent.RunResult | undefined
    const run = Agent.stream(entry.agent, decoded.value.input, {
      textDeltas: false,
      ...(entry.budget !== undefined ? { budget: entry.budget } : {})
    }).pipe(
      Stream.runForEach((event) => {
        if (event._tag === "RunCompleted" && event.sessionId === event.result.sessionId && result === undefined) {
          // The root run's result (sub-agents' RunCompleted come first, with their own session ids).
          if (event.sessionId.indexOf("__") === -1) result = event.result
        }
        const message = describe(event)
        return message === undefined ? Effect.void : notify(message)
      })
    )
    return yield* run.pipe(
      Effect.map(() => {
        const done = result!
        return textResult(done.output, false, {
          output: done.output,
          sessionId: done.sessionId,
          interrupted: done.interrupted,
          ...(done.interruptionReason !== undefined ? { interruptionReason: done.interruptionReason } : {}),
          modelCalls: done.modelCalls,
          usage: done.usage
        })
      }),
      Effect.catch((error) => Effect.succeed(textResult(`${entry.name} failed: ${error.message}`, true)))
    )
  })

/** Adds every agent of `Agents` to the `McpServer` as a tool. */
export const registrations: Layer.Layer<never, never, McpServer.McpServer | Agents.Agents> = Layer.effectDiscard(
  Effect.gen(function*() {
    const server = yield* McpServer.McpServer
    const agents = yield* Agents.Agents
    for (const entry of agents.list) {
      yield* server.addTool({
        tool: new McpSchema.Tool({
          name: entry.name,
          description: entry.description,
          inputSchema,
          annotations: { title: entry.name, readOnlyHint: false, openWorldHint: true }
        }),
        annotations: Context.empty(),
        handle: (args) => call(server, entry, args)
      })
    }
  })
)

const info = (options: ServerInfo) => ({ name: options.name ?? "valet", version: options.version ?? "0.2.0" })

/** A whole MCP server on stdin / stdout (the process's, from `Stdio` in context). */
export const layerStdio = (options: ServerInfo = {}) =>
  McpServer.layerStdio({ ...info(options), protocols, registrations })

/** A whole Streamable HTTP MCP server at `path` of the `HttpRouter` in context. */
export const layerHttp = (options: ServerInfo & { readonly path?: HttpRouter.PathInput | undefined } = {}) =>
  McpServer.layerHttp({ ...info(options), path: options.path ?? "/mcp", protocols, registrations })
