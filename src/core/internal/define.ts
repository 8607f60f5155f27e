/**
 * `Architecture.define`'s machinery: one declaration (name, description, options schema with defaults, where the
 * options hold agents, deprecated option names, program) gives `make` / `makeUnsafe`, the defaults' architecture, and
 * what the registries (`valet.yaml`, the CLI, the README's tables) read. Options are checked in one place, with one
 * message shape (`SelfRefine: maxRounds must be an integer >= 1, got 0`), and a deprecated name is renamed to its
 * current one (said once per process) before the check.
 */
import { Effect, Schema } from "effect"
import type { AgentError, InvalidOptions } from "../AgentError.js"
import type * as Agent from "../Agent.js"
import type * as Tool from "../Tool.js"
import * as Decode from "./decode.js"
import * as Runtime from "./runtime.js"
import { deprecatedPlaceholders, placeholders } from "./template.js"

/** The fields of an options schema. */
export type Fields = Schema.Struct.Fields

/** The services an options value needs: those of every agent and architecture it holds, however deep. */
export type RequirementsOf<O> = O extends Agent.Agent<infer R> ? R
  : O extends Runtime.Architecture<infer R> ? R
  : O extends (...args: ReadonlyArray<never>) => unknown ? never
  : O extends ReadonlyArray<infer E> ? RequirementsOf<E>
  : O extends object ? { readonly [K in keyof O]-?: RequirementsOf<O[K]> }[keyof O]
  : never

/**
 * The options as a program reads them: the agents and architectures they hold need nothing here — their services
 * are counted where `make` is called (`RequirementsOf`), not in the program's own. Tuples stay tuples (a
 * `Duration.Input` may be `[seconds, nanos]`).
 */
export type Checked<T> = T extends Agent.Agent<unknown> ? Agent.Agent<never>
  : T extends Runtime.Architecture<unknown> ? Runtime.Architecture<never>
  : T extends (...args: ReadonlyArray<never>) => unknown ? T
  : T extends ReadonlyArray<unknown> ? { readonly [K in keyof T]: Checked<T[K]> }
  : T extends object ? { readonly [K in keyof T]: Checked<T[K]> }
  : T

/** A deprecated option: its current name, and how an old value becomes a current one (when it changed shape). */
export type Deprecation = string | { readonly to: string; readonly map: (value: unknown) => unknown }

/** What `Architecture.define` takes. */
export interface DefineOptions<Fields extends Schema.Struct.Fields, D extends Readonly<Record<string, Deprecation>>, R> {
  /** The one name: `RunStarted.architecture`, `valet.yaml`'s `architecture:`, `--architecture`, step prefixes. */
  readonly name: string
  /** The module's name, for messages: `SelfRefine: maxRounds must be …`. */
  readonly title: string
  /** One line about it (`valet run --help`, `GET /agents`, the README). */
  readonly description: string
  /** The options, each with its default (`Architecture.option.*`); documented with `Schema` annotations. */
  readonly options: Fields
  /** Where the options hold agents: `"critic"`, `"workers.*"`, `"routes.*.agent"` (`valet.yaml` names agents there). */
  readonly agentOptions?: ReadonlyArray<string> | undefined
  /** Options that hold a path (`"skills"`): `valet.yaml` resolves a relative one against the file's folder, not the cwd. */
  readonly pathOptions?: ReadonlyArray<string> | undefined
  /** Old option names still read (`{ rounds: "maxRounds" }`): renamed before the check, said once per process. */
  readonly deprecated?: D | undefined
  /** Other names valet 0.x knew the architecture by (`debate`), still found by `Catalog.find`. Dashed names are found anyway. */
  readonly aliases?: ReadonlyArray<string> | undefined
  /** Shorter names it is also found by, as good as its name (`deep`): never said to be deprecated. */
  readonly shortNames?: ReadonlyArray<string> | undefined
  /**
   * The tools the architecture adds to the agent's whose calls its `approvals` option (an approval policy, with
   * `approvalTimeout`) can hold for a person: an agent's `approvals:` in `valet.yaml` may name them beside the
   * agent's own tools, and its rules for them go to that option.
   */
  readonly approvalTools?: ReadonlyArray<string> | undefined
  /**
   * The tools the program adds to the agent's for these options, the very ones its runs get: a durable decision that
   * edits a call's arguments checks them against the tool's schema, outside any run.
   */
  readonly addedTools?: ((options: Checked<Schema.Struct.Type<Fields>>) => ReadonlyArray<Tool.Tool<unknown>>) | undefined
  /**
   * A rule across options, checked after each option's own (a fallback must name one of the routes): `true`, or
   * what is wrong, with its `path` when it is one option's (`{ path: ["fallback"], issue: "names no route" }`).
   */
  readonly check?: ((options: Schema.Struct.Type<Fields>) => Schema.FilterOutput) | undefined
  /** The architecture's logic, for checked options; it finds the run in `CurrentRun`. */
  readonly program: (
    input: Runtime.Input,
    options: Checked<Schema.Struct.Type<Fields>>
  ) => Effect.Effect<Runtime.Outcome, AgentError | Runtime.RoleStopped, R | Runtime.CurrentRun>
}

