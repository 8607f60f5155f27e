/**
 * The model the examples run on: the OpenAI-compatible server at `VALET_BASE_URL` when it is set (with
 * `VALET_MODEL`, else the first model the server lists, and `VALET_API_KEY` / `OPENAI_API_KEY`), otherwise
 * `ScriptedModel` answering from the example's script. The note says which, and is printed first.
 */
import { Config, Effect, Layer, Option } from "effect"
import type { Model } from "../../src/index.js"
import { OpenAiCompatible, ScriptedModel } from "../../src/index.js"

/** The model layer for an example, and one line saying which model that is. */
export const demoModel = (script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const baseUrl = yield* Config.option(Config.String("VALET_BASE_URL"))
    if (Option.isNone(baseUrl)) {
      const layer: Layer.Layer<Model.Model> = Layer.orDie(ScriptedModel.layer(script))
      return { layer, note: "no model server configured (VALET_BASE_URL is unset): using ScriptedModel" }
    }
    const model = yield* Config.option(Config.String("VALET_MODEL"))
    // A server that is down or misconfigured ends the example with its typed error, as a defect.
    const layer: Layer.Layer<Model.Model> = Layer.orDie(OpenAiCompatible.layerConfigNode())
    const which = Option.isSome(model) ? model.value : "the first model it lists"
    return { layer, note: `using the OpenAI-compatible server at ${baseUrl.value} (${which})` }
  })
