/**
 * The catalog of valet's architectures: every `Architecture.define` declaration of `architectures/all.ts`, found by
 * its one name (`self_refine`) or by a name valet 0.x also read (`self-refine`, `debate`). `valet.yaml`'s
 * `architecture:`, `valet run --architecture` and the README's option tables read it, so an architecture added there
 * is offered everywhere.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Catalog } from "valet"
 *
 * for (const definition of Catalog.definitions) console.log(`${definition.name}: ${definition.description}`)
 * const found = Catalog.find("self-refine") // the deprecated spelling of self_refine
 * const architecture = found === undefined ? undefined : Effect.runSync(found.definition.build({ maxRounds: 2 }))
 * ```
 *
 * @since 0.2.0
 */
import type * as Architecture from "../core/Architecture.js"
import * as All from "./all.js"

/**
 * The declarations, in the order of their names.
 *
 * @since 0.2.0
 * @category catalog
 */
export const definitions: ReadonlyArray<Architecture.AnyDefinition> = Object.values(All)
  .map((module): Architecture.AnyDefinition => module.definition)
  .sort((a, b) => a.name.localeCompare(b.name))

/**
 * The names, as `valet.yaml` and `--architecture` take them.
 *
 * @since 0.2.0
 * @category catalog
 */
export const names: ReadonlyArray<string> = definitions.map((definition) => definition.name)

/**
 * What `find` answers: the declaration, and the deprecated name it was found by (to be said once), if any.
 *
 * @since 0.2.0
 * @category catalog
 */
export interface Found {
  readonly definition: Architecture.AnyDefinition
  readonly deprecatedName: string | undefined
}

const byName = new Map<string, Found>()
for (const definition of definitions) {
  byName.set(definition.name, { definition, deprecatedName: undefined })
  // A short name (`deep`) is as good as the name: the issue's own spelling of `--architecture deep`.
  for (const short of definition.shortNames) if (!byName.has(short)) byName.set(short, { definition, deprecatedName: undefined })
  // valet 0.x spelled names with dashes in valet.yaml and the CLI.
  for (const alias of [definition.name.replace(/_/g, "-"), ...definition.aliases]) {
    if (alias !== definition.name && !byName.has(alias)) byName.set(alias, { definition, deprecatedName: alias })
  }
}

/**
 * The declaration of `name` (its one name, or a deprecated one), or `undefined`.
 *
 * @since 0.2.0
 * @category catalog
 */
export const find = (name: string): Found | undefined => byName.get(name)

/**
 * Every name `find` knows, deprecated ones included (what a config file may still say).
 *
 * @since 0.2.0
 * @category catalog
 */
export const knownNames: ReadonlyArray<string> = [...byName.keys()]