/** The options a caller passes: the schema's encoded side (defaults optional), and the deprecated names. */
export type OptionsInput<Fields extends Schema.Struct.Fields, D> =
  & Schema.Struct.Encoded<Fields>
  & {
    readonly [K in keyof D]?: D[K] extends string ? (D[K] extends keyof Schema.Struct.Encoded<Fields> ? Schema.Struct.Encoded<Fields>[D[K]] : unknown) : unknown
  }

/**
 * `make`'s signature: with options, the architecture also needs what their agents need; without any (when every
 * option has a default), the defaults'.
 */
export type Make<Fields extends Schema.Struct.Fields, D, Out> =
  & (<const O extends OptionsInput<Fields, D>>(
    // Generic, so that the agents' services are read from the value; a key that is no option is then refused by the
    // check (`SelfRefine: maxRound is not a known option`), not by the compiler, which checks no excess keys of an `O`.
    options: O
  ) => Out extends Effect.Effect<Runtime.Architecture<infer A>, infer E> ? Effect.Effect<Runtime.Architecture<A | RequirementsOf<O>>, E>
    : Out extends Runtime.Architecture<infer A> ? Runtime.Architecture<A | RequirementsOf<O>>
    : never)
  & ({} extends OptionsInput<Fields, D> ? () => Out : unknown)

/** What every declaration has, whatever its options: what registries (`Catalog`, `valet.yaml`, the CLI) read. */
export interface AnyDefinition {
  readonly name: string
  readonly title: string
  readonly description: string
  readonly options: Schema.Top
  readonly agentOptions: ReadonlyArray<string>
  /** Options that hold a path (top-level option names). */
  readonly pathOptions: ReadonlyArray<string>
  readonly deprecated: Readonly<Record<string, Deprecation>>
  readonly aliases: ReadonlyArray<string>
  readonly shortNames: ReadonlyArray<string>
  /** The tools it adds whose calls its `approvals` option can hold for a person (none for most). */
  readonly approvalTools: ReadonlyArray<string>
  /** `make` for options of unknown shape (a config file's): checked all the same. */
  readonly build: (options: unknown) => Effect.Effect<Runtime.Architecture<unknown>, InvalidOptions>
}

