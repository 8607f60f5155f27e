/**
 * Supervisor: a coordinator model leads named worker agents through two tools. `delegate(worker, instructions)`
 * runs a worker on a self-contained task and answers its result; `forward_message(worker)` ends the run with
 * that worker's last answer, verbatim, as the output. Otherwise the coordinator's text answer is the output.
 *
 * The coordinator is a tool loop in the supervisor's own session (model calls `supervisor.turn_<n>`), with the
 * running agent's instructions and tools beside the two above. The worker names are a schema enum, described from
 * the workers' instructions; a name that is not a worker, like any bad argument, comes back to the coordinator as
 * an `ERROR:` tool result it can read. All delegations of one turn run at once (at most `concurrency`), then the
 * turn's `forward_message` calls. Each delegation is a sub-agent `<parent>__worker_<name>_<n>` (n counts that
 * worker's delegations): its events stream into the parent's, its calls count for the run.
 *
 * A worker that fails, stops early, or outlives `delegationTimeout` (its run is then interrupted) is an `ERROR:`
 * result for the coordinator, not a crash (Supervisor's documented recovery). A spent budget stops the run with
 * `budget:<limit>` and the last worker answer; `maxTurns` coordinator turns stop it with `max_turns_exceeded`.
 * Tool-call arguments that nest deeper than 100 levels are an `ERROR:` result too, never decoded; before reading
 * a reply of more than 64 KiB the coordinator yields to the event loop (see `core/internal/parse.ts`).
 *
 * Events: `supervisor.delegated`, `supervisor.worker_answered`, `supervisor.delegation_timed_out`,
 * `supervisor.forwarded`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel, Supervisor } from "valet"
 *
 * const program = Effect.gen(function*() {
 *   const architecture = yield* Supervisor.make({
 *     workers: [
 *       Agent.make({ name: "researcher", instructions: "You find facts." }),
 *       Agent.make({ name: "writer", instructions: "You write short pieces." })
 *     ]
 *   })
 *   const editor = Agent.make({ name: "editor", instructions: "You run a science desk.", architecture })
 *   const result = yield* Agent.run(editor, "A sentence on octopus arms.")
 *   console.log(result.output, result.metadata.forwardedFrom) // "Each arm can taste and decide on its own." writer
 * })
 *
 * const delegate = (worker: string, instructions: string) => ({ name: "delegate", arguments: { worker, instructions } })
 * Effect.runPromise(program.pipe(Effect.provide(ScriptedModel.layer([
 *   { toolCalls: [delegate("researcher", "Facts about octopus arms")] }, // coordinator, turn 1
 *   "Two thirds of the neurons are in the arms.", // researcher
 *   { toolCalls: [delegate("writer", "One sentence from: two thirds of the neurons are in the arms")] }, // turn 2
 *   "Each arm can taste and decide on its own.", // writer
 *   { toolCalls: [{ name: "forward_message", arguments: { worker: "writer" } }] } // turn 3: the writer's text, verbatim
 * ]))))
 * ```
 *
 * @since 0.1.0
 */
import { Duration, Effect, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import { InvalidAgent } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import { isLongReply } from "../core/internal/toolLoop.js"
import * as Model from "../core/Model.js"
import * as Tool from "../core/Tool.js"

/**
 * The coordinator's default system prompt; placeholders `{instructions}` (the agent's), `{workers}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultCoordinatorPrompt = `{instructions}

You lead a team of workers. Give each worker a self-contained part of the task with the delegate tool — several \
delegations in one turn run at the same time — and read their answers in the tool results. When one worker's answer \
is exactly what the user should receive, call forward_message with that worker's name to pass it on unchanged. \
Otherwise answer the user yourself from the workers' answers.

Workers:
{workers}`

/**
 * A delegated worker did not answer; the coordinator reads this as the tool's `ERROR:` result.
 *
 * @since 0.1.0
 * @category errors
 */
export class DelegationFailed extends Schema.TaggedError<DelegationFailed>()("DelegationFailed", {
  worker: Schema.String,
  message: Schema.String
}) {}

/**
 * One delegation of a run, as `RunResult.metadata.delegations` lists it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Delegation {
  readonly worker: string
  /** The worker's n-th delegation: its session is `<parent>__worker_<worker>_<n>`. */
  readonly n: number
  readonly sessionId: string
  readonly instructions: string
  readonly output?: string | undefined
  /** Why the worker gave no answer (its failure or interruption). */
  readonly error?: string | undefined
}

