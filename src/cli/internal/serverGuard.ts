/**
 * The guard of a server a command starts (`valet serve`, `valet mcp --http`), from the config's `server:` section:
 * the token named by `tokenEnv` (read from the environment, kept `Redacted`), the body cap and the hosts it answers
 * to. Both commands read it here, so the two servers cannot drift apart.
 */
import { Config, Effect, Redacted } from "effect"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as Server from "../../serve/Server.js"

/** The shortest token a config may name: a guessable token is no lock. */
export const minTokenLength = 16

/** What `Server.guard` needs, for a server listening on `host`. */
export interface GuardSettings {
  readonly token?: Redacted.Redacted<string> | undefined
  readonly maxBodyBytes: number
  readonly allowedHosts: ReadonlyArray<string> | "*"
}

/**
 * The guard settings of `loaded`'s server section for a server on `host`; a `tokenEnv` that is not set, or whose
 * token is short or padded, is an error.
 */
export const guardSettings = (loaded: AgentConfig.Loaded, host: string): Effect.Effect<GuardSettings, AgentConfig.ConfigFileError> =>
  Effect.gen(function*() {
    const settings = loaded.config.server
    const token = settings.tokenEnv === undefined
      ? undefined
      : yield* Config.Redacted(settings.tokenEnv).pipe(
        Effect.mapError(() =>
          new AgentConfig.ConfigFileError({
            path: loaded.path,
            field: "server.tokenEnv",
            detail: `names ${settings.tokenEnv}, which is not set in the environment`
          })
        )
      )
    if (token !== undefined) {
      const value = Redacted.value(token)
      const problem = value.trim() !== value
        ? "starts or ends with white space"
        : value.length < minTokenLength
        ? `is ${value.length} characters long, fewer than ${minTokenLength}`
        : undefined
      if (problem !== undefined) {
        return yield* new AgentConfig.ConfigFileError({
          path: loaded.path,
          field: "server.tokenEnv",
          detail: `names ${settings.tokenEnv}, whose token ${problem}: use a random one (openssl rand -hex 32)`
        })
      }
    }
    return {
      ...(token !== undefined ? { token } : {}),
      maxBodyBytes: settings.maxBodyBytes,
      allowedHosts: settings.allowedHosts ?? Server.defaultAllowedHosts(host) ?? "*"
    }
  })

/** A warning for a server that anyone who can reach it may use: no token, on an address other machines reach. */
export const exposureWarning = (command: string, settings: GuardSettings, host: string): string | undefined =>
  settings.token === undefined && !/^(localhost|127\.[0-9.]+|::1|\[::1\])$/i.test(host.trim())
    ? `${command}: warning: listening on ${host} without a token: anyone who reaches it can run the agents (set server.tokenEnv)`
    : undefined
