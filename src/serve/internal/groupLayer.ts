/**
 * What the `layerFor` of each of valet's `HttpApi` groups shares: a user's API without the group is a programming
 * error, reported when the layer is built (a defect naming what to add), not thrown when the layer is made.
 */
import { Effect, Layer } from "effect"

/** `layer()` when `api` holds the group `name`; else a layer that dies, saying to add `<module>.group`. */
export const requireGroup = <A, E, R>(
  module: string,
  name: string,
  api: { readonly identifier: string; readonly groups: object },
  layer: () => Layer.Layer<A, E, R>
): Layer.Layer<A, E, R> =>
  name in api.groups
    ? layer()
    : (Layer.effectDiscard(Effect.die(
      new Error(`${module}.layerFor: the API ${JSON.stringify(api.identifier)} has no ${JSON.stringify(name)} group: add ${module}.group to it`)
    )) as unknown as Layer.Layer<A, E, R>)
