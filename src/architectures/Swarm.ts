/**
 * Swarm: agents pass the conversation to each other. The active agent works on the task with its own tools and a
 * `handoff(target, message?)` tool (targets: the other agents' names, as a schema enum); an agent that answers
 * without handing off ends the run with its answer.
 *
 * - Calling `handoff` ends that agent's turn at once: no other tool call of that reply runs and the agent makes no
 *   further model call. The target starts with the task and the conversation so far — each agent's text, and a
 *   marker `[handoff <from> → <to>] <message>` per handoff.
 * - Exactly `maxHandoffs` handoffs may happen; one more ends the run interrupted `max_handoffs` with the last
 *   output (the target does not run).
 * - A cycle — the same sequence of handoffs, of any length up to the number of agents, repeating with no agent
 *   writing anything between — ends the run interrupted `handoff_cycle`.
 * - Each turn is a sub-agent `<parent>__swarm_<name>_<n>` (n counts that agent's turns), on the agent's own model
 *   when it has one; its model calls are steps `swarm.turn_<k>`. A turn that fails fails the run with its
 *   `SubAgentFailed` (the rule of every architecture); a turn stopped at a limit (its `maxTurns`) ends the run
 *   interrupted `swarm_<name>_<n>:<reason>`, a spent budget `budget:<limit>`, both with the last output (the
 *   stopped turn's text, when it wrote any).
 *
 * - A remote member (`A2A.agent`) runs where it lives, on the task and the conversation so far: its answer ends the
 *   run (it has no handoff tool).
 *
 * Events: `swarm.active`, `swarm.handoff`, `swarm.max_handoffs`, `swarm.cycle`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel, Swarm } from "valet"
 *
 * const triage = Agent.make({ name: "triage", instructions: "You triage customer messages." })
 * const billing = Agent.make({ name: "billing", instructions: "You handle invoices and refunds." })
 * const swarm = Swarm.makeUnsafe({ agents: [triage, billing], entry: "triage" })
 * const desk = Agent.make({ name: "desk", instructions: "", architecture: swarm })
 * // Triage hands off with a note (ending its turn); billing answers.
 * const result = Agent.run(desk, "I was charged twice.").pipe(
 *   Effect.provide(ScriptedModel.layer([
 *     { text: "A billing question.", toolCalls: [{ name: "handoff", arguments: { target: "billing", message: "duplicate charge" } }] },
 *     "I have refunded the duplicate charge."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Schema } from "effect"
import { InvalidAgent } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Model from "../core/Model.js"
import * as Tool from "../core/Tool.js"

// ---------------------------------------------------------------------------------------------------------
// One agent's turn
// ---------------------------------------------------------------------------------------------------------

/** A handoff an agent asked for. */
interface Handoff {
  readonly target: string
  readonly message: string
}

const handoffTool = (targets: readonly [string, ...Array<string>]) =>
  Tool.make({
    name: "handoff",
    description: `Hand the conversation to another agent, ending your turn. Agents: ${targets.join(", ")}.`,
    parameters: Schema.Struct({
      target: Schema.Literals(targets).annotate({ description: "the agent to hand over to" }),
      message: Schema.optional(Schema.String).annotate({ description: "what the next agent should know" })
    }),
    // Never run: the turn ends when the model calls it (see `turn`).
    handler: () => Effect.succeed("handed off")
  })

/**
 * One agent's turn: a tool loop on its tools plus `handoff`. A reply that calls `handoff` ends the turn there:
 * its other tool calls are not run and no further model call is made. Answers the agent's text, and the handoff.
 */
const turn = (targets: ReadonlyArray<string>) =>
  Architecture.make({
    name: "swarm_turn",
    program: (input) =>
      Effect.gen(function*() {
        const agent = input.agent
        const clash = agent.tools.find((tool) => tool.name === "handoff")
        if (clash !== undefined) return yield* new InvalidAgent({ agent: agent.name, message: "a swarm agent's own tools cannot be named handoff" })
        const handoff = targets.length > 0 ? [handoffTool(targets as unknown as readonly [string, ...Array<string>])] : []
        const kit = Tool.toolkit([...handoff, ...(agent.tools as ReadonlyArray<Tool.Tool>)])
        const messages: Array<Model.Message> = [
          ...(agent.instructions !== "" ? [Model.system(agent.instructions)] : []),
          ...Architecture.conversation(input)
        ]
        let written = ""
        for (let n = 1; n <= agent.maxTurns; n++) {
          const response = yield* Architecture.generate({ messages: messages.slice(), ...(kit.definitions.length > 0 ? { tools: kit.definitions } : {}) }, {
            step: `swarm.turn_${n}`
          })
          const text = Model.text(response)
          const calls = Model.toolCalls(response)
          if (text !== "") {
            written = text
            yield* Architecture.setOutput(text)
          }
          const asked = calls.find((call) => call.name === "handoff")
          if (asked !== undefined) {
            // Checked like any tool call: a bad target is an ERROR result the model reads, and the turn goes on.
            const args = Tool.parseArguments("handoff", asked.arguments)
            const target = args._tag === "Success" && typeof (args.success as { target?: unknown }).target === "string"
              ? (args.success as { target: string }).target
              : undefined
            if (target !== undefined && targets.includes(target)) {
              const message = (args as { success: { message?: unknown } }).success.message
              return { output: written, metadata: { handoff: { target, message: typeof message === "string" ? message : "" } satisfies Handoff } }
            }
          }
          if (calls.length === 0) return { output: text, metadata: {} }
          messages.push(Model.assistant(text, calls))
          const results = yield* Effect.forEach(calls, (call) => Architecture.executeTool(kit, call), { concurrency: "unbounded" })
          for (const result of results) messages.push(Model.toolResult(result.toolCallId, result.name, result.content, result.parts))
        }
        return { output: written, interrupted: "max_turns_exceeded", metadata: {} }
      })
  })

