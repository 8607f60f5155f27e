/**
 * The architectures `valet run` and `valet replay` can run on a prompt: every architecture of the `Catalog` whose
 * defaults make a whole architecture (no option without a default: a Supervisor needs its workers, a Router its
 * routes), by its one name, with its one line for `--help`. `--architecture` also takes the names valet 0.x took
 * (`self-refine`, `debate`), said once. An architecture added to the catalog is offered here without a line of its own.
 */
import { Effect, Exit } from "effect"
import * as Catalog from "../../architectures/Catalog.js"
import type * as Architecture from "../../core/Architecture.js"
import type * as Model from "../../core/Model.js"

/** A runnable architecture and one line about it for `--help`. */
export interface Entry {
  readonly description: string
  readonly architecture: Architecture.Architecture<Model.Model>
}

const runnable = Catalog.definitions.flatMap((definition): ReadonlyArray<readonly [string, Entry]> => {
  const built = Effect.runSyncExit(definition.build({}))
  return Exit.isSuccess(built)
    ? [[definition.name, { description: definition.description, architecture: built.value as Architecture.Architecture<Model.Model> }]]
    : []
})

/** The table, by the name given to `--architecture`. */
export const architectures: Readonly<Record<string, Entry>> = Object.fromEntries(runnable)

/** The names, `react` first. */
export const names: ReadonlyArray<string> = ["react", ...runnable.map(([name]) => name).filter((name) => name !== "react")]

/** Every name `--architecture` takes: the names, and the deprecated names of those architectures. */
export const acceptedNames: ReadonlyArray<string> = Catalog.knownNames.filter((name) => names.includes(Catalog.find(name)!.definition.name))

/** The entry of a name `--architecture` took (its one name, or a deprecated one: said once). */
export const entryOf = (name: string): Effect.Effect<Entry> =>
  Effect.suspend(() => {
    const found = Catalog.find(name)!
    const entry = architectures[found.definition.name]!
    return found.deprecatedName === undefined || said.has(name)
      ? Effect.succeed(entry)
      : Effect.as(
        Effect.sync(() => void said.add(name)).pipe(
          Effect.andThen(Effect.logWarning(`--architecture ${name} is deprecated, use ${found.definition.name} (valet 0.x reads both)`))
        ),
        entry
      )
  })

const said = new Set<string>()
