/**
 * The model the examples run on. With `VALET_BASE_URL` set they are meant to use a real OpenAI-compatible
 * server; that client is not part of valet yet, so today every example runs on `ScriptedModel` and says why.
 */
import { Config, Effect, Layer, Option } from "effect"
import type { Model } from "../../src/index.js"
import { ScriptedModel } from "../../src/index.js"

/** The model layer for an example, and one line saying which model that is. */
export const demoModel = (script: ScriptedModel.Script) =>
  Effect.gen(function*() {
    const baseUrl = yield* Config.option(Config.string("VALET_BASE_URL"))
    const note = Option.isSome(baseUrl)
      ? `VALET_BASE_URL is set (${baseUrl.value}), but valet has no OpenAI-compatible client yet: using ScriptedModel`
      : "no model server configured (VALET_BASE_URL is unset): using ScriptedModel"
    const layer: Layer.Layer<Model.Model> = Layer.orDie(ScriptedModel.layer(script))
    return { layer, note }
  })
