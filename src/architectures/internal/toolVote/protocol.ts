/**
 * ToolVote's text protocol (DESIGN §5.2): the model replies with `{"tool":"python","code":"..."}` to run Python
 * or `FINAL: <answer>` to finish. A final answer is looked for first (the last `FINAL:` with something after it);
 * otherwise the JSON object between the first `{` and the last `}` must name the `python` tool and carry
 * non-empty `code`. Anything else gets the model called again, with a reminder of the protocol. The request is
 * looked for in the first `maxJsonChars` characters of a reply, and JSON nested deeper than `maxJsonDepth` is
 * refused before it is parsed (see `core/internal/parse.ts`): the reading is linear in the reply.
 */
import { Result, Schema } from "effect"
import { describeIssue } from "../../../core/internal/decode.js"
import type * as Sandbox from "../../../environment/Sandbox.js"
import { finalAnswer, maxJsonChars, parseJson } from "../../../core/internal/parse.js"

/** What one model reply asks for. */
export type Turn =
  | { readonly _tag: "Final"; readonly answer: string }
  | { readonly _tag: "Python"; readonly code: string }
  /** A tool request that cannot be run: another tool, no code, JSON that does not parse. */
  | { readonly _tag: "Rejected"; readonly reason: string }
  | { readonly _tag: "Neither" }

const ToolRequest = Schema.Struct({ tool: Schema.String, code: Schema.optional(Schema.Unknown) })
const decodeToolRequest = Schema.decodeUnknownResult(ToolRequest)

/** Reads one reply of the model. */
export const parseTurn = (text: string): Turn => {
  const answer = finalAnswer(text, "last")
  if (answer !== undefined) return { _tag: "Final", answer }
  const scanned = text.length > maxJsonChars ? text.slice(0, maxJsonChars) : text
  const start = scanned.indexOf("{")
  const end = scanned.lastIndexOf("}")
  if (start === -1 || end < start) return { _tag: "Neither" }
  const parsed = parseJson(scanned.slice(start, end + 1))
  if (Result.isFailure(parsed)) return { _tag: "Rejected", reason: `the tool request is not valid JSON (${parsed.failure})` }
  const json = parsed.success
  const request = decodeToolRequest(json)
  if (Result.isFailure(request)) {
    return {
      _tag: "Rejected",
      reason: `a tool request is an object with "tool" and "code": ${describeIssue(request.failure.issue, json)}`
    }
  }
  const { code, tool } = request.success
  if (tool !== "python") return { _tag: "Rejected", reason: `the tool ${JSON.stringify(tool)} is not available; only "python" is` }
  if (typeof code !== "string" || code.trim() === "") {
    return { _tag: "Rejected", reason: `"code" must be a non-empty string of Python source` }
  }
  return { _tag: "Python", code }
}

/** The default system prompt; placeholder `{timeout_seconds}`. */
export const defaultSystemPrompt = `You solve the problem you are given, using Python when it helps.
To run Python, reply with only a JSON object: {"tool": "python", "code": "<Python source>"}
The program's output comes back to you as PYTHON_OUTPUT; use print() to see values. Each program runs on its own \
(nothing is kept between programs) and is stopped after {timeout_seconds} seconds.
When you know the answer, reply with one line: FINAL: <answer>`

const continuation = "\n\nContinue. If you need python again, emit a new tool JSON object."

/** The user message carrying a program's output (or an error line) back to the model. */
export const outputMessage = (body: string): string => `PYTHON_OUTPUT:\n${body}${continuation}`

/** The reply to a tool request that was not run. */
export const rejectedMessage = (reason: string): string =>
  `ERROR: ${reason}. To run Python reply with only {"tool": "python", "code": "..."}; to finish reply with FINAL: <answer>.`

/** The reply to a turn that is neither a final answer nor a tool request. */
export const reminderMessage =
  `Reply with only {"tool": "python", "code": "..."} to run Python, or with a line FINAL: <answer> to finish.`

/** The error body for code over the size limit (the code is not run). */
export const tooLong = (length: number, max: number): string =>
  `ERROR: the code is ${length} characters long; the limit is ${max}. Write a shorter program.`

/**
 * The body of a `PYTHON_OUTPUT:` message: stdout then stderr; a timeout adds an error line; no output at all gets a
 * warning to use print(). Cut to `maxChars` with a note.
 */
export const outputBody = (result: Sandbox.SandboxResult, timeoutMs: number, maxChars: number): string => {
  const stdout = result.stdout
  const stderr = result.stderr
  let body = stdout !== "" && stderr !== "" && !stdout.endsWith("\n") ? `${stdout}\n${stderr}` : stdout + stderr
  body = body.replace(/\s+$/, "")
  if (result.timedOut) {
    body += `${body === "" ? "" : "\n"}ERROR: the program timed out after ${timeoutMs / 1000} seconds and was stopped.`
  } else if (body === "") {
    return "[WARNING] The program printed nothing. Use print() to show the values you need."
  }
  if (body.length > maxChars) {
    body = `${body.slice(0, maxChars)}\n[… ${body.length - maxChars} more characters cut]`
  }
  return body
}
