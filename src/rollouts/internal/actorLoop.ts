/**
 * The pure parts of an actor-loop step: the prompt with its `<state>` block, and the reading of a model's
 * `<think>`, `<action>` and `<state_update>` blocks. A block that does not parse is recorded, never thrown.
 */
import { Result } from "effect"
import type * as Model from "../../core/Model.js"
import * as StateStore from "../../environment/StateStore.js"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import { extractJson, extractTag, preview } from "../../core/internal/parse.js"

/** Yields to the event loop before a long output is read (see `core/internal/parse.ts`). */
export { yieldBeforeReading } from "../../core/internal/parse.js"

/** `<prompt>\n\n<state>\n<rendered>\n</state>`, or just the prompt when the rendered state is empty. */
export const buildPrompt = (prompt: string, state: StateStore.State): string => {
  const rendered = StateStore.render(state)
  return rendered === "" ? prompt : `${prompt}\n\n<state>\n${rendered}\n</state>`
}

/** What was read from a model's output. */
export interface Parsed {
  readonly think: string | null
  /** The `<action>` JSON as parsed. */
  readonly action: unknown
  /** The command to run: the action's `command` (or the action itself when it is a JSON array). */
  readonly command: { readonly present: boolean; readonly value: unknown }
  /** The `<state_update>` JSON as parsed. */
  readonly stateUpdateJson: unknown
  readonly stateUpdate: StateStore.StateUpdate | undefined
  readonly parseError: "invalid_action_json" | "invalid_state_update_json" | null
  readonly parseErrorDetail: string | null
  /**
   * The model said its episode is done: an empty `<done/>` (or `<done></done>`) outside its `<think>`, `<action>`
   * and `<state_update>` blocks (an unclosed block runs to the end).
   */
  readonly done: boolean
}

// An empty element only: `<done/>`, `<done />` or `<done></done>`; `<done>false</done>` says something else.
const doneTag = /<done\s*\/>|<done>\s*<\/done>/

// The blocks whose text is the model's thinking or data, not its word: a `<done/>` inside them does not count. An
// unclosed one runs to the end of the output (a server strips the stop string that would have closed it).
const quoted = ["think", "action", "state_update"]

/**
 * The output with its `<think>`, `<action>` and `<state_update>` blocks cut out, read left to right (a tag inside a
 * block is the block's text): where `<done/>` counts.
 */
const outsideBlocks = (raw: string): string => {
  let out = ""
  let at = 0
  for (;;) {
    let open = -1
    let tag = ""
    for (const candidate of quoted) {
      const found = raw.indexOf(`<${candidate}>`, at)
      if (found !== -1 && (open === -1 || found < open)) {
        open = found
        tag = candidate
      }
    }
    if (open === -1) return out + raw.slice(at)
    out += raw.slice(at, open)
    const close = raw.indexOf(`</${tag}>`, open)
    if (close === -1) return out
    at = close + tag.length + 3
  }
}

/**
 * Reads the blocks of an output. `<think>` falls back to the server's separate reasoning text. The other blocks
 * are looked for after a closed `<think>` block, so a model that mentions `<action>` while thinking is not taken
 * at its word. A block whose closing tag is missing at the very end is accepted (servers strip stop strings).
 */
export const parseOutput = (raw: string, reasoning: string | undefined): Parsed => {
  const think = extractTag(raw, "think") ?? (reasoning !== undefined && reasoning !== "" ? reasoning : null)
  const thinkEnd = raw.indexOf("</think>")
  const rest = thinkEnd === -1 ? raw : raw.slice(thinkEnd + "</think>".length)
  const errors: Array<"invalid_action_json" | "invalid_state_update_json"> = []
  const details: Array<string> = []

  let action: unknown = null
  let command: Parsed["command"] = { present: false, value: undefined }
  const actionText = extractTag(rest, "action")
  if (actionText !== undefined) {
    const parsed = extractJson(actionText)
    if (Result.isFailure(parsed)) {
      errors.push("invalid_action_json")
      details.push(`<action>: ${parsed.failure}`)
    } else {
      action = parsed.success
      const value = Array.isArray(action)
        ? action
        : typeof action === "object" && action !== null
        ? (action as Record<string, unknown>).command
        : undefined
      command = { present: true, value }
    }
  }

  let stateUpdateJson: unknown = null
  let stateUpdate: StateStore.StateUpdate | undefined
  const updateText = extractTag(rest, "state_update")
  if (updateText !== undefined) {
    const parsed = extractJson(updateText, { expect: "object" })
    if (Result.isFailure(parsed)) {
      errors.push("invalid_state_update_json")
      details.push(`<state_update>: ${parsed.failure}`)
    } else {
      stateUpdateJson = parsed.success
      const decoded = StateStore.decodeUpdate(parsed.success)
      if (Result.isFailure(decoded)) {
        errors.push("invalid_state_update_json")
        details.push(`<state_update>: ${decoded.failure} in ${preview(updateText)}`)
      } else {
        stateUpdate = decoded.success
      }
    }
  }

  return {
    think,
    action,
    command,
    stateUpdateJson,
    stateUpdate,
    parseError: errors[0] ?? null,
    parseErrorDetail: details.length > 0 ? details.join("; ") : null,
    done: doneTag.test(outsideBlocks(raw))
  }
}

/**
 * Why a choice's log-probabilities cannot be paired with its token ids, if they cannot: not as many of each, or a
 * log-probability naming another token than the id at its place. `undefined` when they pair (or one is absent).
 */
export const tokenMismatch = (choice: Model.Choice | undefined): string | undefined => {
  const logprobs = choice?.logprobs
  const ids = choice?.tokenIds
  if (logprobs === undefined || ids === undefined) return undefined
  if (logprobs.length !== ids.length) return `${ids.length} token ids but ${logprobs.length} log-probabilities`
  const at = logprobs.findIndex((entry, i) => entry.tokenId !== undefined && entry.tokenId !== ids[i])
  return at === -1 ? undefined : `token ${at} is id ${ids[at]} but its log-probability names id ${logprobs[at]!.tokenId}`
}

/**
 * The token data of a step's answer, packed for its record: the prompt's ids and log-probabilities, the choice's ids
 * (`tokenIds`, else the ids named by its log-probabilities when every token has one) and log-probabilities. Only
 * what the server sent; `undefined` when it sent none. Log-probabilities that do not pair with the ids
 * (`tokenMismatch`) are left out, the ids kept: a trainer would otherwise read one token's log-probability as
 * another's.
 */
export const tokensOf = (response: Model.Response, choice: Model.Choice | undefined): TrajectoryStore.StepTokens | undefined => {
  const logprobs = choice?.logprobs
  const namedIds = logprobs !== undefined && logprobs.length > 0 && logprobs.every((entry) => entry.tokenId !== undefined)
    ? logprobs.map((entry) => entry.tokenId!)
    : undefined
  return TrajectoryStore.encodeTokens({
    promptIds: response.promptTokenIds,
    completionIds: choice?.tokenIds ?? namedIds,
    completionLogprobs: tokenMismatch(choice) === undefined ? logprobs?.map((entry) => entry.logprob) : undefined,
    promptLogprobs: response.promptLogprobs
  })
}
