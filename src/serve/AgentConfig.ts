/**
 * `valet.yaml`: agents from a file, for `valet serve` and `valet mcp`.
 *
 * ```yaml
 * model: { provider: openai-compatible, baseUrl: http://127.0.0.1:8000/v1, apiKeyEnv: OPENAI_API_KEY }
 * mcpServers:
 *   everything: { command: npx, args: [-y, "@modelcontextprotocol/server-everything"] }
 * agents:
 *   assistant:
 *     description: Answers questions, with the everything server's tools.
 *     instructions: You are a helpful assistant.
 *     tools: [everything]
 *     budget: { maxCalls: 20 }
 *   writer:
 *     architecture: self_refine
 *     instructions: You write short, exact prose.
 *     options: { maxRounds: 2, critic: assistant }
 *   coder:
 *     architecture: deep_agent
 *     instructions: You fix small Python projects.
 *     options: { skills: skills }   # paths in options are relative to this file
 *     workspace: project            # each run works on a fresh sandbox copy of ./project
 * # Models by name (an agent's, the file's or a judge's `model: small`); a chain with its settings:
 * # models: { small: { provider: openai-compatible, … }, main: { fallback: [ … ], when: [RateLimited], breaker: { failures: 3 } } }
 * # Guardrails by name, for agents' lists and runs' requests: guardrails: { polite: { judge: { criteria: …, model: small } } }
 * server: { port: 8787, maxConcurrentRuns: 16, tokenEnv: VALET_TOKEN }
 * threads: { store: sqlite, path: data/threads.sqlite3 }   # or memory, or { store: postgres, urlEnv: DATABASE_URL }
 * # Each turn's: historyLimit: 100, onBusy: wait, workingMemory: { scope: owner, template: "Name: ?" }
 * ```
 *
 * A bad file fails with one `ConfigFileError` naming the file, the line and the key (`valet.yaml:9:19:
 * agents.writer.architecture must be an architecture's name: …`): the schema, unknown keys, an agent or MCP server named but
 * not defined, agents that name each other in a circle, an unset `apiKeyEnv`, and architecture options that the
 * architecture refuses. `build` then starts what the agents need in the caller's `Scope`: one client per model
 * (`provider: scripted` is a fresh `ScriptedModel` in every run), and each MCP server that an agent uses, once.
 *
 * @example
 * ```ts
 * import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
 * import * as NodeServices from "@effect/platform-node/NodeServices"
 * import { Layer } from "effect"
 * import * as AgentConfig from "valet/AgentConfig"
 * import * as Server from "valet/Server"
 *
 * // The file's agents behind valet's HTTP server, their models and MCP servers started once and stopped with the
 * // layer (`valet serve --config valet.yaml` also applies the file's `server:` section). A bad file fails with one
 * // `ConfigFileError`.
 * const main = Server.layerNode({ port: 8787 }).pipe(
 *   Layer.provide(AgentConfig.layer("valet.yaml")),
 *   Layer.provide([NodeHttpClient.layerUndici, NodeServices.layer]),
 *   Layer.launch
 * )
 *
 * // Checking a file's text without starting anything: here a failure whose message names the line and the key,
 * // `valet.yaml:2:14: agents.assistant has no model: give it a model, or the file a top-level model`.
 * const checked = AgentConfig.parse("agents:\n  assistant: { instructions: Be brief. }\n", "valet.yaml")
 * ```
 *
 * @since 0.2.0
 */
import { Config, Context, type Duration, Effect, FileSystem, Layer, Path, Result, Schema, type Scope } from "effect"
import type { HttpClient } from "effect/http"
import type { ChildProcessSpawner } from "effect/process"
import * as Agent from "../core/Agent.js"
import type * as Guardrail from "../core/Guardrail.js"
import type * as EmbeddingModel from "../core/EmbeddingModel.js"
import * as Model from "../core/Model.js"
import type * as ModelError from "../core/ModelError.js"
import * as ScriptedModel from "../core/ScriptedModel.js"
import * as Threads from "../core/Threads.js"
import type * as Tool from "../core/Tool.js"
import * as A2A from "../providers/A2A.js"
import * as Mcp from "../providers/Mcp.js"
import * as YamlDocument from "../providers/internal/yamlDocument.js"
import * as OpenAiCompatible from "../providers/OpenAiCompatible.js"
import * as Vllm from "../providers/Vllm.js"
import * as Sandbox from "../environment/Sandbox.js"
import * as Agents from "./Agents.js"
import * as Approvals from "../core/internal/approvalPolicy.js"
import * as GuardrailConfig from "./internal/config/guardrails.js"
import * as Architectures from "./internal/config/architectures.js"
import * as Internal from "./internal/config/schema.js"
import * as ThreadStore from "./internal/config/threads.js"
import * as WorkspaceConfig from "./internal/config/workspace.js"

/**
 * The file's schema.
 *
 * @since 0.2.0
 * @category models
 */
export const ConfigFile = Internal.ConfigFile
/**
 * A checked config file.
 *
 * @since 0.2.0
 * @category models
 */
export type ConfigFile = Internal.ConfigFile
/**
 * The server settings of the file, with their defaults.
 *
 * @since 0.2.0
 * @category models
 */
export type ServerSettings = Internal.ServerSettings
/**
 * Where an agent's model calls go.
 *
 * @since 0.2.0
 * @category models
 */
export type ModelSpec = Internal.ModelSpec
/**
 * A model, or a list of models tried in order (`Model.fallback`).
 *
 * @since 0.2.0
 * @category models
 */
export type ModelChoice = Internal.ModelChoice
/**
 * The architectures a config may name.
 *
 * @since 0.2.0
 * @category constants
 */
export const architectureNames: ReadonlyArray<string> = Architectures.architectureNames

/**
 * A file that cannot be read or is not valid: `field` names the key, `line` / `column` point at it (the one error of
 * every configuration file valet reads; `Vllm.VllmConfigError` is the same class).
 *
 * @since 0.2.0
 * @category errors
 */
export const ConfigFileError = YamlDocument.ConfigFileError

/**
 * The error type of `ConfigFileError`.
 *
 * @since 0.2.0
 * @category errors
 */
export type ConfigFileError = YamlDocument.ConfigFileError

const saidKeys = new Set<string>()

/** The keys of `loaded` that valet 0.x named otherwise, each with its current name. */
const deprecatedKeys = (loaded: Loaded): ReadonlyArray<readonly [string, string]> => {
  const { config } = loaded
  const found: Array<readonly [string, string]> = []
  if (config.server.keepFinishedMs !== undefined) found.push(["server.keepFinishedMs", "server.keepFinished"])
  if (config.mcp?.callTimeoutMs !== undefined) found.push(["mcp.callTimeoutMs", "mcp.callTimeout"])
  if (config.mcp?.connectTimeoutMs !== undefined) found.push(["mcp.connectTimeoutMs", "mcp.connectTimeout"])
  for (const [name, spec] of Object.entries(config.agents)) {
    if (spec.budget?.maxDurationMs !== undefined) found.push([`agents.${name}.budget.maxDurationMs`, "maxDuration"])
  }
  return found
}

/** Says once per process that a file uses a key valet 0.x named otherwise (still read). */
const noteDeprecatedKeys = (loaded: Loaded): Effect.Effect<void> =>
  Effect.forEach(deprecatedKeys(loaded), ([key, current]) =>
    Effect.suspend(() => {
      const note = `${loaded.path}: ${key} is deprecated, use ${current} (valet 0.x reads both)`
      if (saidKeys.has(note)) return Effect.void
      saidKeys.add(note)
      return Effect.logWarning(note)
    }), { discard: true })

/**
 * A parsed and checked file, and where its keys are (for the errors of `build`).
 *
 * @since 0.2.0
 * @category models
 */
export interface Loaded {
  readonly path: string
  readonly config: ConfigFile
  readonly problemAt: YamlDocument.Parsed["problemAt"]
}

const fileError = (path: string, problem: YamlDocument.Problem): ConfigFileError =>
  new ConfigFileError({
    path,
    detail: problem.message,
    ...(problem.field !== undefined ? { field: problem.field } : {}),
    ...(problem.line !== undefined ? { line: problem.line } : {}),
    ...(problem.column !== undefined ? { column: problem.column } : {})
  })

/** The keys of an agent that runs here, refused beside `a2a`. */
const remoteOnlyRefused = ["instructions", "options", "tools", "maxTurns", "model", "approvals", "approvalTimeout", "workspace"] as const

/** The checks the schema cannot make: names that must exist, and no circles of agents. */
const crossCheck = (config: ConfigFile): YamlDocument.Problem | undefined => {
  const agents = config.agents
  const servers = config.mcpServers ?? {}
  for (const [name, spec] of Object.entries(agents)) {
    const badName = Agent.nameProblem(name)
    if (badName !== undefined) return { message: badName, field: `agents.${name}` }
    if (spec.a2a !== undefined) {
      // A remote agent runs elsewhere: nothing that shapes a run here applies to it.
      const local = remoteOnlyRefused.find((key) => spec[key] !== undefined)
      if (local !== undefined) {
        return { message: "is for an agent that runs here, not for a remote a2a agent (its description says what it does)", field: `agents.${name}.${local}` }
      }
      if (spec.architecture !== "react") {
        return { message: "is for an agent that runs here, not for a remote a2a agent", field: `agents.${name}.architecture` }
      }
      continue
    }
    if (spec.instructions === undefined) return { message: "is required", field: `agents.${name}.instructions` }
    if (spec.model === undefined && config.model === undefined) {
      return { message: "has no model: give it a model, or the file a top-level model", field: `agents.${name}` }
    }
    for (const [i, server] of (spec.tools ?? []).entries()) {
      if (!(server in servers)) {
        const known = Object.keys(servers)
        return {
          message: `names the MCP server ${JSON.stringify(server)}, which mcpServers does not define${
            known.length > 0 ? ` (it defines ${known.join(", ")})` : ""
          }`,
          field: `agents.${name}.tools[${i}]`
        }
      }
    }
    if (spec.workspace !== undefined && !WorkspaceConfig.takesWorkspace(spec.architecture)) {
      return {
        message: `is the directory of an agent with file tools (architecture ${WorkspaceConfig.workspaceArchitectures.join(" or ")}), not of a ${spec.architecture} agent`,
        field: `agents.${name}.workspace`
      }
    }
    if (spec.approvalTimeout !== undefined && spec.approvals === undefined) {
      return { message: "is how long the calls of approvals wait, and the agent has no approvals", field: `agents.${name}.approvalTimeout` }
    }
    // The tools the architecture adds (DeepAgent's file tools and `execute`) are the agent's too, without a server.
    const builtIn = Architectures.approvalToolsOf(spec.architecture)
    const optionRules = spec.options?.approvals
    for (const tool of Object.keys(spec.approvals ?? {})) {
      if (builtIn.includes(tool) && typeof optionRules === "object" && optionRules !== null && Object.hasOwn(optionRules, tool)) {
        return {
          message: `is also in options.approvals: give the tool's rule once`,
          field: YamlDocument.fieldName(["agents", name, "approvals", tool])
        }
      }
    }
    const firstApproval = Object.keys(spec.approvals ?? {}).find((tool) => !builtIn.includes(tool))
    if (firstApproval !== undefined && (spec.tools ?? []).length === 0) {
      return {
        message: `names the tool ${JSON.stringify(firstApproval)}, and the agent has no tools (tools: names the MCP servers they come from)`,
        field: YamlDocument.fieldName(["agents", name, "approvals", firstApproval])
      }
    }
    for (const reference of Architectures.references(spec.architecture, spec.options ?? {})) {
      const field = YamlDocument.fieldName(["agents", name, "options", ...reference.path])
      if (typeof reference.name !== "string") {
        return { message: `must name an agent of this file, got ${JSON.stringify(reference.name)}`, field }
      }
      if (!(reference.name in agents)) {
        return { message: `names the agent ${JSON.stringify(reference.name)}, which agents does not define`, field }
      }
    }
  }
  const models = config.models ?? {}
  const named = config.guardrails ?? {}
  /** A model choice that names a model `models:` does not define. */
  const unknownModel = (choice: Internal.ModelChoice | undefined, field: string): YamlDocument.Problem | undefined => {
    if (typeof choice !== "string" || choice in models) return undefined
    const known = Object.keys(models)
    return {
      message: `names the model ${JSON.stringify(choice)}, which models does not define${known.length > 0 ? ` (it defines ${known.join(", ")})` : ""}`,
      field
    }
  }
  const judgeProblem = (spec: GuardrailConfig.BuiltIn, field: string) => unknownModel(spec.judge?.model, `${field}.judge.model`)
  const modelProblem = unknownModel(config.model, "model")
  if (modelProblem !== undefined) return modelProblem
  for (const [name, spec] of Object.entries(named)) {
    const problem = judgeProblem(spec, YamlDocument.fieldName(["guardrails", name]))
    if (problem !== undefined) return problem
  }
  for (const [name, spec] of Object.entries(agents)) {
    const problem = unknownModel(spec.model, `agents.${name}.model`)
    if (problem !== undefined) return problem
    for (const kind of ["input", "output", "tool"] as const) {
      for (const [i, entry] of (spec.guardrails?.[kind] ?? []).entries()) {
        const field = `agents.${name}.guardrails.${kind}[${i}]`
        if (typeof entry === "string") {
          if (!(entry in named)) {
            const known = Object.keys(named)
            return {
              message: `names the guardrail ${JSON.stringify(entry)}, which guardrails does not define${known.length > 0 ? ` (it defines ${known.join(", ")})` : ""}`,
              field
            }
          }
        } else {
          const problem = judgeProblem(entry, field)
          if (problem !== undefined) return problem
        }
      }
    }
  }
  const threads = config.threads
  if (threads !== undefined) {
    if (threads.path !== undefined && threads.store !== "sqlite") {
      return { message: `is the file of a sqlite store, not of a ${threads.store} one`, field: "threads.path" }
    }
    if (threads.urlEnv !== undefined && threads.store !== "postgres") {
      return { message: `names the URL of a postgres store, not of a ${threads.store} one`, field: "threads.urlEnv" }
    }
    if (threads.store === "postgres" && threads.urlEnv === undefined) {
      return { message: "needs urlEnv with store: postgres (the environment variable holding its URL)", field: "threads" }
    }
  }
  // Depth-first over the references: a name met again on the current path is a circle.
  const state = new Map<string, "visiting" | "done">()
  const visit = (name: string, trail: ReadonlyArray<string>): YamlDocument.Problem | undefined => {
    if (state.get(name) === "done") return undefined
    if (state.get(name) === "visiting") {
      const circle = [...trail.slice(trail.indexOf(name)), name].join(" → ")
      return { message: `agents name each other in a circle: ${circle}`, field: `agents.${trail[trail.length - 1]}.options` }
    }
    state.set(name, "visiting")
    const spec = agents[name]!
    for (const reference of Architectures.references(spec.architecture, spec.options ?? {})) {
      const problem = visit(reference.name as string, [...trail, name])
      if (problem !== undefined) return problem
    }
    state.set(name, "done")
    return undefined
  }
  for (const name of Object.keys(agents)) {
    const problem = visit(name, [])
    if (problem !== undefined) return problem
  }
  return undefined
}

const pathOf = (field: string): ReadonlyArray<string | number> =>
  field.split(/\.|\[(\d+)\]/).filter((part) => part !== undefined && part !== "").map((part) => /^\d+$/.test(part) ? Number(part) : part)

/**
 * Parses and checks the text of a config file (`path` is only used in errors).
 *
 * @since 0.2.0
 * @category parsing
 */
export const parse = (text: string, path: string): Result.Result<Loaded, ConfigFileError> => {
  const parsed = YamlDocument.parse(text)
  if (Result.isFailure(parsed)) return Result.fail(fileError(path, parsed.failure))
  const decoded = YamlDocument.decode(ConfigFile, parsed.success)
  if (Result.isFailure(decoded)) return Result.fail(fileError(path, decoded.failure))
  const problem = crossCheck(decoded.success)
  if (problem !== undefined) {
    return Result.fail(fileError(path, parsed.success.problemAt(pathOf(problem.field ?? ""), problem.message)))
  }
  return Result.succeed({ path, config: decoded.success, problemAt: parsed.success.problemAt })
}

/**
 * The largest config file `load` reads (1 MiB). A file of agents is a few kilobytes, long instructions included;
 * the cap is checked before reading, so a huge file or a device is refused at once instead of exhausting the heap,
 * and it bounds the parse (the slowest YAML shapes took 1.5-4 s per MiB here, 14 s for 4 MiB).
 *
 * @since 0.2.0
 * @category constants
 */
export const maxFileBytes = 1024 * 1024

/**
 * Reads and checks a config file (at most `maxFileBytes`).
 *
 * @since 0.2.0
 * @category parsing
 */
export const load = (path: string): Effect.Effect<Loaded, ConfigFileError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const text = yield* YamlDocument.readFile(path, { maxBytes: maxFileBytes, what: "a valet.yaml" }).pipe(
      Effect.mapError((problem) => fileError(path, problem))
    )
    return yield* Result.match(parse(text, path), { onFailure: Effect.fail, onSuccess: Effect.succeed })
  })

/**
 * What building the agents needs: the model clients' HTTP, files, and processes for stdio MCP servers.
 *
 * @since 0.2.0
 * @category models
 */
export type Requirements =
  | Scope.Scope
  | HttpClient.HttpClient
  | FileSystem.FileSystem
  | Path.Path
  | ChildProcessSpawner.ChildProcessSpawner

/**
 * What can go wrong while building: the file, a model server that cannot list its models, an MCP server.
 *
 * @since 0.2.0
 * @category errors
 */
export type BuildError = ConfigFileError | ModelError.ModelError | Vllm.VllmError | Mcp.McpError

const scriptedTurn = (turn: typeof Internal.ScriptedTurn.Type): ScriptedModel.Turn =>
  typeof turn === "string" ? turn : {
    ...(turn.text !== undefined ? { text: turn.text } : {}),
    ...(turn.reasoning !== undefined ? { reasoning: turn.reasoning } : {}),
    ...(turn.toolCalls !== undefined
      ? { toolCalls: turn.toolCalls.map((call) => ({ name: call.name, ...(call.arguments !== undefined ? { arguments: call.arguments } : {}) })) }
      : {})
  }

/**
 * What the models of a file are built into, once each: a model of `models:` named by several agents and judges is one
 * client (and one chain's circuit breakers).
 */
type ModelCache = Map<string, Layer.Layer<Model.Model>>

/**
 * The model of a choice: a name of `models:` (built once, kept in `cache`), a spec, a list of them or a chain with its
 * settings (a `Model.fallback` chain: built once in the scope, so its circuit breakers see every run's calls, unless a
 * model of it is scripted, which must start afresh in each run).
 */
const modelLayer = (
  loaded: Loaded,
  choice: Internal.ModelChoice,
  field: ReadonlyArray<string | number>,
  cache: ModelCache
): Effect.Effect<Layer.Layer<Model.Model>, BuildError, Requirements> =>
  Effect.gen(function*() {
    if (typeof choice === "string") {
      const done = cache.get(choice)
      if (done !== undefined) return done
      // The cross-check made sure the name is defined.
      const layer = yield* modelLayer(loaded, loaded.config.models![choice]!, ["models", choice], cache)
      cache.set(choice, layer)
      return layer
    }
    if (!Array.isArray(choice) && !("fallback" in choice)) return yield* oneModelLayer(loaded, choice as ModelSpec, field)
    const chain = Array.isArray(choice) ? { fallback: choice as ReadonlyArray<ModelSpec> } : choice as Internal.FallbackSpec
    const listField = Array.isArray(choice) ? field : [...field, "fallback"]
    const specs: ReadonlyArray<ModelSpec> = chain.fallback
    const models = yield* Effect.forEach(specs, (spec, i) =>
      Effect.map(oneModelLayer(loaded, spec, [...listField, i]), (model) => ({
        // Two servers of one model are told apart by their addresses.
        name: spec.provider === "openai-compatible" ? `${spec.model ?? "model"} (${spec.baseUrl})` : YamlDocument.fieldName([...listField, i]),
        model
      })))
    const breaker = chain.breaker
    const options: Model.FallbackOptions = {
      ...(chain.when !== undefined ? { when: chain.when } : {}),
      ...(breaker === false
        ? { breaker: false }
        : breaker !== undefined
        ? {
          breaker: {
            ...(breaker.failures !== undefined ? { failures: breaker.failures } : {}),
            ...(breaker.window !== undefined ? { window: breaker.window as Duration.Input } : {}),
            ...(breaker.coolDown !== undefined ? { coolDown: breaker.coolDown as Duration.Input } : {})
          }
        }
        : {})
    }
    const built = Model.fallback(models, options)
    // The schema checked the settings; a chain that still refuses them says so on the chain's line.
    const checked = Layer.catchTag(built, "InvalidOptions", (error) =>
      Layer.effect(Model.Model, Effect.fail(fileError(loaded.path, loaded.problemAt(Array.isArray(choice) ? field : [...field, "breaker"], error.message)))))
    if (specs.some((spec) => spec.provider === "scripted")) return Layer.orDie(checked)
    return Layer.succeed(Model.Model, Context.get(yield* Layer.build(checked), Model.Model))
  })

/** The model of a spec, started once in the scope (a scripted model: fresh per run). */
const oneModelLayer = (
  loaded: Loaded,
  spec: ModelSpec,
  field: ReadonlyArray<string | number>
): Effect.Effect<Layer.Layer<Model.Model>, BuildError, Requirements> =>
  Effect.gen(function*() {
    switch (spec.provider) {
      case "scripted": {
        const script = spec.replies.map(scriptedTurn)
        // Consumed in order from the first reply in each run: the layer is built once per run.
        return Layer.orDie(ScriptedModel.layer(script))
      }
      case "vllm": {
        const pathService = yield* Path.Path
        const configPath = spec.config === undefined
          ? undefined
          : pathService.resolve(pathService.dirname(loaded.path), spec.config)
        const context = yield* Layer.build(Vllm.layer({
          ...(configPath !== undefined ? { configPath } : {}),
          ...(spec.actorName !== undefined ? { actorName: spec.actorName } : {})
        }))
        return Layer.succeed(Model.Model, Context.get(context, Model.Model))
      }
      case "openai-compatible": {
        const apiKey = spec.apiKeyEnv === undefined
          ? undefined
          : yield* Config.Redacted(spec.apiKeyEnv).pipe(
            Effect.mapError(() =>
              fileError(loaded.path, loaded.problemAt([...field, "apiKeyEnv"], `names ${spec.apiKeyEnv}, which is not set in the environment`))
            )
          )
        const options = {
          baseUrl: spec.baseUrl,
          ...(apiKey !== undefined ? { apiKey } : {}),
          ...(spec.api !== undefined ? { api: spec.api } : {})
        }
        const invalid = (error: { readonly message: string }) =>
          fileError(loaded.path, loaded.problemAt(field, error.message))
        let name = spec.model
        let contextWindow = spec.contextWindow
        if (name === undefined) {
          const probe = yield* OpenAiCompatible.make({ ...options, model: "" }).pipe(Effect.mapError(invalid))
          const models = yield* probe.listModels
          if (models.length === 0) {
            return yield* fileError(loaded.path, loaded.problemAt(field, `has no model name, and ${probe.apiBase}/models lists none`))
          }
          name = models[0]!.id
          // The server says its window (vLLM's max_model_len): compaction measures against it.
          contextWindow ??= models[0]!.maxModelLen
        }
        const client = yield* OpenAiCompatible.make({
          ...options,
          model: name,
          ...(contextWindow !== undefined ? { contextWindow } : {})
        }).pipe(Effect.mapError(invalid))
        return Layer.succeed(Model.Model, client)
      }
    }
  })

/**
 * Builds the agents of a loaded file, in the current `Scope`: models started once per spec, each MCP server an
 * agent uses connected once (and stopped when the scope closes).
 *
 * @since 0.2.0
 * @category constructors
 */
export const build: {
  (loaded: Loaded, options: BuildOptions & { readonly model: "context" }): Effect.Effect<Agents.Service, BuildError, Requirements | Model.Model>
  (loaded: Loaded, options?: BuildOptions & { readonly model?: "file" | undefined }): Effect.Effect<Agents.Service, BuildError, Requirements>
} = (loaded: Loaded, options?: BuildOptions): Effect.Effect<Agents.Service, BuildError, Requirements> =>
  // The `Model` is needed only with `model: "context"`, which the second signature says.
  buildWith(loaded, options) as Effect.Effect<Agents.Service, BuildError, Requirements>

const buildWith = (loaded: Loaded, options: BuildOptions | undefined): Effect.Effect<Agents.Service, BuildError, Requirements | Model.Model> =>
  Effect.gen(function*() {
    const { config } = loaded
    yield* noteDeprecatedKeys(loaded)
    const fromContext = options?.model === "context"
    const models: ModelCache = new Map()
    const defaultModel = config.model === undefined || fromContext ? undefined : yield* modelLayer(loaded, config.model, ["model"], models)
    // The file's guardrails by name, each built once: every agent (and run) naming one shares it.
    const namedGuardrails = new Map<string, Guardrail.Guardrail>()
    const builtIn = (spec: GuardrailConfig.BuiltIn, field: ReadonlyArray<string | number>, name?: string) =>
      Effect.gen(function*() {
        const judgeModel = spec.judge?.model
        // With `model: "context"` a judge judges on the given model, as the agents do.
        if (judgeModel === undefined || fromContext) return GuardrailConfig.buildBuiltIn(spec, undefined, name)
        return GuardrailConfig.buildBuiltIn(spec, yield* modelLayer(loaded, judgeModel, [...field, "judge", "model"], models), name)
      })
    const namedGuardrail = (name: string) =>
      Effect.gen(function*() {
        const done = namedGuardrails.get(name)
        if (done !== undefined) return done
        const guardrail = yield* builtIn(config.guardrails![name]!, ["guardrails", name], name)
        namedGuardrails.set(name, guardrail)
        return guardrail
      })
    for (const name of Object.keys(config.guardrails ?? {})) yield* namedGuardrail(name)
    const used = new Set(Object.values(config.agents).flatMap((spec) => spec.tools ?? []))
    const settings = config.mcp ?? {}
    const serverTools = new Map<string, ReadonlyArray<Tool.Tool>>()
    yield* Effect.forEach([...used], (server) =>
      Mcp.tools({ mcpServers: { [server]: config.mcpServers![server]! } }, {
        ...((settings.callTimeout ?? settings.callTimeoutMs) !== undefined
          ? { callTimeout: (settings.callTimeout ?? settings.callTimeoutMs) as Duration.Input }
          : {}),
        ...((settings.connectTimeout ?? settings.connectTimeoutMs) !== undefined
          ? { connectTimeout: (settings.connectTimeout ?? settings.connectTimeoutMs) as Duration.Input }
          : {}),
        prefix: settings.prefix ?? false
      }).pipe(
        Effect.tap((tools) => Effect.sync(() => serverTools.set(server, tools))),
        // The Mcp options are fixed here and checked by the schema: an InvalidOptions is this code's bug.
        Effect.catchTag("InvalidOptions", (error) => Effect.die(error)),
        // Where the server is configured, in front of Mcp's line (its name, command or URL, and why).
        Effect.mapError((error) => {
          const at = loaded.problemAt(["mcpServers", server], error.message)
          const where = at.line !== undefined ? `${loaded.path}:${at.line}:${at.column ?? 1}` : loaded.path
          return new Mcp.McpError({ server, message: `${where}: ${error.message}` })
        })
      ), { concurrency: "unbounded", discard: true })

    const pathService = yield* Path.Path
    const fileSystem = yield* FileSystem.FileSystem
    const folder = pathService.dirname(pathService.resolve(loaded.path))
    /** An agent's `workspace:` directory, relative to the file, checked to be one. */
    const workspaceDirectory = (name: string, directory: string) =>
      Effect.gen(function*() {
        const resolved = pathService.resolve(folder, directory)
        const info = yield* Effect.result(fileSystem.stat(resolved))
        if (info._tag === "Success" && info.success.type === "Directory") return resolved
        return yield* fileError(loaded.path, loaded.problemAt(["agents", name, "workspace"], `${resolved}: ${info._tag === "Success" ? "not a directory" : "no such directory"}`))
      })
    // One sandbox for the file's runs, made for the first agent with a workspace (fails closed without bubblewrap).
    let sandbox: Sandbox.Service | undefined
    const sandboxFor = (name: string) =>
      Effect.gen(function*() {
        if (sandbox !== undefined) return sandbox
        const context = yield* Layer.build(Sandbox.layerProcessConfig()).pipe(
          Effect.mapError((error) =>
            fileError(loaded.path, loaded.problemAt(["agents", name, "workspace"], `needs a sandbox for its runs' commands: ${error.message}`))
          )
        )
        sandbox = Context.get(context, Sandbox.Sandbox)
        if (sandbox.info.isolation === "process") {
          yield* Effect.logWarning(`${loaded.path}: sandbox isolation is "process" (VALET_SANDBOX_ISOLATION): the agents' commands run as plain processes, not isolated`)
        }
        return sandbox
      })

    /** A remote A2A agent of the file, its token read from the environment. */
    const remoteAgent = (name: string, spec: Internal.AgentSpec, remote: Internal.A2aAgentSpec) =>
      Effect.gen(function*() {
        const token = remote.tokenEnv === undefined ? undefined : yield* Config.Redacted(remote.tokenEnv).pipe(
          Effect.mapError(() =>
            fileError(loaded.path, loaded.problemAt(["agents", name, "a2a", "tokenEnv"], `names ${remote.tokenEnv}, which is not set in the environment`))
          )
        )
        const guardrails = spec.guardrails === undefined ? undefined : yield* GuardrailConfig.make(spec.guardrails, (entry, path) =>
          typeof entry === "string" ? namedGuardrail(entry) : builtIn(entry, ["agents", name, "guardrails", ...path]))
        const agent = A2A.agent(remote.url, {
          name,
          ...(spec.description !== undefined ? { description: spec.description } : {}),
          ...(token !== undefined ? { token } : {}),
          ...(remote.headers !== undefined ? { headers: remote.headers } : {}),
          ...(remote.allowedOrigins !== undefined ? { allowedOrigins: remote.allowedOrigins } : {}),
          ...(remote.timeout !== undefined ? { timeout: remote.timeout as Duration.Input } : {}),
          ...(remote.requestTimeout !== undefined ? { requestTimeout: remote.requestTimeout as Duration.Input } : {}),
          ...(remote.idleTimeout !== undefined ? { idleTimeout: remote.idleTimeout as Duration.Input } : {})
        })
        const entry: Agents.Entry = {
          name,
          description: spec.description ?? `${name} (a2a: ${remote.url})`,
          architecture: "a2a",
          agent: guardrails === undefined ? agent : Agent.clone(agent, { guardrails }),
          ...(spec.budget !== undefined ? { budget: spec.budget } : {})
        }
        return entry
      })

    const built = new Map<string, Agents.Entry>()
    const buildAgent = (name: string): Effect.Effect<Agents.Entry, BuildError, Requirements> =>
      Effect.gen(function*() {
        const done = built.get(name)
        if (done !== undefined) return done
        const spec = config.agents[name]!
        if (spec.a2a !== undefined) {
          const entry = yield* remoteAgent(name, spec, spec.a2a)
          built.set(name, entry)
          return entry
        }
        // References first (the cross-check ruled out circles).
        for (const reference of Architectures.references(spec.architecture, spec.options ?? {})) {
          yield* buildAgent(reference.name as string)
        }
        yield* Architectures.noteDeprecatedName(loaded.path, spec.architecture)
        // The policy's rules for the tools the architecture adds go to its own `approvals` option (with the timeout).
        const architectureTools = Architectures.approvalToolsOf(spec.architecture)
        const builtInRules = Object.entries(spec.approvals ?? {}).filter(([tool]) => architectureTools.includes(tool))
        const options = builtInRules.length === 0 ? spec.options ?? {} : {
          ...spec.options,
          approvals: { ...(spec.options?.approvals as Readonly<Record<string, unknown>> | undefined), ...Object.fromEntries(builtInRules) },
          ...(spec.approvalTimeout !== undefined && spec.options?.approvalTimeout === undefined ? { approvalTimeout: spec.approvalTimeout } : {})
        }
        const made = yield* Architectures.make(
          spec.architecture,
          // Paths in the options (a deep_agent's skills) are the file's, wherever the server was started.
          Architectures.resolvePaths(spec.architecture, options, (path) => pathService.resolve(folder, path)),
          (other) => built.get(other)!.agent
        ).pipe(
          Effect.mapError((error) =>
            fileError(loaded.path, loaded.problemAt(spec.options === undefined ? ["agents", name] : ["agents", name, "options"], error.message))
          )
        )
        const architecture = spec.workspace === undefined ? made : WorkspaceConfig.perRun(made, {
          taskId: `agent-${name}`,
          from: yield* workspaceDirectory(name, spec.workspace),
          sandbox: yield* sandboxFor(name)
        })
        const served = (spec.tools ?? []).flatMap((server) => serverTools.get(server) ?? [])
        const names = new Map<string, string>()
        for (const server of spec.tools ?? []) {
          for (const tool of serverTools.get(server) ?? []) {
            const other = names.get(tool.name)
            if (other !== undefined) {
              return yield* fileError(loaded.path, loaded.problemAt(["agents", name, "tools"], `get two tools named ${JSON.stringify(tool.name)} (from ${other} and ${server}): set mcp.prefix: true`))
            }
            names.set(tool.name, server)
          }
        }
        // The policy's tool names are known only now (an MCP server says its tools when connected).
        const approvals = spec.approvals ?? {}
        for (const tool of Object.keys(approvals)) {
          if (!names.has(tool) && !architectureTools.includes(tool)) {
            return yield* fileError(loaded.path, loaded.problemAt(["agents", name, "approvals", tool], `names the tool ${JSON.stringify(tool)}, which the agent does not have (its tools: ${[...names.keys(), ...architectureTools].join(", ")})`))
          }
        }
        const tools = served.map((tool) => {
          const rule = approvals[tool.name]
          return rule === undefined ? tool : Approvals.apply(tool, rule, spec.approvalTimeout as Duration.Input | undefined)
        })
        const model = fromContext
          ? undefined
          : spec.model === undefined
          ? defaultModel!
          : yield* modelLayer(loaded, spec.model, ["agents", name, "model"], models)
        const guardrails = spec.guardrails === undefined ? undefined : yield* GuardrailConfig.make(spec.guardrails, (entry, path) =>
          typeof entry === "string" ? namedGuardrail(entry) : builtIn(entry, ["agents", name, "guardrails", ...path]))
        // Without a model of its own, the agent needs the `Model` given below.
        const definition = {
          name,
          // The cross-check made it required for an agent that runs here.
          instructions: spec.instructions ?? "",
          architecture,
          tools,
          ...(spec.maxTurns !== undefined ? { maxTurns: spec.maxTurns } : {}),
          ...(guardrails !== undefined ? { guardrails } : {})
        }
        const agent: Agent.Agent<never> = model !== undefined
          ? Agent.make({ ...definition, model })
          : Agent.make(definition) as Agent.Agent<never>
        const entry: Agents.Entry = {
          name,
          description: spec.description ?? `${name} (${architecture.name})`,
          // The architecture's one name, also when the file says it as valet 0.x did (`self-refine`, `debate`).
          architecture: architecture.name,
          agent,
          ...(spec.budget !== undefined ? { budget: spec.budget } : {})
        }
        built.set(name, entry)
        return entry
      })
    for (const name of Object.keys(config.agents)) yield* buildAgent(name)
    const entries = Object.keys(config.agents).map((name) => built.get(name)!)
    // The file's guardrails by name: a run's request may name them (`POST /runs` `guardrails`).
    const catalog = namedGuardrails.size > 0 ? { guardrails: namedGuardrails } : undefined
    if (!fromContext) return Agents.make(entries, catalog)
    const given = Context.make(Model.Model, yield* Model.Model)
    return Agents.make(entries.map((entry) => ({ ...entry, agent: Agent.provide(entry.agent, given) })), catalog)
  })

/**
 * Options of `build` and `layer`.
 *
 * @since 0.2.0
 * @category options
 */
export interface BuildOptions {
  /**
   * Where the agents' model comes from: the file's `model` sections (`"file"`, the default), or the `Model` in the
   * context the layer is built in (`"context"`): a test serves the production file on a `ScriptedModel`. The file's
   * model sections are still checked, but nothing is started for them and no `apiKeyEnv` is read.
   */
  readonly model?: "file" | "context" | undefined
}

/**
 * The `Agents` of a config file (`load` then `build`), their models and MCP servers living as long as the layer.
 * With `{ model: "context" }`, the agents run on the `Model` the layer is given instead of the file's (tests).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer: {
  (path: string, options: BuildOptions & { readonly model: "context" }): Layer.Layer<Agents.Agents, BuildError, Exclude<Requirements, Scope.Scope> | Model.Model>
  (path: string, options?: BuildOptions & { readonly model?: "file" | undefined }): Layer.Layer<Agents.Agents, BuildError, Exclude<Requirements, Scope.Scope>>
} = (path: string, options?: BuildOptions) =>
  Layer.effect(Agents.Agents, Effect.flatMap(load(path), (loaded) => buildWith(loaded, options))) as Layer.Layer<
    Agents.Agents,
    BuildError,
    Exclude<Requirements, Scope.Scope>
  >

/**
 * How the file's turns on threads are held, read and kept (`threads:`'s `historyLimit`, `onBusy`, `workingMemory`,
 * `recall`), for `Runs`' `turns` option and `valet run --thread`. A working memory of the file is a text document
 * (its `template` until the model writes one), per thread or per owner; recall embeds with the OpenAI-compatible
 * `/v1/embeddings` server the file names (over the `HttpClient` in context), an unset `apiKeyEnv` an error on its line.
 *
 * @since 0.2.0
 * @category constructors
 */
