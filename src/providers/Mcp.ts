/**
 * Tools from MCP servers, for any architecture (`valet/Mcp`; not loaded by `import "valet"`). A config in the
 * `mcpServers` shape that Claude Desktop, Cursor and VS Code use — stdio `{ command, args, env, cwd }` or Streamable
 * HTTP `{ url, headers }` — becomes valet tools: each server's `tools/list`, its JSON schemas sent to the model as
 * they are, each call a `tools/call` whose result (text, structured content, `isError`) is the tool result the
 * model reads.
 *
 * Built on `effect/ai`'s `McpClient` (stdio and Streamable HTTP transports, protocol negotiation, and a
 * `notifications/cancelled` sent when a call is interrupted). Every server process and session lives in the
 * caller's `Scope` and ends with it. A server that cannot start or answer is a typed `McpError` when the tools are
 * made; once running, a call that fails, times out (`callTimeout`, default 60 s) or meets a crashed server is an
 * `ERROR:` result the model reads — a run never hangs on a server.
 *
 * @example
 * ```ts
 * import { NodeHttpClient, NodeServices } from "@effect/platform-node"
 * import { Effect, Layer } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Mcp from "valet/Mcp"
 *
 * // The `mcpServers` shape of Claude Desktop, Cursor and VS Code: stdio `{ command, args }` or HTTP `{ url }`.
 * const config: Mcp.Config = {
 *   mcpServers: { everything: { command: "npx", args: ["-y", "@modelcontextprotocol/server-everything", "stdio"] } }
 * }
 *
 * // The server runs as long as the scope; the model (scripted here) calls its `get-sum` like any other tool.
 * const answer = Effect.gen(function*() {
 *   const tools = yield* Mcp.tools(config, { callTimeout: "30 seconds" })
 *   const agent = Agent.make({ name: "assistant", instructions: "Use the tools.", tools })
 *   return (yield* Agent.run(agent, "What is 2 + 3?")).output
 * }).pipe(
 *   Effect.scoped,
 *   Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "get-sum", arguments: { a: 2, b: 3 } }] }, "5"])),
 *   Effect.provide(Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Deferred, Duration, Effect, Option, Result, Schema, type Scope, Stream } from "effect"
import { McpClient, McpProtocol, type McpSchema } from "effect/ai"
import { Base64 } from "effect/encoding"
import type { HttpClient } from "effect/http"
import { ChildProcess, ChildProcessSpawner } from "effect/process"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Opts from "../core/internal/decode.js"
import * as Model from "../core/Model.js"
import * as Tool from "../core/Tool.js"
import { DurationInput } from "./internal/resilience.js"

// ---------------------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------------------

/**
 * A server started as a process, spoken to over its stdin / stdout.
 *
 * @since 0.2.0
 * @category config
 */
export const StdioServer = Schema.Struct({
  command: Schema.String,
  args: Schema.optional(Schema.Array(Schema.String)),
  /** Set for the process, over this process's environment. */
  env: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  cwd: Schema.optional(Schema.String),
  /** Ignored (VS Code writes `"type": "stdio"`). */
  type: Schema.optional(Schema.Literal("stdio"))
})

/**
 * A server at a Streamable HTTP endpoint.
 *
 * @since 0.2.0
 * @category config
 */
export const HttpServer = Schema.Struct({
  url: Schema.String,
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  /** Ignored (VS Code writes `"type": "http"`). */
  type: Schema.optional(Schema.Literals(["http", "streamable-http", "streamableHttp"]))
})

/**
 * One entry of `mcpServers`.
 *
 * @since 0.2.0
 * @category config
 */
export const ServerConfig = Schema.Union([StdioServer, HttpServer])
/**
 * One entry of `mcpServers`.
 *
 * @since 0.2.0
 * @category config
 */
export type ServerConfig = typeof ServerConfig.Type

/**
 * The `mcpServers` config: server names to how to reach them.
 *
 * @since 0.2.0
 * @category config
 */
export const Config = Schema.Struct({ mcpServers: Schema.Record(Schema.String, ServerConfig) })
/**
 * The `mcpServers` config.
 *
 * @since 0.2.0
 * @category config
 */
export type Config = typeof Config.Type

/**
 * Options of `tools`.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** How long one tool call may take before it is cancelled and reported to the model (default 60 s). */
  readonly callTimeout?: Duration.Input | undefined
  /** How long starting a server, its handshake and its `tools/list` may take (default 30 s). */
  readonly connectTimeout?: Duration.Input | undefined
  /**
   * Name tools `<server>__<tool>` (default: when there is more than one server), so that two servers' tools of
   * the same name do not clash.
   */
  readonly prefix?: boolean | undefined
}

/**
 * A server could not be started, reached or listed; `server` is its name in the config.
 *
 * @since 0.2.0
 * @category errors
 */
export class McpError extends Schema.TaggedError<McpError>()("McpError", {
  server: Schema.String,
  message: Schema.String
}) {}

const OptionsSchema = Schema.Struct({
  callTimeout: Schema.optional(DurationInput),
  connectTimeout: Schema.optional(DurationInput),
  prefix: Schema.optional(Schema.Boolean)
})

// ---------------------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------------------

const clientInfo = { name: "valet", version: "0.2.0" }

/** A tool name servers accept: `[a-zA-Z0-9_-]{1,64}`. */
const toolName = (server: string, tool: string, prefix: boolean): string => {
  const safe = (text: string) => text.replace(/[^a-zA-Z0-9_-]/g, "_")
  return (prefix ? `${safe(server)}__${safe(tool)}` : safe(tool)).slice(0, 64)
}

/**
 * What the model reads of a result: its text parts, then what else it holds, then its structured content. Images,
 * audio and binary resources are named here (`[image: image/png]`); `resultOutcome` also hands their bytes over.
 *
 * @since 0.2.0
 * @category utils
 */
export const resultText = (result: McpSchema.CallToolResult): string => resultOutcome(result).content

/**
 * A result as a tool outcome: its text (as `resultText`) and, as parts the model sees, its image and audio content
 * and its binary resources of a media type valet sends (a PDF, an image). A block that cannot be a part (an
 * `image/svg+xml`, audio in a format no server takes, bytes over the part cap) stays a line of text saying why it
 * was not attached, so the model knows something was there.
 *
 * @since 0.2.0
 * @category utils
 */
export const resultOutcome = (result: McpSchema.CallToolResult): Tool.Outcome => {
  const lines: Array<string> = []
  const parts: Array<Model.Part> = []
  const attach = (label: string, part: Model.Part | string) => {
    const problem = typeof part === "string" ? part : Model.partProblem(part)
    if (problem === undefined) {
      parts.push(part as Model.Part)
      lines.push(`[${label}: attached]`)
    } else {
      lines.push(`[${label}: not attached: ${problem}]`)
    }
  }
  for (const block of result.content) {
    switch (block.type) {
      case "text":
        lines.push(block.text)
        break
      case "image":
        attach(`image ${block.mimeType}`, { type: "image", data: Base64.encode(block.data), mediaType: block.mimeType.toLowerCase() })
        break
      case "audio": {
        const format = Model.audioFormatOf(block.mimeType)
        attach(
          `audio ${block.mimeType}`,
          format === undefined
            ? `unknown audio media type (known: ${Model.knownAudioMediaTypes.join(", ")})`
            : { type: "audio", data: Base64.encode(block.data), format }
        )
        break
      }
      case "resource":
        if ("text" in block.resource) lines.push(block.resource.text)
        else if (block.resource.mimeType === undefined) lines.push(`[resource: ${block.resource.uri}]`)
        else {
          attach(`resource ${block.resource.uri} ${block.resource.mimeType}`, {
            type: "file",
            data: Base64.encode(block.resource.blob),
            mediaType: block.resource.mimeType.toLowerCase(),
            name: block.resource.uri
          })
        }
        break
      case "resource_link":
        lines.push(`[resource: ${block.uri}]`)
        break
    }
  }
  if (result.structuredContent !== undefined) lines.push(JSON.stringify(result.structuredContent))
  const content = lines.join("\n")
  const isError = result.isError === true
  return parts.length > 0 ? { content, isError, parts } : { content, isError }
}

const toTool = (
  server: string,
  client: McpClient.McpClient,
  tool: McpSchema.Tool,
  name: string,
  callTimeout: Duration.Duration
): Tool.Tool =>
  Tool.fromDefinition({
    name,
    description: tool.description ?? tool.title ?? tool.name,
    parameters: tool.inputSchema as Record<string, unknown>,
    // The MCP call has its own deadline (and sends `notifications/cancelled` when it passes); valet's own
    // timeout stays above it so the server's answer, or the cancellation, is what the model reads.
    timeout: Duration.sum(callTimeout, Duration.seconds(5)),
    call: (argumentsText) => {
      const parsed = Tool.parseArguments(name, argumentsText)
      if (Result.isFailure(parsed)) return Effect.succeed({ content: `ERROR: ${parsed.failure}`, isError: true })
      const args = parsed.success
      if (args === null || typeof args !== "object" || Array.isArray(args)) {
        return Effect.succeed({ content: `ERROR: the arguments of tool "${name}" must be a JSON object`, isError: true })
      }
      return client.callTool({ tool, arguments: args as Record<string, unknown> }, { timeout: callTimeout }).pipe(
        Effect.map(resultOutcome),
        Effect.catch((error) =>
          Effect.succeed({ content: `ERROR: MCP server "${server}": ${error.message}`, isError: true })
        )
      )
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Why a server did not start
// ---------------------------------------------------------------------------------------------------------

/**
 * What the message of a server that cannot start shows of its config: the command line, or the URL without its
 * credentials and query (env values and headers are never shown: they hold secrets).
 */
const targetOf = (config: ServerConfig): string => {
  if ("command" in config) {
    const word = (text: string) => (/^[\w@%+=:,./-]+$/.test(text) ? text : JSON.stringify(text))
    return [config.command, ...(config.args ?? [])].map(word).join(" ")
  }
  try {
    const url = new URL(config.url)
    return `${url.origin}${url.pathname}`
  } catch {
    return config.url
  }
}

/**
 * The first and the innermost message of an error's `reason` / `cause` chain: `Cannot spawn MCP server: spawn
 * npx ENOENT`, `MCP HTTP request failed: connect ECONNREFUSED 127.0.0.1:1` (effect/ai's errors say what failed,
 * the platform's innermost error says why).
 */
const causeChain = (error: unknown): string => {
  const messageOf = (value: unknown): string | undefined =>
    typeof value === "object" && value !== null && "message" in value && typeof value.message === "string" && value.message !== ""
      ? value.message
      : undefined
  const first = messageOf(error) ?? String(error)
  let innermost = first
  let current: unknown = error
  for (let depth = 0; depth < 10 && typeof current === "object" && current !== null; depth++) {
    const next: unknown = "reason" in current && typeof current.reason === "object" ? current.reason : "cause" in current ? current.cause : undefined
    innermost = messageOf(next) ?? innermost
    current = next
  }
  return innermost === first || first.includes(innermost) ? first : `${first}: ${innermost}`
}

/** The last characters a server wrote on stderr kept for the message (the reason it gives before exiting). */
const stderrTail = 2_000

/**
 * The spawner in context, recording what a stdio server says on stderr (its last `stderrTail` characters) and its
 * exit code: effect/ai's transport reads and drops stderr, and reports only "closed stdout" for a server that
 * exits at once.
 */
const watchedSpawner = (spawner: ChildProcessSpawner.ChildProcessSpawner["Service"]) =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<number>()
    let stderr = ""
    const decoder = new TextDecoder()
    const service = ChildProcessSpawner.make((command) =>
      Effect.map(spawner.spawn(command), (handle) =>
        ChildProcessSpawner.makeHandle({
          ...handle,
          stderr: handle.stderr.pipe(
            Stream.tap((chunk) => Effect.sync(() => void (stderr = (stderr + decoder.decode(chunk, { stream: true })).slice(-stderrTail))))
          ),
          exitCode: handle.exitCode.pipe(Effect.tap((code) => Deferred.succeed(exited, code)))
        })))
    /** What the process left behind: its exit code (if it exits within a moment) and the end of its stderr. */
    const remains = Effect.map(
      Deferred.await(exited).pipe(Effect.timeoutOption(Duration.millis(500))),
      (code) => {
        const said = stderr.trim().split("\n").slice(-3).join(" / ").trim()
        return [
          ...(Option.isSome(code) ? [`it exited with code ${code.value}`] : []),
          ...(said !== "" ? [`its stderr: ${said.length > 300 ? `…${said.slice(-300)}` : said}`] : [])
        ].join("; ")
      }
    )
    return { service, remains }
  })

const connect = (
  server: string,
  config: ServerConfig,
  options: { readonly callTimeout: Duration.Duration; readonly connectTimeout: Duration.Duration; readonly prefix: boolean }
): Effect.Effect<ReadonlyArray<Tool.Tool>, McpError, Scope.Scope | ChildProcessSpawner.ChildProcessSpawner | HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const protocol = McpProtocol.v2025_11_25
    const watched = "command" in config ? yield* watchedSpawner(yield* ChildProcessSpawner.ChildProcessSpawner) : undefined
    const started = Effect.gen(function*() {
      const transport = "command" in config
        ? yield* McpClient.stdio({
          command: ChildProcess.make(config.command, config.args ?? [], {
            ...(config.env !== undefined ? { env: config.env, extendEnv: true } : {}),
            ...(config.cwd !== undefined ? { cwd: config.cwd } : {})
          }),
          protocol
        }).pipe(Effect.provideService(ChildProcessSpawner.ChildProcessSpawner, watched!.service))
        : yield* McpClient.http({ url: config.url, protocol, ...(config.headers !== undefined ? { headers: config.headers } : {}) })
      const client = yield* McpClient.make({ ...clientInfo, timeout: options.connectTimeout }).pipe(
        Effect.provideService(McpClient.Transport, transport)
      )
      const listed = yield* client.listTools({ timeout: options.connectTimeout })
      return listed.map((tool) => toTool(server, client, tool, toolName(server, tool.name, options.prefix), options.callTimeout))
    })
    // One line naming the server, what it is (command line or URL), and why it did not start.
    const failed = (why: string) =>
      Effect.flatMap(watched?.remains ?? Effect.succeed(""), (remains) =>
        Effect.fail(new McpError({ server, message: `MCP server "${server}" (${targetOf(config)}) ${why}${remains !== "" ? `; ${remains}` : ""}` })))
    return yield* started.pipe(
      Effect.timeoutOrElse({
        duration: options.connectTimeout,
        orElse: () => failed(`did not start within ${Duration.format(options.connectTimeout)}`)
      }),
      Effect.catch((error) => error._tag === "McpError" ? Effect.fail(error) : failed(`cannot start: ${causeChain(error)}`))
    )
  })

/**
 * The tools of every server of `config`, connected in the current `Scope` (servers start at once, in parallel,
 * and stop when the scope closes). Fails with `McpError` naming a server that cannot start, answer or list its
 * tools, and with `InvalidOptions` on a bad config.
 *
 * @since 0.2.0
 * @category tools
 */
export const tools = (
  config: Config,
  options: Options = {}
): Effect.Effect<
  ReadonlyArray<Tool.Tool>,
  McpError | InvalidOptions,
  Scope.Scope | ChildProcessSpawner.ChildProcessSpawner | HttpClient.HttpClient
> =>
  Effect.gen(function*() {
    const valid = yield* Opts.decode("Mcp", Config, config)
    yield* Opts.decode("Mcp", OptionsSchema, options)
    const servers = Object.entries(valid.mcpServers)
    const settings = {
      callTimeout: Duration.fromInputUnsafe(options.callTimeout ?? Duration.seconds(60)),
      connectTimeout: Duration.fromInputUnsafe(options.connectTimeout ?? Duration.seconds(30)),
      prefix: options.prefix ?? servers.length > 1
    }
    const lists = yield* Effect.forEach(servers, ([name, server]) => connect(name, server, settings), {
      concurrency: "unbounded"
    })
    return lists.flat()
  })
