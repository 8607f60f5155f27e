import { Effect, Schema } from "effect"
import { type BudgetExhausted, InvalidAgent } from "../AgentError.js"
import * as Architecture from "./runtime.js"
import * as Model from "../Model.js"
import type { ModelError } from "../ModelError.js"
import * as Tool from "../Tool.js"
import { IntAtLeast } from "./decode.js"
import { jsonEqual } from "./json.js"
import { jsonDepthWithin, yieldAboveChars } from "./parse.js"

/** Sampling options ReAct passes on every model call. */
export const RequestOptions = Schema.Struct({
  temperature: Schema.optional(Schema.Number),
  topP: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(IntAtLeast(1)),
  stop: Schema.optional(Schema.Array(Schema.String)),
  seed: Schema.optional(Schema.Int),
  toolChoice: Schema.optional(Model.ToolChoice),
  extra: Schema.optional(Model.JsonObject)
})

/** The options of the tool loop (ReAct's), as schema fields. */
export const optionFields = {
  /** Model turns before the run stops with `max_turns_exceeded`; default: the agent's `maxTurns`. */
  maxTurns: Schema.optional(IntAtLeast(1)),
  /** The same tool with the same arguments this many times in a row stops the run (`repeated_tool_call`); 0: never. */
  maxRepeatedToolCalls: Schema.optional(IntAtLeast(0)),
  /** How many tool calls of one turn run at once (an integer >= 1 or "unbounded"); default all of them. */
  concurrency: Schema.optional(Schema.Union([IntAtLeast(1), Schema.Literal("unbounded")])),
  /** Tool results longer than this are cut with a note. */
  maxResultChars: Schema.optional(IntAtLeast(1)),
  /** Sampling options passed on every model call (`temperature`, `topP`, `maxTokens`, `stop`, `seed`…). */
  request: Schema.optional(RequestOptions)
}

export const Options = Schema.Struct(optionFields)
export type Options = typeof Options.Type

export const name = "react"

/**
 * Whether a reply is long enough that the loop yields to the event loop before reading it: its text and tool-call
 * arguments together over `yieldAboveChars` (see `yieldBeforeReading` in parse.ts). Only lengths are read.
 */
export const isLongReply = (text: string, calls: ReadonlyArray<Model.ToolCall>): boolean => {
  let size = text.length
  for (const call of calls) size += call.arguments.length
  return size > yieldAboveChars
}

const notJson: unique symbol = Symbol("notJson")

/** Whether a text is only JSON's own whitespace (which `String.trim` strips with much else: NBSP, BOM, U+2028…). */
const jsonWhitespace = /^[ \t\n\r]*$/

/**
 * A tool call as the repeat check sees it: its name and its arguments, equal to another's when the texts are equal
 * or, both being JSON, the values are (whatever the key order the model chose; `""` is `{}`); text that is not JSON,
 * or nests too deep to walk, only by its text. The value is parsed only when the texts differ, once per call.
 */
class RepeatKey {
  private value: unknown = undefined
  private parsed = false
  readonly text: string
  constructor(readonly name: string, private readonly original: string) {
    this.text = original.trim()
  }

  private json(): unknown {
    if (!this.parsed) {
      this.parsed = true
      if (!jsonDepthWithin(this.text)) {
        this.value = notJson
      } else {
        try {
          this.value = JSON.parse(this.text === "" ? "{}" : this.text)
        } catch {
          this.value = notJson
        }
      }
    }
    return this.value
  }

  /**
   * The arguments' JSON value for the tool to decode instead of parsing the text again, when the comparison parsed it
   * and handing it over changes nothing: the text is what the tool would parse (nothing but JSON whitespace was
   * trimmed: `Tool.parseArguments` refuses text padded with other whitespace), and the value has no nested object a
   * handler could change (decoding copies objects and arrays, not what a `Schema.Unknown` field holds). This key keeps
   * a copy of the top level for the next comparison. Else undefined: the tool parses the text itself.
   */
  takeParsed(): unknown {
    const value = this.parsed ? this.value : notJson
    if (value === notJson || value === null || typeof value !== "object") return undefined
    if (this.text !== this.original && this.text !== "") {
      const start = this.original.indexOf(this.text)
      if (!jsonWhitespace.test(this.original.slice(0, start)) || !jsonWhitespace.test(this.original.slice(start + this.text.length))) {
        return undefined
      }
    }
    if (Array.isArray(value)) {
      for (const item of value) if (item !== null && typeof item === "object") return undefined
      this.value = value.slice()
      return value
    }
    const record = value as Record<string, unknown>
    for (const key in record) {
      const item = record[key]
      if (item !== null && typeof item === "object") return undefined
    }
    this.value = { ...record }
    return value
  }

  equals(that: RepeatKey): boolean {
    if (this.name !== that.name) return false
    if (this.text === that.text) return true
    const a = this.json()
    if (a === notJson) return false
    const b = that.json()
    return b !== notJson && jsonEqual(a, b)
  }
}

/**
 * What an architecture built on the loop adds to it (DeepAgent): `messages` makes each call's messages from the
 * conversation so far (a copy it may change), so that something kept beside the conversation — a plan — is shown on
 * every turn without being written into it.
 */
export interface Hooks {
  readonly messages?: ((conversation: Array<Model.Message>) => Array<Model.Message>) | undefined
}

/**
 * The ReAct loop: ask the model with the tools; run the calls it asks for; repeat until it answers in text.
 *
 * Written as a chain of `flatMap`s rather than a generator: this runs in every concurrent session, and a
 * generator keeps a frame and its objects alive for the whole run where a continuation keeps only what it uses.
 */