// ---------------------------------------------------------------------------------------------------------
// The declaration
// ---------------------------------------------------------------------------------------------------------

/**
 * Whether the last handoffs are one sequence (of length ≤ `maxLength`) repeated twice.
 *
 * @since 0.2.0
 * @category cycles
 */
export const repeats = (handoffs: ReadonlyArray<string>, maxLength: number): boolean => {
  for (let length = 1; length <= maxLength && 2 * length <= handoffs.length; length++) {
    const tail = handoffs.slice(-2 * length)
    if (tail.slice(0, length).every((step, i) => step === tail[length + i])) return true
  }
  return false
}

const { agents, int, withDefault } = Architecture.option

/**
 * Swarm, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's registries
 * read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "swarm",
  title: "Swarm",
  description: "agents hand the conversation to each other; a handoff ends the agent's turn",
  options: {
    /** The agents, with unique names (letters and digits joined by single `-` or `_`). */
    agents,
    /** The name of the agent that starts. */
    entry: Schema.String,
    /** Handoffs allowed (≥ 0, default 8). */
    maxHandoffs: int(0).pipe(withDefault(8))
  },
  check: (options) => options.agents.some((agent) => agent.name === options.entry) || { path: ["entry"], issue: "names none of the agents" },
  agentOptions: ["agents.*"],
  program: (input, options) =>
    Effect.gen(function*() {
      const byName = new Map(options.agents.map((agent) => [agent.name, agent]))
      const names = options.agents.map((agent) => agent.name)
      const conversation: Array<string> = []
      const turns = new Map<string, number>()
      // Handoffs since an agent last wrote something: the window a cycle is looked for in.
      let silent: Array<string> = []
      let handoffs = 0
      let active = options.entry
      let output = ""
      const metadata = () => ({ handoffs, conversation, last: active })
      yield* Architecture.setMetadata(metadata)

      for (;;) {
        const n = (turns.get(active) ?? 0) + 1
        turns.set(active, n)
        yield* Architecture.progress("swarm.active", { agent: active, turn: n })
        const others = names.filter((other) => other !== active)
        const member = byName.get(active)!
        // A remote member (an A2A agent) runs where it lives, on the task and the conversation so far: it answers,
        // and cannot hand off (the handoff tool is this swarm's, not its).
        const agent = member.architecture?.remote === true ? member : Architecture.withArchitecture(member, turn(others))
        const prompt = conversation.length === 0
          ? input.prompt
          : `${input.prompt}\n\nThe conversation so far:\n${conversation.join("\n")}`
        // A turn that stops answers for the run when it wrote something: its text is the last output.
        const ran = yield* Architecture.role(agent, prompt, {
          role: "swarm",
          index: `${active}_${n}`,
          label: `swarm_${active}_${n}`,
          answers: true
        })
        const written = ran.output
        if (written !== "") {
          output = written
          conversation.push(`${active}: ${written.replace(/\s*\n\s*/g, " ")}`)
          silent = []
          yield* Architecture.setOutput(output)
        }
        const handoff = ran.metadata.handoff as Handoff | undefined
        if (handoff === undefined) return { output: written, metadata: metadata() }
        if (handoffs === options.maxHandoffs) {
          yield* Architecture.progress("swarm.max_handoffs", { from: active, to: handoff.target, handoffs })
          return { output, interrupted: "max_handoffs", metadata: metadata() }
        }
        handoffs++
        conversation.push(`[handoff ${active} → ${handoff.target}]${handoff.message !== "" ? ` ${handoff.message}` : ""}`)
        silent.push(`${active}>${handoff.target}`)
        yield* Architecture.progress("swarm.handoff", { from: active, to: handoff.target, message: handoff.message, handoffs })
        if (repeats(silent, names.length)) {
          yield* Architecture.progress("swarm.cycle", { handoffs: silent })
          return { output, interrupted: "handoff_cycle", metadata: metadata() }
        }
        active = handoff.target
      }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of Swarm.
 *
 * @since 0.2.0
 * @category definition
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Swarm with options, checked here: no agents, two agents with one name, a name that cannot be part of a session
 * id, an `entry` that names no agent, or `maxHandoffs` below 0 fail with `InvalidOptions`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe
