/**
 * `valet run "<prompt>"`: an agent with the chosen architecture answers a prompt against the configured model;
 * with `--stream` its events are printed as they arrive (the model's text inline). `--record` writes the run's
 * model calls to a cassette, and `valet replay <cassette> "<prompt>"` runs the same agent again from it, with no
 * model at all. `--thread <id>` makes the run a turn of a conversation kept in a SQLite file (`--threads`, default
 * `data/threads.sqlite3`): the thread's messages are the history, the turn's are appended; the thread is started when
 * it does not exist. Tool calls that wait for a person (a valet.yaml agent's `approvals:`) are decided as `approvals.ts`
 * says: on the terminal, or by `--approve all|none`. `--architecture deep_agent --workspace DIR` works on a sandbox
 * copy of DIR and prints the copy's diff (`workspace.ts`); `--skills DIR` gives a deep_agent its skills.
 */
import { Effect, type FileSystem, Layer, Option, type Path, Stream } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as DeepAgent from "../../architectures/DeepAgent.js"
import * as Agent from "../../core/Agent.js"
import type { AgentError } from "../../core/AgentError.js"
import * as AgentEvent from "../../core/AgentEvent.js"
import * as Journal from "../../core/Journal.js"
import type * as Model from "../../core/Model.js"
import * as Threads from "../../core/Threads.js"
import * as Vllm from "../../providers/Vllm.js"
import * as AgentConfig from "../../serve/AgentConfig.js"
import * as ThreadStore from "../../serve/internal/config/threads.js"
import * as RunsApi from "../../serve/RunsApi.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { type Decider, deciderOf, terminalPrompter, withDecider } from "./approvals.js"
import { acceptedNames, architectures, type Entry, entryOf, names } from "./architectures.js"
import { CommandFailed, requireAnswer, UsageError } from "./failure.js"
import { modelLayer } from "./model.js"
import { commandSandbox } from "./sandbox.js"
import { onWorkspace, reportChanges, requireDirectory, workspaceChanges, type WorkspaceSettings } from "./workspace.js"

/** Where `run` prints: text as it comes, whole lines, and notes for people (stderr). */
export interface Printer {
  readonly write: (text: string) => Effect.Effect<void>
  readonly line: (text: string) => Effect.Effect<void>
  readonly note: (text: string) => Effect.Effect<void>
}

/** stdout, and stderr for notes. */
export const stdoutPrinter: Printer = {
  write: (text) => Effect.sync(() => void process.stdout.write(text)),
  line: (text) => Effect.sync(() => void process.stdout.write(`${text}\n`)),
  note: (text) => Effect.sync(() => void process.stderr.write(`${text}\n`))
}

/** A printer that keeps everything (for tests): `out` is stdout's text, `notes` stderr's lines. */
export const memoryPrinter = (): Printer & { out: string; readonly notes: Array<string> } => {
  const printer = {
    out: "",
    notes: [] as Array<string>,
    write: (text: string) => Effect.sync(() => void (printer.out += text)),
    line: (text: string) => Effect.sync(() => void (printer.out += `${text}\n`)),
    note: (text: string) => Effect.sync(() => void printer.notes.push(text))
  }
  return printer
}

/** What to run. */
export interface RunSettings {
  readonly prompt: string
  /** A name `architectures.ts` accepts. */
  readonly architecture: string
  readonly instructions: string
  readonly stream: boolean
}

/** The default instructions of the command-line agent. */
export const defaultInstructions = "You are a helpful assistant. Answer the user's request."

/**
 * Runs the agent on the prompt against the `Model` in context and prints: with `stream`, every event as it
 * arrives (text deltas inline), then the answer; otherwise only the answer (a note on stderr when the run was
 * interrupted by a limit).
 */
export const runPrompt = (
  settings: RunSettings,
  printer: Printer
): Effect.Effect<AgentEvent.RunResult, AgentError, Model.Model> =>
  Effect.flatMap(entryOf(settings.architecture), (entry) => {
    const agent = Agent.make({ name: "valet-run", instructions: settings.instructions, architecture: entry.architecture })
    return runAgent(agent, settings.prompt, settings.stream, printer)
  })

/**
 * Runs `agent` on the prompt and prints: with `stream`, every event as it arrives (text deltas inline), then the
 * answer; otherwise only the answer (a note on stderr when the run was interrupted by a limit).
 */
export const runAgent = <R>(
  agent: Agent.Agent<R>,
  prompt: string,
  stream: boolean,
  printer: Printer
): Effect.Effect<AgentEvent.RunResult, AgentError, R> => runTurn(agent, prompt, stream, printer, undefined) as Effect.Effect<AgentEvent.RunResult, AgentError, R>

/**
 * `runAgent` as a turn of the thread `thread` (with the `Threads` in context) when given: the thread's messages are
 * the history and the turn's are appended.
 */
export const runTurn = <R>(
  agent: Agent.Agent<R>,
  prompt: string,
  stream: boolean,
  printer: Printer,
  thread: string | undefined,
  turns: Omit<Threads.TurnOptions, "id"> = {}
): Effect.Effect<AgentEvent.RunResult, AgentError | Threads.ThreadError, R | Threads.Threads> =>
  Effect.gen(function*() {
    let result: AgentEvent.RunResult | undefined = undefined
    if (stream) {
      let midLine = false
      yield* (thread === undefined ? Agent.stream(agent, prompt) : Agent.stream(agent, prompt, { thread: { ...turns, id: thread } })).pipe(
        Stream.runForEach((event) => {
          if (event._tag === "TextDelta") {
            midLine = true
            return printer.write(event.text)
          }
          if (event._tag === "RunCompleted" && AgentEvent.isRoot(event) && result === undefined) {
            result = event.result
          }
          const endLine = midLine ? printer.write("\n") : Effect.void
          midLine = false
          return Effect.andThen(endLine, printer.line(AgentEvent.format(event)))
        })
      )
    } else {
      result = yield* (thread === undefined ? Agent.run(agent, prompt) : Agent.run(agent, prompt, { thread: { ...turns, id: thread } }))
    }
    const done = result!
    if (stream) yield* printer.line("")
    yield* printer.line(done.output)
    if (done.interrupted) yield* printer.note(`(the run was interrupted: ${done.interruptionReason})`)
    return done
  })

/**
 * Runs the agent `name` of a valet.yaml (its architecture, options, model and tools as the file says): the file's
 * models, their HTTP client and MCP servers live as long as the run.
 */
export const runConfigured = (
  path: string,
  name: Option.Option<string>,
  prompt: string,
  stream: boolean,
  printer: Printer,
  thread?: ThreadSettings | undefined,
  decider?: Decider | undefined
) =>
  Effect.scoped(Effect.gen(function*() {
    const loaded = yield* AgentConfig.load(path)
    const names = Object.keys(loaded.config.agents)
    const chosen = Option.isSome(name) ? name.value : names.length === 1 ? names[0]! : undefined
    if (chosen === undefined) {
      return yield* new CommandFailed({ message: `${path} has ${names.length} agents: choose one with --agent (${names.join(", ")})` })
    }
    if (!names.includes(chosen)) {
      return yield* new CommandFailed({ message: `${path} has no agent ${JSON.stringify(chosen)} (agents: ${names.join(", ")})` })
    }
    const catalog = yield* AgentConfig.build(loaded)
    // The file's own store (its `threads:`), where `valet serve` on the same file keeps them: the conversation
    // continued is that one, not one of a local file.
    const turns = yield* AgentConfig.turnDefaults(loaded)
    const run = onThread(thread, (id) => runTurn(catalog.get(chosen)!.agent, prompt, stream, printer, id, turns), AgentConfig.threadsLayer(loaded))
    // Without a decider there is no HumanLoop: a call the file's `approvals:` hold is rejected at once.
    const result = yield* (decider === undefined ? run : withDecider(decider, run))
    // An agent with a `workspace:` worked on a copy, gone now: what it changed is printed, as with --workspace.
    const changes = workspaceChanges(result.metadata.workspace)
    if (changes !== undefined) yield* reportChanges(undefined, changes, printer)
    return result
  })).pipe(
    // Around the whole run, not around `build` alone: the model clients `build` makes keep using this HTTP client,
    // which a provide around `build` would close as soon as `build` returned ("The client is destroyed").
    Effect.provide(NodeHttpClient.layerUndici)
  )

/** `--thread <id> [--threads <file>]`: the conversation a run continues, and the SQLite file it is kept in. */
export interface ThreadSettings {
  readonly id: string
  readonly file: string
}

/**
 * `run(id)` on the thread of `settings` (started when it does not exist, for the one owner a local user is:
 * `RunsApi.defaultOwner`, the owner a `valet serve` without an owner function gives every request), its SQLite file
 * open as long as the run; `run(undefined)` without settings.
 */
export const onThread = <A, E, R>(
  settings: ThreadSettings | undefined,
  run: (thread: string | undefined) => Effect.Effect<A, E, R>,
  store?: Layer.Layer<Threads.Threads, unknown, FileSystem.FileSystem | Path.Path> | undefined
): Effect.Effect<A, E | Threads.ThreadError | CommandFailed, Exclude<R, Threads.Threads> | FileSystem.FileSystem | Path.Path> => {
  if (settings === undefined) return run(undefined) as Effect.Effect<A, E, Exclude<R, Threads.Threads>>
  const problem = Threads.threadIdProblem(settings.id)
  if (problem !== undefined) return Effect.fail(new CommandFailed({ message: `--thread: ${problem}` }))
  return Effect.gen(function*() {
    // A local user continues any thread of the file (no owner check); a new one is the default owner's.
    yield* Threads.get(settings.id).pipe(
      Effect.catchTag("ThreadNotFound", () => Threads.create({ id: settings.id, owner: RunsApi.defaultOwner }))
    )
    return yield* run(settings.id)
  }).pipe(Effect.provide(store ?? ThreadStore.layer({ _tag: "Sqlite", file: settings.file }))) as Effect.Effect<
    A,
    E | Threads.ThreadError,
    Exclude<R, Threads.Threads> | FileSystem.FileSystem | Path.Path
  >
}

const threadFlags = {
  thread: Flag.String("thread").pipe(
    Flag.withDescription(
      "Continue the conversation with this id (started when new): its messages are the run's history, and the run's are " +
        "appended to it."
    ),
    Flag.optional
  ),
  threads: Flag.String("threads").pipe(
    Flag.withDescription(`With --thread: the SQLite file the conversations are kept in (default ${ThreadStore.defaultSqliteFile}).`),
    Flag.optional
  )
}

/** The thread settings of the flags (`--threads` alone is a mistake: it names where, not which). */
const threadOf = (values: { readonly thread: Option.Option<string>; readonly threads: Option.Option<string> }) =>
  Option.isNone(values.thread)
    ? Option.isSome(values.threads)
      ? Effect.fail(new CommandFailed({ message: "--threads names the file of --thread's conversation: give --thread <id> too" }))
      : Effect.succeed(undefined)
    : Effect.succeed({ id: values.thread.value, file: Option.getOrElse(values.threads, () => ThreadStore.defaultSqliteFile) })

const architecture = Flag.Literals("architecture", acceptedNames).pipe(
  Flag.withDescription(
    `How the agent works (default react): ${names.map((name) => `${name} (${architectures[name]!.description})`).join("; ")}.`
  ),
  Flag.withDefault("react")
)
const prompt = Argument.String("prompt").pipe(Argument.withDescription("What to ask the agent."))
const stream = Flag.Boolean("stream").pipe(
  Flag.withDescription("Print the run's events as they arrive, the model's text inline."),
  Flag.withDefault(false)
)
const instructions = Flag.String("instructions").pipe(
  Flag.withDescription(`The agent's instructions (its system message; default "${defaultInstructions}").`),
  Flag.withDefault(defaultInstructions)
)

const modelFlags = {
  baseUrl: Flag.String("base-url").pipe(
    Flag.withDescription("An OpenAI-compatible server (else VALET_BASE_URL, else the vLLM pool file)."),
    Flag.optional
  ),
  model: Flag.String("model").pipe(Flag.withDescription("The model name (else VALET_MODEL, else the server's first)."), Flag.optional),
  apiKey: Flag.String("api-key").pipe(Flag.withDescription("The API key (else VALET_API_KEY or OPENAI_API_KEY)."), Flag.optional),
  config: Flag.File("config").pipe(
    Flag.withDescription(`The vLLM pool file (default ${Vllm.defaultConfigPath}): use the pool.`),
    Flag.optional
  ),
  actorName: Flag.String("actor-name").pipe(Flag.withDescription("Send every call to this actor of the pool."), Flag.optional)
}