export const program = (options: Options, hooks?: Hooks) =>
(
  input: Architecture.Input
): Effect.Effect<Architecture.Outcome, InvalidAgent | ModelError | BudgetExhausted, Model.Model | Architecture.CurrentRun> =>
  Effect.suspend((): Effect.Effect<
    Architecture.Outcome,
    InvalidAgent | ModelError | BudgetExhausted,
    Model.Model | Architecture.CurrentRun
  > => {
    const agent = input.agent
    const invalid = agent.tools.filter((tool) => !Tool.isValidName(tool.name))
    if (invalid.length > 0) {
      return Effect.fail(
        new InvalidAgent({
          agent: agent.name,
          message: `invalid tool names ${invalid.map((tool) => JSON.stringify(tool.name)).join(", ")}: use [a-zA-Z0-9_-]{1,64}`
        })
      )
    }
    const kit = Tool.toolkit(agent.tools) as Tool.Toolkit<never>
    const maxTurns = options.maxTurns ?? agent.maxTurns
    const maxRepeats = options.maxRepeatedToolCalls ?? 3
    const executeOptions = options.maxResultChars !== undefined ? { maxResultChars: options.maxResultChars } : undefined
    const concurrency = options.concurrency ?? "unbounded"
    const base: Omit<Model.Request, "messages"> = {
      ...options.request,
      ...(kit.definitions.length > 0 ? { tools: kit.definitions } : {}),
      // Structured output, asked natively where every reply is the answer: with tools, a constrained reply could
      // not call one (vLLM's guided decoding applies to the whole text), so the runtime repairs afterwards instead.
      ...(input.output !== undefined && kit.definitions.length === 0
        ? { responseFormat: input.output.responseFormat }
        : {})
    }

    const messages: Array<Model.Message> = []
    if (agent.instructions !== "") messages.push(Model.system(agent.instructions))
    messages.push(...Architecture.conversation(input))

    const prepare = hooks?.messages ?? ((conversation: Array<Model.Message>) => conversation)
    let lastText = ""
    let repeatedKey: RepeatKey | undefined
    let repeatedCount = 0

    return Effect.flatMap(Architecture.CurrentRun, (current) => {
      // Looked up once: the loop below runs per step, and every lookup is an effect to run.
      const run = Architecture.stateOf(current)
      const runTool = (call: Model.ToolCall) => Architecture.executeToolFor(run, kit, call, executeOptions)
      // The call's arguments as the repeat check parsed them, if it did: the tool does not parse them again.
      const runParsed = (call: Model.ToolCall, parsed: unknown) =>
        parsed === undefined
          ? runTool(call)
          : Architecture.executeToolFor(run, kit, call, { ...executeOptions, parsedArguments: parsed })

      const afterTools = (turn: number) => (results: ReadonlyArray<Tool.Result>) => {
        for (const result of results) messages.push(Model.toolResult(result.toolCallId, result.name, result.content, result.parts))
        return step(turn + 1)
      }

      const step = (turn: number): Effect.Effect<Architecture.Outcome, ModelError | BudgetExhausted, Model.Model> => {
        if (turn > maxTurns) {
          return Effect.succeed({ output: lastText, interrupted: "max_turns_exceeded", metadata: { turns: maxTurns } })
        }
        const request: Model.Request = { ...base, messages: prepare(messages.slice()) }
        return Effect.flatMap(Architecture.generateFor(run, request, { step: `react.turn_${turn}` }), (response) => {
          const choice = response.choices[0]
          const text = choice?.text ?? ""
          const calls = choice?.toolCalls ?? []
          if (text !== "") {
            lastText = text
            run.output = text
          }
          if (calls.length === 0) return Effect.succeed({ output: text, metadata: { turns: turn } })
          const items = choice?.reasoningItems
          // Long arguments are read below (canonical keys, decoding): let timers run first.
          if (isLongReply(text, calls)) return Effect.flatMap(Effect.yieldNow, () => runCalls(turn, text, calls, items))
          return runCalls(turn, text, calls, items)
        })
      }

      const runCalls = (
        turn: number,
        text: string,
        calls: ReadonlyArray<Model.ToolCall>,
        reasoningItems: ReadonlyArray<Model.ReasoningItem> | undefined
      ): Effect.Effect<Architecture.Outcome, ModelError | BudgetExhausted, Model.Model> => {
        if (maxRepeats > 0) {
          for (const call of calls) {
            const key = new RepeatKey(call.name, call.arguments)
            repeatedCount = repeatedKey !== undefined && key.equals(repeatedKey) ? repeatedCount + 1 : 1
            repeatedKey = key
            if (repeatedCount >= maxRepeats) {
              return Effect.succeed({
                output: lastText,
                interrupted: "repeated_tool_call",
                metadata: { turns: turn, repeatedTool: call.name, repeatedArguments: call.arguments }
              })
            }
          }
        }

        // The provider's reasoning items (OpenAI Responses' encrypted reasoning) go back with the turn they belong to:
        // a reasoning model that does not get them back reasons from scratch on every turn of the loop.
        messages.push(
          reasoningItems !== undefined && reasoningItems.length > 0
            ? { ...Model.assistant(text, calls), reasoningItems }
            : Model.assistant(text, calls)
        )
        // One call runs inline: forking a fiber for it would cost more than the rest of the step.
        if (calls.length === 1) {
          const parsed = maxRepeats > 0 ? repeatedKey!.takeParsed() : undefined
          return Effect.flatMap(runParsed(calls[0]!, parsed), (result) => afterTools(turn)([result]))
        }
        return Effect.flatMap(Effect.forEach(calls, runTool, { concurrency }), afterTools(turn))
      }
      return step(1)
    })
  })

/** ReAct with its defaults: the architecture of an agent made without one. */
export const defaultArchitecture = Architecture.make({ name, program: program({}) })
