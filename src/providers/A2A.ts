/**
 * A remote A2A 1.0 agent as a valet agent: `A2A.agent(url, { name })` is an `Agent` like any, so a `Supervisor`
 * worker, a `Router` route, a `Swarm` member or a `MultiAgentDebate` debater may be an agent served elsewhere (by
 * valet's own `A2aApi`, or any A2A server speaking the JSON-RPC binding).
 *
 * Each run sends its task as one message (`SendStreamingMessage`, with `A2A-Version: 1.0`) and streams the task's
 * artifact text as the run's text: `ModelCalled` / `TextDelta` / `ModelReplied` per exchange, with zero usage (a
 * remote agent reports no tokens: a budget bounds it by `maxCalls`, not by tokens). The remote task's status lines are
 * `Progress` events (`a2a.status`). When the task asks for input (`TASK_STATE_INPUT_REQUIRED`), the run asks
 * (`Architecture.ask`: a `HumanLoop`, or the server's people) and sends the answer on the same task. A dropped stream is
 * resumed with `SubscribeToTask`; interrupting the run cancels the remote task (`CancelTask`). Every failure is a
 * `RemoteAgentFailed` naming the URL, the code and the remote's one line: a 401, a card with no JSON-RPC 1.x
 * interface, a failed or rejected task.
 *
 * `url` is the agent's card (a URL ending in `.json`) or a base URL: the card is looked for under its path
 * (`<url>/.well-known/agent-card.json`, which is where valet serves each agent's card: `…/a2a/<agent>`), then at
 * its origin's root.
 *
 * The token and `headers` go only to the card's origin (scheme, host and port): an endpoint the card names on
 * another origin gets neither unless `allowedOrigins` lists it, and an https card naming an http endpoint is refused.
 * Redirects are not followed (a 3xx is a `RemoteAgentFailed` `http` naming where it pointed): give the URL it names.
 * `agentWith`'s client is yours: have it follow no redirects either. Every body is read to a cap (16 MiB; 64 KiB of
 * an error), each request has a default time limit, and a stream silent for too long is resumed.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { A2A, Agent, Supervisor } from "valet"
 *
 * // An agent valet serves elsewhere (`valet serve`), behind its token.
 * const researcher = A2A.agent("https://agents.example.com/a2a/researcher", {
 *   name: "researcher",
 *   description: "Finds sources and summarizes them.",
 *   token: process.env.RESEARCHER_TOKEN
 * })
 * const lead = Agent.make({ name: "lead", instructions: "Delegate research.", architecture: Supervisor.makeUnsafe({ workers: [researcher] }) })
 * ```
 *
 * @since 0.2.0
 */
import { Effect, type Duration, type Redacted, type Schedule } from "effect"
import { HttpClient } from "effect/http"
import type { RemoteAgentFailed } from "../core/AgentError.js"
import * as Agent from "../core/Agent.js"
import * as Architecture from "./internal/a2a/architecture.js"
import * as Client from "./internal/a2a/client.js"
import type * as Wire from "./internal/a2a/wire.js"

/**
 * Options of `agent`.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** The agent's name in valet (what a supervisor or router calls it by). */
  readonly name: string
  /** What the agent does: its instructions in valet, which supervisors and routers show to choose it. */
  readonly description?: string | undefined
  /** Sent as `Authorization: Bearer <token>`. */
  readonly token?: Redacted.Redacted<string> | string | undefined
  /** More headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * Origins (`https://gateway.example`) besides the card's own that may receive `token` and `headers`. A card whose
   * JSON-RPC endpoint is on another origin gets neither unless its origin is listed; an https card naming an http
   * endpoint is refused (`RemoteAgentFailed` `malformed`).
   */
  readonly allowedOrigins?: ReadonlyArray<string> | undefined
  /** How a dropped stream is resumed with `SubscribeToTask` (default: exponential from 200 ms, 5 tries). */
  readonly resubscribe?: Schedule.Schedule<unknown, unknown> | undefined
  /** How long cancelling the remote task may take when the run is interrupted (default 5 s). */
  readonly cancelTimeout?: Duration.Input | undefined
  /**
   * How often a task is asked for (`GetTask`) while it works, when the card says it does not stream
   * (`capabilities.streaming: false`: the message then goes with `SendMessage`). Default 1 s.
   */
  readonly poll?: Duration.Input | undefined
  /**
   * How long one exchange (the message until its task ends or asks for input) may take: past it the remote task is
   * cancelled and the run fails with `RemoteAgentFailed` `timeout`. It bounds the card read too. Default: no limit
   * besides `requestTimeout` and `idleTimeout` (a budget's `maxDuration`, or a supervisor's `delegationTimeout`, still
   * stop it).
   */
  readonly timeout?: Duration.Input | undefined
  /**
   * How long one request may wait for its answer, body included: the card, `GetTask`, `CancelTask`, a stream until
   * it starts. Past it: `RemoteAgentFailed` `timeout`. Default 30 s.
   */
  readonly requestTimeout?: Duration.Input | undefined
  /**
   * How long a task's stream may go without an event (keep-alive comments do not count): past it the stream is lost
   * and resumed with `SubscribeToTask` (`resubscribe`), then fails `stream_lost`. Default 5 minutes.
   */
  readonly idleTimeout?: Duration.Input | undefined
}