interface ModelValues {
  readonly baseUrl: Option.Option<string>
  readonly model: Option.Option<string>
  readonly apiKey: Option.Option<string>
  readonly config: Option.Option<string>
  readonly actorName: Option.Option<string>
}

/** The model of the flags: the pool when `--config` or `--actor-name` is given, else server flags / environment / pool file. */
export const modelOf = (values: ModelValues) =>
  Option.isSome(values.config) || Option.isSome(values.actorName)
    ? Vllm.layerNode({ configPath: Option.getOrUndefined(values.config), actorName: Option.getOrUndefined(values.actorName) })
    : modelLayer({ baseUrl: values.baseUrl, model: values.model, apiKey: values.apiKey, config: Option.none() })

const withRecording = <E>(
  model: Layer.Layer<Model.Model, E>,
  cassette: Option.Option<string>
): Layer.Layer<Model.Model, E | Journal.JournalError, FileSystem.FileSystem | Path.Path> =>
  Option.isSome(cassette) ? Journal.layerRecord(cassette.value).pipe(Layer.provide(model)) : model

const workspaceFlags = {
  workspace: Flag.String("workspace").pipe(
    Flag.withDescription(
      "With --architecture deep_agent: the directory to work on. The agent works on a copy of it in the sandbox " +
        "(bubblewrap; plain processes only with VALET_SANDBOX_ISOLATION=process); the copy's changes are printed as a " +
        "unified diff after the answer (or written to --diff), and written back only with --apply."
    ),
    Flag.optional
  ),
  skills: Flag.String("skills").pipe(
    Flag.withDescription("With --architecture deep_agent: a directory of skills (folders with a SKILL.md) the agent can open."),
    Flag.optional
  ),
  diff: Flag.String("diff").pipe(
    Flag.withDescription("With --workspace: write the diff of the agent's changes to this file instead of printing it."),
    Flag.optional
  ),
  apply: Flag.Boolean("apply").pipe(
    Flag.withDescription(
      "With --workspace: write the agent's changes back to the directory after a run that succeeded: an answer, not " +
        "stopped by a limit or Ctrl-C (refused, with " +
        "nothing written, when a file to change was changed there meanwhile)."
    ),
    Flag.withDefault(false)
  )
}

interface WorkspaceValues {
  readonly workspace: Option.Option<string>
  readonly skills: Option.Option<string>
  readonly diff: Option.Option<string>
  readonly apply: boolean
}

/**
 * The architecture of `--architecture` with `--skills`, and the settings of `--workspace`: both only for deep_agent
 * (the agent with file tools), `--diff` and `--apply` only with `--workspace`; a wrong mix is a `UsageError`.
 */
export const deepAgentOf = (
  architecture: string,
  values: WorkspaceValues
): Effect.Effect<{ readonly entry: Entry; readonly workspace: WorkspaceSettings | undefined }, UsageError | AgentError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const entry = yield* entryOf(architecture)
    const deep = entry.architecture.name === DeepAgent.name
    for (const [flag, given] of [["--workspace", values.workspace], ["--skills", values.skills]] as const) {
      if (Option.isSome(given) && !deep) {
        return yield* new UsageError({ message: `${flag} is for --architecture ${DeepAgent.name} (the agent with file tools), not ${entry.architecture.name}` })
      }
    }
    for (const [flag, given] of [["--diff", Option.isSome(values.diff)], ["--apply", values.apply]] as const) {
      if (given && Option.isNone(values.workspace)) {
        return yield* new UsageError({ message: `${flag} is about the changes of --workspace DIR: give --workspace too` })
      }
    }
    let chosen: Entry = entry
    if (Option.isSome(values.skills)) {
      yield* requireDirectory("--skills", values.skills.value)
      chosen = { ...entry, architecture: yield* DeepAgent.make({ skills: values.skills.value }) }
    }
    // Checked before the model and the sandbox are set up: a wrong path is the first thing said.
    if (Option.isSome(values.workspace)) yield* requireDirectory("--workspace", values.workspace.value)
    const workspace = Option.isSome(values.workspace)
      ? { directory: values.workspace.value, diff: Option.getOrUndefined(values.diff), apply: values.apply }
      : undefined
    return { entry: chosen, workspace }
  })

