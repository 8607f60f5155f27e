/**
 * The guard of a server a command starts (`valet serve`, `valet mcp --http`), from the config's `server:` section:
 * the token named by `tokenEnv` (read from the environment, kept `Redacted`), the body cap and the hosts it answers
 * to. Both commands read it here, so the two servers cannot drift apart.
 */
import { Config, Effect, type Redacted } from "effect"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as Server from "../../serve/Server.js"

/** What `Server.guard` needs, for a server listening on `host`. */
export interface GuardSettings {
  readonly token?: Redacted.Redacted<string> | undefined
  readonly maxBodyBytes: number
  readonly allowedHosts: ReadonlyArray<string> | "*"
}

/** The guard settings of `loaded`'s server section for a server on `host`; a `tokenEnv` that is not set is an error. */
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
    return {
      ...(token !== undefined ? { token } : {}),
      maxBodyBytes: settings.maxBodyBytes,
      allowedHosts: settings.allowedHosts ?? Server.defaultAllowedHosts(host) ?? "*"
    }
  })