/** What the coordinator is told about a worker: the first line of its instructions, cut to 200 characters. */
const describeWorker = (worker: Agent.Agent<unknown>): string => {
  const line = worker.instructions.split(/\r?\n/).map((l) => l.trim()).find((l) => l !== "") ?? "(no instructions)"
  return line.length <= 200 ? line : `${line.slice(0, 199)}…`
}

const reservedTools = ["delegate", "forward_message"]

const { agents, concurrency, duration, int, optional, template, withDefault } = Architecture.option

/**
 * Supervisor, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "supervisor",
  title: "Supervisor",
  description: "a coordinator delegates to named worker agents and may forward a worker's answer verbatim",
  options: {
    /** The workers (at least one), by their agent names: letters and digits joined by single `-` or `_`, all different. */
    workers: agents,
    /** Coordinator turns at most (≥ 1); default the agent's `maxTurns`. */
    maxTurns: optional(int(1)),
    /** Delegations running at once, at most: an integer ≥ 1 or `"unbounded"` (default: all of a turn's). */
    concurrency: concurrency.pipe(withDefault<typeof concurrency>("unbounded")),
    /** The coordinator's system prompt (`{instructions}`, `{workers}`). */
    coordinatorPrompt: template(["instructions", "workers"]).pipe(withDefault(defaultCoordinatorPrompt)),
    /**
     * How long one delegation may take (default: no limit but the run's budget). A worker still running then is
     * interrupted and the coordinator reads an `ERROR:` result saying it timed out.
     */
    delegationTimeout: optional(duration)
  },
  agentOptions: ["workers.*"],
  deprecated: { maxConcurrency: "concurrency" },
  program: (input, options) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const agent = input.agent
      const clash = agent.tools.filter((tool) => reservedTools.includes(tool.name) || !Tool.isValidName(tool.name))
      if (clash.length > 0) {
        return yield* new InvalidAgent({
          agent: agent.name,
          message: `a supervisor's own tools cannot be named delegate or forward_message, and tool names must match \
[a-zA-Z0-9_-]{1,64}: ${clash.map((tool) => JSON.stringify(tool.name)).join(", ")}`
        })
      }
      const workers = new Map(options.workers.map((worker) => [worker.name, worker]))
      const names = options.workers.map((worker) => worker.name) as unknown as readonly [string, ...Array<string>]
      const roster = options.workers.map((worker) => `- ${worker.name}: ${describeWorker(worker)}`).join("\n")

      const counts = new Map<string, number>()
      const answers = new Map<string, string>()
      const delegations: Array<Delegation> = []
      let forwarded: { readonly worker: string; readonly answer: string } | undefined

      const WorkerName = Schema.Literals(names).annotate({
        description: "the worker's name",
        expected: `one of the workers (${names.join(", ")})`
      })
      const delegate = Tool.make({
        name: "delegate",
        description: `Give one worker a self-contained task and get its answer back. Workers:\n${roster}`,
        parameters: Schema.Struct({
          worker: WorkerName,
          instructions: Schema.String.annotate({ description: "everything the worker needs to know to do its part" })
        }),
        // A worker is a whole agent run: the run's budget bounds it, not a tool timeout.
        timeout: Duration.infinity,
        handler: ({ instructions, worker }) =>
          Effect.gen(function*() {
            const n = (counts.get(worker) ?? 0) + 1
            counts.set(worker, n)
            const index = delegations.length
            const role = `worker_${worker}`
            const sessionId = `${run.sessionId}__${role}_${n}`
            delegations.push({ worker, n, sessionId, instructions })
            yield* Architecture.progress("supervisor.delegated", { worker, n, session_id: sessionId, instructions })
            // A failed or stopped worker is an `ERROR:` result the coordinator reads (the documented recovery), so
            // `roleResult`, not `role`.
            const delegation = Architecture.roleResult(workers.get(worker)!, instructions, { role, index: n })
            const ran = options.delegationTimeout === undefined
              ? yield* delegation
              : yield* delegation.pipe(Effect.timeoutOrElse({
                duration: options.delegationTimeout,
                // The worker's run is interrupted; its session shows no result.
                orElse: () => Effect.succeed({ _tag: "TimedOut" as const })
              }))
            if (ran._tag === "TimedOut") {
              const error = `timed out after ${Duration.format(Duration.fromInputUnsafe(options.delegationTimeout!))}`
              delegations[index] = { ...delegations[index]!, error }
              yield* Architecture.progress("supervisor.delegation_timed_out", { worker, n, session_id: sessionId })
              return yield* new DelegationFailed({ worker, message: `worker ${JSON.stringify(worker)} ${error}` })
            }
            if (ran._tag === "Completed") {
              const output = ran.result.output
              answers.set(worker, output)
              delegations[index] = { ...delegations[index]!, output }
              yield* Architecture.setOutput(output)
              yield* Architecture.progress("supervisor.worker_answered", { worker, n, output })
              return output
            }
            const error = ran._tag === "Failed"
              ? `failed: ${ran.reason}: ${ran.error.error.message}`
              : `stopped early (${ran.reason}) without a final answer`
            delegations[index] = { ...delegations[index]!, error }
            return yield* new DelegationFailed({ worker, message: `worker ${JSON.stringify(worker)} ${error}` })
          })
      })
      const forwardMessage = Tool.make({
        name: "forward_message",
        description: "End the conversation by giving the user one worker's last answer, unchanged. Use it when that " +
          "answer is already exactly what the user needs.",
        parameters: Schema.Struct({ worker: WorkerName }),
        handler: ({ worker }) => {
          const answer = answers.get(worker)
          if (answer === undefined) {
            return Effect.fail(
              new DelegationFailed({ worker, message: `worker ${JSON.stringify(worker)} has not answered yet: delegate to it first` })
            )
          }
          forwarded ??= { worker, answer }
          return Effect.succeed(`The answer of ${worker} goes to the user as it is.`)
        }
      })
      // Cast: the workers' and the agent's tools' requirements are provided by whoever runs the agent.
      const kit = Tool.toolkit<Architecture.CurrentRun>([
        delegate as Tool.Tool<Architecture.CurrentRun>,
        forwardMessage,
        ...(agent.tools as ReadonlyArray<Tool.Tool>)
      ])

      const runTool = (call: Model.ToolCall) => Architecture.executeTool(kit, call)

      const system = Architecture.fill(options.coordinatorPrompt, { instructions: agent.instructions, workers: roster }).trim()
      const messages: Array<Model.Message> = [Model.system(system), ...Architecture.conversation(input)]
      const maxTurns = options.maxTurns ?? agent.maxTurns
      let turns = 0
      const metadata = () => ({
        turns,
        delegations,
        ...(forwarded !== undefined ? { forwardedFrom: forwarded.worker } : {})
      })
      // A spent budget ends the run in a coordinator turn or a delegation: it still reports the delegations so far.
      yield* Architecture.setMetadata(metadata)

      for (let turn = 1; turn <= maxTurns; turn++) {
        const response = yield* Architecture.generate({ messages: messages.slice(), tools: kit.definitions }, {
          step: `supervisor.turn_${turn}`
        })
        turns = turn
        const choice = response.choices[0]
        const text = choice?.text ?? ""
        const calls = choice?.toolCalls ?? []
        if (calls.length === 0) return { output: text, metadata: metadata() }
        // Long arguments are decoded below: let timers run first (`generate` yields for a long text, not for long
        // tool arguments; see yieldBeforeReading in core/internal/parse.ts).
        if (isLongReply(text, calls)) yield* Effect.yieldNow
        messages.push(Model.assistant(text, calls))

        // Delegations (and the agent's own tools) first, all at once; then forward_message, which reads the answers
        // of this turn's delegations too.
        const results = new Array<Tool.Result>(calls.length)
        const first = calls.flatMap((call, i) => (call.name === "forward_message" ? [] : [i]))
        yield* Effect.forEach(first, (i) => Effect.map(runTool(calls[i]!), (result) => { results[i] = result }), {
          concurrency: options.concurrency,
          discard: true
        })
        for (const [i, call] of calls.entries()) {
          if (call.name === "forward_message") results[i] = yield* runTool(call)
        }
        for (const result of results) messages.push(Model.toolResult(result.toolCallId, result.name, result.content, result.parts))
        if (forwarded !== undefined) {
          yield* Architecture.progress("supervisor.forwarded", { worker: forwarded.worker })
          return { output: forwarded.answer, metadata: metadata() }
        }
      }
      return { output: run.output, interrupted: "max_turns_exceeded", metadata: metadata() }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.1.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of Supervisor.
 *
 * @since 0.1.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Supervisor with options, checked here: no workers, two workers with one name, a name that cannot be part of a
 * session id, or `maxTurns: 0` fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe
