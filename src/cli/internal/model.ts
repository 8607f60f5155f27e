/**
 * The model the commands talk to: flags first, then the environment, then the vLLM pool file.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Config, Effect, FileSystem, Layer, Option, Redacted, Schema } from "effect"
import type * as Model from "../../core/Model.js"
import type { InvalidOptions } from "../../core/AgentError.js"
import type * as ModelError from "../../core/ModelError.js"
import * as OpenAiCompatible from "../../providers/OpenAiCompatible.js"
import * as Vllm from "../../providers/Vllm.js"


/** No model server is configured anywhere. */
export class NoModelConfigured extends Schema.TaggedError<NoModelConfigured>()("NoModelConfigured", {
  message: Schema.String
}) {}

/** The model flags; each absent one is looked up in the environment. */
export interface ModelFlags {
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  readonly apiKey: Option.Option<string>
  /** The vLLM pool file (default `configs/vllm_actors.yaml`), used when there is no base URL. */
  readonly config: Option.Option<string>
}

/**
 * The model: `--base-url` / `--model` / `--api-key`, each else from `VALET_BASE_URL` / `VALET_MODEL` /
 * `VALET_API_KEY` (or `OPENAI_API_KEY`), through the OpenAI-compatible client (without a model name the server's
 * first model is used); with no base URL at all, the vLLM pool of `--config` or `configs/vllm_actors.yaml` when
 * that file exists.
 */
export const modelLayer = (
  flags: ModelFlags
): Layer.Layer<Model.Model, NoModelConfigured | Config.ConfigError | ModelError.ModelError | Vllm.VllmError | InvalidOptions> =>
  Layer.unwrap(Effect.gen(function*() {
    const base = Option.isSome(flags.baseUrl) ? flags.baseUrl : yield* Config.option(Config.NonEmptyString("VALET_BASE_URL"))
    if (Option.isNone(base)) {
      const configPath = Option.getOrElse(flags.config, () => Vllm.defaultConfigPath)
      const configured = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.exists(configPath)).pipe(
        Effect.provide(NodeFileSystem.layer),
        Effect.orElseSucceed(() => false)
      )
      if (configured) return Vllm.layerNode({ configPath }) as Layer.Layer<Model.Model, Vllm.VllmError>
      return yield* new NoModelConfigured({
        message: `no model server configured: pass --base-url (and --model), set VALET_BASE_URL (and VALET_MODEL), or write ${configPath}`
      })
    }
    const name = Option.isSome(flags.model) ? flags.model : yield* Config.option(Config.NonEmptyString("VALET_MODEL"))
    const key = Option.isSome(flags.apiKey)
      ? Option.some(Redacted.make(flags.apiKey.value))
      : yield* Config.option(Config.Redacted("VALET_API_KEY").pipe(Config.orElse(() => Config.Redacted("OPENAI_API_KEY"))))
    const options = { baseUrl: base.value, apiKey: Option.getOrUndefined(key) }
    if (Option.isSome(name)) return OpenAiCompatible.layerNode({ ...options, model: name.value }) as Layer.Layer<Model.Model>
    // The probe client lives only as long as its HTTP client: ask it for the models inside that scope.
    const { apiBase, models } = yield* OpenAiCompatible.make({ ...options, model: "" }).pipe(
      Effect.flatMap((probe) => Effect.map(probe.listModels, (models) => ({ apiBase: probe.apiBase, models }))),
      Effect.provide(NodeHttpClient.layerUndici)
    )
    if (models.length === 0) {
      return yield* new NoModelConfigured({ message: `${apiBase}/models lists no model: pass --model or set VALET_MODEL` })
    }
    return OpenAiCompatible.layerNode({ ...options, model: models[0]!.id }) as Layer.Layer<Model.Model>
  }))