/** An architecture declared with `define`. */
export interface Definition<Fields extends Schema.Struct.Fields, D, R> extends AnyDefinition {
  readonly options: Schema.Struct<Fields>
  /** The architecture with these options, checked (`InvalidOptions` names the field, the rule and the value). */
  readonly make: Make<Fields, D, Effect.Effect<Runtime.Architecture<Exclude<R, Runtime.CurrentRun>>, InvalidOptions>>
  /** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
  readonly makeUnsafe: Make<Fields, D, Runtime.Architecture<Exclude<R, Runtime.CurrentRun>>>
  /** The options as `make` reads them: deprecated names renamed, unknown keys left for the check to refuse. */
  readonly normalize: (options: unknown) => Effect.Effect<unknown>
}

/** The deprecations said already, once per process each. */
const said = new Set<string>()

const sayOnce = (note: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (said.has(note)) return Effect.void
    said.add(note)
    return Effect.logWarning(note)
  })

const renamed = (title: string, deprecated: Readonly<Record<string, Deprecation>>, options: unknown): Effect.Effect<unknown> =>
  Effect.suspend(() => {
    if (options === null || typeof options !== "object" || Array.isArray(options)) return Effect.succeed(options)
    const record = options as Readonly<Record<string, unknown>>
    const out: Record<string, unknown> = { ...record }
    const notes: Array<string> = []
    for (const key of Object.keys(record)) {
      const rule = Object.hasOwn(deprecated, key) ? deprecated[key]! : undefined
      if (rule !== undefined) {
        const to = typeof rule === "string" ? rule : rule.to
        // The current name wins when both are given: the old one is dropped.
        if (!Object.hasOwn(record, to)) out[to] = typeof rule === "string" ? record[key] : rule.map(record[key])
        delete out[key]
        notes.push(`${title}: the option ${key} is deprecated, use ${to} (valet 0.x reads both)`)
      }
      const value = record[key]
      // Templates are the options named `…Prompt`: a stop phrase that happens to say `{question}` is no template.
      if (typeof value === "string" && key.endsWith("Prompt")) {
        for (const name of placeholders(value)) {
          const current = deprecatedPlaceholders[name]
          if (current !== undefined) notes.push(`${title}: the placeholder {${name}} is deprecated, use {${current}} (valet 0.x fills both)`)
        }
      }
    }
    return Effect.as(Effect.forEach(notes, sayOnce, { discard: true }), out)
  })

/** See `Architecture.define`. */
export const define = <
  const Fields extends Schema.Struct.Fields,
  R,
  const D extends Readonly<Record<string, Deprecation>> = {}
>(spec: DefineOptions<Fields, D, R>): Definition<Fields, D, R> => {
  const schema = spec.check === undefined
    ? Schema.Struct(spec.options)
    : Schema.Struct(spec.options).check(Schema.makeFilter(spec.check))
  const deprecated: Readonly<Record<string, Deprecation>> = spec.deprecated ?? {}
  const normalize = (options: unknown) => renamed(spec.title, deprecated, options)
  const make = (options?: unknown) =>
    normalize(options ?? {}).pipe(
      Effect.flatMap((normalized) =>
        Decode.decode(spec.title, schema as unknown as Schema.Codec<Schema.Struct.Type<Fields>, unknown>, normalized)
      ),
      Effect.map((config) =>
        Runtime.make({
          name: spec.name,
          program: (input) => spec.program(input, config as Checked<Schema.Struct.Type<Fields>>),
          ...(spec.addedTools !== undefined ? { addedTools: spec.addedTools(config as Checked<Schema.Struct.Type<Fields>>) } : {})
        })
      )
    )
  return {
    name: spec.name,
    title: spec.title,
    description: spec.description,
    options: schema,
    agentOptions: spec.agentOptions ?? [],
    pathOptions: spec.pathOptions ?? [],
    deprecated,
    aliases: spec.aliases ?? [],
    shortNames: spec.shortNames ?? [],
    approvalTools: spec.approvalTools ?? [],
    build: make,
    normalize,
    make: make as Definition<Fields, D, R>["make"],
    makeUnsafe: ((options?: unknown) => Decode.runUnsafe(make(options))) as Definition<Fields, D, R>["makeUnsafe"]
  }
}