/** `valet run "<prompt>"`. */
export const runCommand = Command.make(
  "run",
  {
    prompt,
    architecture,
    stream,
    instructions,
    record: Flag.File("record").pipe(
      Flag.withDescription("Write the run's model calls to this JSONL cassette (then: valet replay <cassette> \"<prompt>\")."),
      Flag.optional
    ),
    agents: Flag.File("agents", { mustExist: true }).pipe(
      Flag.withDescription("A valet.yaml: run one of its agents (--agent), with its own architecture, options, model and tools, instead of --architecture."),
      Flag.optional
    ),
    agent: Flag.String("agent").pipe(Flag.withDescription("With --agents: the agent to run (default: the file's only agent)."), Flag.optional),
    approve: Flag.Literals("approve", ["all", "none"]).pipe(
      Flag.withDescription(
        "Decide the tool calls that wait for a person (the agent's approvals: in valet.yaml) without asking: all approves " +
          "them, none rejects them. Without it they are asked on the terminal, or rejected when stdin is not one."
      ),
      Flag.optional
    ),
    ...threadFlags,
    ...workspaceFlags,
    ...modelFlags
  },
  (values) =>
    Effect.gen(function*() {
      const thread = yield* threadOf(values)
      const decider = deciderOf(Option.getOrUndefined(values.approve), process.stdin.isTTY === true, yield* terminalPrompter, stdoutPrinter.note)
      if (Option.isSome(values.agents)) {
        const flag = Option.isSome(values.workspace) ? "--workspace" : Option.isSome(values.skills) ? "--skills" : undefined
        if (flag !== undefined) {
          return yield* new UsageError({ message: `${flag} is for --architecture ${DeepAgent.name}: an agent of --agents has its own (workspace: and options: in the file)` })
        }
        if (Option.isSome(values.record)) {
          return yield* new CommandFailed({
            message: "--record records the command line's model: it cannot record the agents of --agents, which have their own"
          })
        }
        return yield* Effect.flatMap(
          runConfigured(values.agents.value, values.agent, values.prompt, values.stream, stdoutPrinter, thread, decider),
          requireAnswer
        )
      }
      const { entry, workspace } = yield* deepAgentOf(values.architecture, values)
      const turn = onThread(thread, (id) =>
        runTurn(
          Agent.make({ name: "valet-run", instructions: values.instructions, architecture: entry.architecture }),
          values.prompt,
          values.stream,
          stdoutPrinter,
          id
        ))
      return yield* (workspace === undefined
        ? turn
        : onWorkspace(workspace, turn, stdoutPrinter).pipe(Effect.provide(commandSandbox()))).pipe(
          Effect.provide(withRecording(modelOf(values), values.record)),
          Effect.flatMap(requireAnswer)
        )
    })
).pipe(
  Command.withDescription(
    "Runs an agent on a prompt and prints its answer (with --stream, its events as they arrive). The model: " +
      "--base-url / --model / --api-key, else VALET_BASE_URL / VALET_MODEL / VALET_API_KEY, else the vLLM pool " +
      `(--config, --actor-name, or ${Vllm.defaultConfigPath}). With --agents valet.yaml --agent <name>, the file's agent ` +
      "(any architecture of the catalog, with its own model and tools). With --thread <id>, the run continues that " +
      `conversation, kept in a SQLite file (--threads, default ${ThreadStore.defaultSqliteFile}). Tool calls the agent's ` +
      "approvals: hold are asked on the terminal (y/n), or decided by --approve all|none when stdin is not one. " +
      "With --architecture deep_agent --workspace DIR, the agent works on a copy of DIR in the sandbox: the copy's " +
      "diff is printed after the answer (or written to --diff FILE), and written back to DIR only with --apply."
  )
)

/** `valet replay <cassette> "<prompt>"`. */
export const replayCommand = Command.make(
  "replay",
  {
    cassette: Argument.File("cassette", { mustExist: true }).pipe(
      Argument.withDescription("The cassette `valet run --record` wrote.")
    ),
    prompt,
    architecture,
    stream,
    instructions
  },
  (values) =>
    runPrompt(values, stdoutPrinter).pipe(Effect.provide(Journal.layerReplay(values.cassette)), Effect.flatMap(requireAnswer))
).pipe(
  Command.withDescription(
    "Runs the agent again from a cassette written by `valet run --record`, with no model: the same prompt, " +
      "--architecture and --instructions give the same answer; a call the cassette does not hold fails with ReplayMiss."
  )
)