/**
 * An A2A 1.0 agent card, as valet reads it.
 *
 * @since 0.2.0
 * @category models
 */
export type AgentCard = Wire.AgentCard

const architectureOptions = (url: string, options: Options): Architecture.Options => ({
  url,
  token: options.token,
  headers: options.headers,
  allowedOrigins: options.allowedOrigins,
  resubscribe: options.resubscribe,
  cancelTimeout: options.cancelTimeout,
  poll: options.poll,
  timeout: options.timeout,
  requestTimeout: options.requestTimeout,
  idleTimeout: options.idleTimeout
})

/**
 * The remote A2A agent at `url` (its card, or a base URL the card is under) as a valet agent, over `fetch`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const agent = (url: string, options: Options): Agent.Agent<never> =>
  Agent.make({ name: options.name, instructions: options.description ?? "", architecture: Architecture.makeFetch(architectureOptions(url, options)) })

/**
 * `agent` over the `HttpClient` in context (a client of your own: a proxy, other timeouts, a test's).
 *
 * @since 0.2.0
 * @category constructors
 */
export const agentWith = (url: string, options: Options): Agent.Agent<HttpClient.HttpClient> =>
  Agent.make({ name: options.name, instructions: options.description ?? "", architecture: Architecture.make(architectureOptions(url, options)) })

/**
 * Reads the agent card at `url` (or under it, as `agent` does), checking that it offers a JSON-RPC 1.x interface.
 *
 * @since 0.2.0
 * @category cards
 */
export const card = (
  url: string,
  options: Pick<Options, "token" | "headers" | "allowedOrigins" | "requestTimeout"> = {}
): Effect.Effect<AgentCard, RemoteAgentFailed> =>
  Architecture.withFetch(
    Effect.flatMap(HttpClient.HttpClient, (http) => Effect.map(Client.card(http, { url, token: options.token, headers: options.headers, allowedOrigins: options.allowedOrigins, requestTimeout: options.requestTimeout }), (resolved) => resolved.card))
  )

/**
 * A card's name as a valet agent's name: runs of other characters become one `_`, cut to 48 characters (a card's
 * `"Currency Agent"` is `Currency_Agent`); `"remote"` when nothing of it is left.
 *
 * @since 0.2.0
 * @category cards
 */
export const agentNameOf = (cardName: string): string => {
  const cleaned = cardName.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_+|_+$/g, "").slice(0, 48).replace(/_+$/, "")
  return cleaned === "" ? "remote" : cleaned
}

/**
 * The remote A2A agent at `url` as a valet agent named and described by its card (`agentNameOf(card.name)`, the
 * card's description), over `fetch`. `options.name` and `options.description` take precedence.
 *
 * @since 0.2.0
 * @category constructors
 */
export const discover = (
  url: string,
  options: Partial<Options> = {}
): Effect.Effect<Agent.Agent<never>, RemoteAgentFailed> =>
  Effect.map(card(url, options), (found) =>
    agent(url, { ...options, name: options.name ?? agentNameOf(found.name), description: options.description ?? found.description }))