export const turnDefaults = (
  loaded: Loaded
): Effect.Effect<Omit<Threads.TurnOptions, "id" | "owner">, ConfigFileError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const settings = loaded.config.threads
    if (settings === undefined) return {}
    const memory = settings.workingMemory
    const recall = settings.recall
    let embedding: EmbeddingModel.Service | undefined
    if (recall !== undefined) {
      const spec = recall.embedding
      const field = ["threads", "recall", "embedding"]
      const apiKey = spec.apiKeyEnv === undefined ? undefined : yield* Config.Redacted(spec.apiKeyEnv).pipe(
        Effect.mapError(() =>
          fileError(loaded.path, loaded.problemAt([...field, "apiKeyEnv"], `names ${spec.apiKeyEnv}, which is not set in the environment`))
        )
      )
      embedding = yield* OpenAiCompatible.makeEmbeddingModel({
        baseUrl: spec.baseUrl,
        model: spec.model,
        ...(apiKey !== undefined ? { apiKey } : {}),
        ...(spec.dimensions !== undefined ? { dimensions: spec.dimensions } : {})
      }).pipe(Effect.mapError((error) => fileError(loaded.path, loaded.problemAt(field, error.message))))
    }
    return {
      ...(settings.historyLimit !== undefined ? { historyLimit: settings.historyLimit } : {}),
      ...(settings.onBusy !== undefined ? { onBusy: settings.onBusy } : {}),
      ...(memory !== undefined
        ? { workingMemory: Threads.workingMemory(Schema.String, { initial: memory.template ?? "", scope: memory.scope ?? "thread" }) }
        : {}),
      ...(recall !== undefined
        ? {
          recall: {
            embedding,
            ...(recall.topK !== undefined ? { topK: recall.topK } : {}),
            ...(recall.minScore !== undefined ? { minScore: recall.minScore } : {}),
            ...(recall.scope !== undefined ? { scope: recall.scope } : {}),
            ...(recall.onError !== undefined ? { onError: recall.onError } : {})
          }
        }
        : {})
    }
  })

/**
 * The file's thread store (`threads:`) as a `Threads` layer, or `undefined` when the file has none: memory, a SQLite
 * file (relative to the file; its folder created), or PostgreSQL at the URL in `urlEnv` (unset: a `ConfigFileError`
 * on that line). `valet serve` provides it to the server, whose thread routes and chat ids then use it.
 *
 * @since 0.2.0
 * @category layers
 */
export const threadsLayer = (
  loaded: Loaded
): Layer.Layer<Threads.Threads, ConfigFileError | Threads.ThreadStoreError, FileSystem.FileSystem | Path.Path> | undefined => {
  const settings = loaded.config.threads
  if (settings === undefined) return undefined
  return Layer.unwrap(Effect.gen(function*() {
    switch (settings.store) {
      case "memory":
        return ThreadStore.layer({ _tag: "Memory" })
      case "sqlite": {
        const path = yield* Path.Path
        return ThreadStore.layer({ _tag: "Sqlite", file: path.resolve(path.dirname(loaded.path), settings.path ?? ThreadStore.defaultSqliteFile) })
      }
      case "postgres": {
        const env = settings.urlEnv!
        const url = yield* Config.String(env).pipe(
          Effect.mapError(() => fileError(loaded.path, loaded.problemAt(["threads", "urlEnv"], `names ${env}, which is not set in the environment`)))
        )
        return ThreadStore.layer({ _tag: "Postgres", url })
      }
    }
  }))
}
