/**
 * The schema of `valet.yaml`: the agents a server offers (architecture and options, model, tools, budget caps),
 * the models and MCP servers they use, and the server's limits. Keys are camelCase, as in the `mcpServers` config
 * of Claude Desktop, Cursor and VS Code (whose shape `mcpServers` takes as it is). Secrets are never written in the
 * file: `apiKeyEnv` / `tokenEnv` name the environment variables holding them.
 */
import { Effect, Schema } from "effect"
import * as Budget from "../../../core/Budget.js"
import { HttpUrl, WireDuration } from "../../../core/internal/decode.js"
import * as Mcp from "../../../providers/Mcp.js"
import * as Approvals from "../../../core/internal/approvalPolicy.js"
import * as Guardrails from "./guardrails.js"
import { EnvName, ModelChoice, NamedModels } from "./models.js"
import { architectureNames, canonicalNames } from "./architectures.js"

/**
 * A whole number in `[min, max]`, one rule so the message says both ends (`an integer 0-65535`). The default `max`
 * is the largest integer a number holds exactly: beyond it `1e20` would pass as an integer and then break where it
 * is used (a body limit of 1e20 bytes throws on every request).
 */
const IntBetween = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  Schema.Number.check(
    Schema.makeFilter(
      (n: number) =>
        max === Number.MAX_SAFE_INTEGER && Number.isInteger(n) && n > max
          ? `must be at most ${max}`
          : Number.isInteger(n) && n >= min && n <= max,
      { expected: max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer ${min}-${max}` }
    )
  )
const IntAtLeast = (min: number) => IntBetween(min)

const orDefault = <S extends Schema.Codec<number, number>>(schema: S, value: number) =>
  schema.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(value)))



// The model schemas are in `models.ts` (a guardrail's judge names or declares a model too); re-exported here.
export { FallbackSpec, ModelChoice, ModelSpec, OpenAiModel, ScriptedModelSpec, ScriptedTurn, VllmModel } from "./models.js"

/**
 * A remote A2A 1.0 agent (`A2A.agent`): an agent of the file that runs elsewhere, usable by name like any (a
 * supervisor's worker, a router's route, a debater).
 */
export const A2aAgentSpec = Schema.Struct({
  /** Its agent card (a URL ending in `.json`) or the base URL the card is under (valet serves one at `…/a2a/<agent>`). */
  url: HttpUrl,
  /** The environment variable holding its bearer token. */
  tokenEnv: Schema.optional(EnvName),
  /** More headers sent with every request. */
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  /** Origins (`https://gateway.example`) besides the card's own that may receive the token and headers. */
  allowedOrigins: Schema.optional(Schema.Array(HttpUrl)),
  /** How long one exchange (a message until its task ends or asks for input) may take (`"5 minutes"`, or ms). */
  timeout: Schema.optional(WireDuration),
  /** How long one request may wait for its answer (`"30 seconds"`, or ms; default 30 s). */
  requestTimeout: Schema.optional(WireDuration),
  /** How long a task's stream may go without an event before it is resumed (default 5 minutes). */
  idleTimeout: Schema.optional(WireDuration)
})
export type A2aAgentSpec = typeof A2aAgentSpec.Type

/** One agent. */
export const AgentSpec = Schema.Struct({
  /** One line about the agent: its MCP tool description, shown by `GET /agents`. */
  description: Schema.optional(Schema.String),
  /** The architecture's name (`react` by default); the names valet 0.x took (`self-refine`, `debate`) still work. */
  architecture: Schema.String.check(Schema.makeFilter((name: string) => architectureNames.includes(name), {
    expected: `an architecture's name: ${canonicalNames.join(", ")}`
  })).pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed("react"))),
  /** The system message (required, unless the agent is a remote `a2a` one). */
  instructions: Schema.optional(Schema.String),
  /** A remote A2A agent instead of one that runs here: then only `description`, `budget` and `guardrails` go with it. */
  a2a: Schema.optional(A2aAgentSpec),
  /** The architecture's options; options that hold agents (`critic`, `workers`…) name other agents of the file. */
  options: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
  /** MCP servers of `mcpServers` whose tools the agent gets. */
  tools: Schema.optional(Schema.Array(Schema.String)),
  maxTurns: Schema.optional(IntAtLeast(1)),
  /** The agent's own model (or a fallback list, or the name of one of `models`); else the file's `model`. */
  model: Schema.optional(ModelChoice),
  /** Caps on every run of the agent; a run's own budget may only lower them. */
  budget: Schema.optional(Budget.Limits),
  /**
   * Which of the agent's tools' calls wait for a person, by tool name: `true` (every call) or `{ when }` (an
   * argument predicate; see `core/internal/approvalPolicy.ts`). The names are checked against the agent's tools when it is built.
   */
  approvals: Schema.optional(Approvals.Policy),
  /** How long a call of `approvals` waits before it is rejected (`"10 minutes"`, or milliseconds); default: no limit. */
  approvalTimeout: Schema.optional(WireDuration),
  /** Input, output and tool guardrails: the built-ins by name, with their options (see `guardrails.ts`). */
  guardrails: Schema.optional(Guardrails.Settings),
  /**
   * A deep_agent's files: a directory (relative to the file) copied into a fresh sandbox workspace for each run, so
   * concurrent runs never write one directory and the directory itself is never changed; commands run in bubblewrap
   * (plain processes only with `VALET_SANDBOX_ISOLATION=process`). Without it each run gets an empty workspace in memory.
   */
  workspace: Schema.optional(Schema.String)
})
export type AgentSpec = typeof AgentSpec.Type

/** How MCP servers are called (see `Mcp.Options`). */
export const McpSettings = Schema.Struct({
  /** How long one tool call may take (`"60 seconds"`, or milliseconds). */
  callTimeout: Schema.optional(WireDuration),
  /** How long starting or connecting to a server may take (`"30 seconds"`, or milliseconds). */
  connectTimeout: Schema.optional(WireDuration),
  /** @deprecated `callTimeout` (valet 0.x reads both): milliseconds. */
  callTimeoutMs: Schema.optional(IntAtLeast(1)),
  /** @deprecated `connectTimeout` (valet 0.x reads both): milliseconds. */
  connectTimeoutMs: Schema.optional(IntAtLeast(1)),
  /** Tool names `<server>__<tool>` (default false). */
  prefix: Schema.optional(Schema.Boolean)
})

/**
 * The A2A endpoints of `valet serve` (`/a2a/<agent>`, the agent cards): on unless `enabled: false`; the agent of the
 * root card `/.well-known/agent-card.json` (`defaultAgent`, default the first); the URL clients reach the server at
 * when a proxy is in front (`publicUrl`: the cards' endpoint URLs start with it; default `http://<Host>`).
 */
export const A2aSettings = Schema.Struct({
  enabled: Schema.Boolean.pipe(Schema.withDecodingDefaultTypeKey(Effect.succeed(true))),
  defaultAgent: Schema.optional(Schema.String),
  publicUrl: Schema.optional(HttpUrl)
})
export type A2aSettings = typeof A2aSettings.Type

/** The server's limits (`valet serve`; `valet mcp --http` uses host and port). */
export const ServerSettings = Schema.Struct({
  // Empty is refused: Node listens on every interface when given "" as the host.
  host: Schema.String.check(Schema.makeFilter((host: string) => host.trim() !== "", { expected: "a host name or IP address" })).pipe(
    Schema.withDecodingDefaultTypeKey(Effect.succeed("127.0.0.1"))
  ),
  /** 0 picks a free port. */
  port: orDefault(IntBetween(0, 65535), 8787),
  /** Runs at once; more get 429 with Retry-After (`valet mcp`: more tool calls wait). */
  maxConcurrentRuns: orDefault(IntAtLeast(1), 16),
  /**
   * Streams following runs at once (`GET /runs/:id/events`, a chat continued after approvals, A2A's `SubscribeToTask`
   * and continuations); more get 429 with Retry-After. 256: well above what the default 16 runs' watchers keep open,
   * yet a bound on the sockets and fibers one token holder can pin.
   */
  maxEventStreams: orDefault(IntAtLeast(1), 256),
  /** The largest request body, in bytes (413 beyond; `valet mcp` on stdio: the largest message). */
  maxBodyBytes: orDefault(IntAtLeast(1), 1_048_576),
  /** The environment variable holding the bearer token every request but `GET /health` must carry. */
  tokenEnv: Schema.optional(EnvName),
  /**
   * The host names clients use (the `Host` header; others get 421, browser pages of other origins 403), or `"*"`
   * for any. Default: the loopback names and the address listened on; any name on a wildcard address.
   */
  allowedHosts: Schema.optional(Schema.Union([
    Schema.Literal("*"),
    Schema.Array(Schema.String.check(Schema.makeFilter((host: string) => /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)$/.test(host), { expected: "a host name without port or scheme" })))
  ])),
  /** Finished runs kept for `GET /runs/:id` and replay, at most this many… */
  keepFinishedRuns: orDefault(IntAtLeast(0), 100),
  /** …and for at most this long (`"1 hour"`, or milliseconds; default one hour). */
  keepFinished: Schema.optional(WireDuration),
  /** @deprecated `keepFinished` (valet 0.x reads both): milliseconds. */
  keepFinishedMs: Schema.optional(IntAtLeast(0)),
  /** A2A (`A2aSettings`). */
  a2a: A2aSettings.pipe(Schema.withDecodingDefaultKey(Effect.succeed({})))
})
export type ServerSettings = typeof ServerSettings.Type

/**
 * Where `valet serve` keeps threads (`POST /threads/:threadId/runs`, the chat route's chat ids): `memory` (lost when
 * the server stops), `sqlite` (`path`, relative to the file; default `data/threads.sqlite3`) or `postgres` (`urlEnv`
 * names the environment variable holding its URL: a URL holds a password, so it is never written here).
 */
export const ThreadsSettings = Schema.Struct({
  store: Schema.Literals(["memory", "sqlite", "postgres"]),
  /** The SQLite file (`store: sqlite` only). */
  path: Schema.optional(Schema.String.check(Schema.makeFilter((path: string) => path.trim() !== "", { expected: "a file path" }))),
  /** The environment variable holding the PostgreSQL URL (`store: postgres`, which needs it). */
  urlEnv: Schema.optional(EnvName),
  /** How many of a thread's last messages a turn is given (default 100). */
  historyLimit: Schema.optional(IntBetween(1, 1000)),
  /** When another turn holds the thread: `fail` (409 ThreadBusy, the default) or `wait` for it. */
  onBusy: Schema.optional(Schema.Literals(["fail", "wait"])),
  /**
   * A working memory: a text document per `thread` (the default) or per `owner`, shown to the model each turn and
   * replaced by it through the update_working_memory tool; `template` is the document until one is written.
   */
  workingMemory: Schema.optional(Schema.Struct({
    scope: Schema.optional(Schema.Literals(["thread", "owner"])),
    template: Schema.optional(Schema.String)
  })),
  /**
   * Semantic recall: each turn's messages embedded (an OpenAI-compatible `/v1/embeddings` server), and the owner's
   * past messages nearest the task shown to the model.
   */
  recall: Schema.optional(Schema.Struct({
    embedding: Schema.Struct({
      baseUrl: HttpUrl,
      model: Schema.String.check(Schema.makeFilter((name: string) => name.trim() !== "", { expected: "a model name" })),
      apiKeyEnv: Schema.optional(EnvName),
      dimensions: Schema.optional(IntBetween(1, 65_536))
    }),
    topK: Schema.optional(IntBetween(1, 100)),
    minScore: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: -1, maximum: 1 }, { expected: "a number from -1 to 1" }))),
    scope: Schema.optional(Schema.Literals(["owner", "thread"])),
    onError: Schema.optional(Schema.Literals(["skip", "fail"]))
  }))
})
export type ThreadsSettings = typeof ThreadsSettings.Type

/** The whole file. */
export const ConfigFile = Schema.Struct({
  /** The model (or a fallback list) of every agent that has none of its own. */
  model: Schema.optional(ModelChoice),
  /**
   * Models by name, for an agent's `model`, the file's or a judge guardrail's to name (`model: small`): one client
   * (and one chain's circuit breakers) however many name it.
   */
  models: Schema.optional(NamedModels),
  /**
   * Guardrails by name (`no_pii: { redact: { mode: trip } }`): an agent's `guardrails` lists may name them, and so
   * may a run's request (`POST /runs` `guardrails`), which names only these and the bounded built-ins.
   */
  guardrails: Schema.optional(Guardrails.Named),
  mcpServers: Schema.optional(Schema.Record(Schema.String, Mcp.ServerConfig)),
  mcp: Schema.optional(McpSettings),
  // Names are checked after decoding: a bad key of a Record would read as "not a known key".
  agents: Schema.Record(Schema.String, AgentSpec).check(
    Schema.makeFilter((agents: Readonly<Record<string, unknown>>) => Object.keys(agents).length > 0 || "needs at least one agent")
  ),
  server: ServerSettings.pipe(Schema.withDecodingDefaultKey(Effect.succeed({}))),
  /** The thread store; without it, the server keeps no threads (its thread routes answer 501). */
  threads: Schema.optional(ThreadsSettings)
})
export type ConfigFile = typeof ConfigFile.Type
