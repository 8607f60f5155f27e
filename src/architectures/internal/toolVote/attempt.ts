/**
 * One ToolVote attempt: the Python tool loop of DESIGN §5.2 as an architecture, run as a sub-agent so each attempt
 * has its own session, events and model calls. Python runs through `Sandbox` in a workspace that lives as long as
 * the attempt (files a program writes are there for the next one); interrupting the attempt kills its process and
 * removes the workspace.
 */
import { Effect } from "effect"
import { ArchitectureFailed } from "../../../core/AgentError.js"
import * as Architecture from "../../../core/Architecture.js"
import * as Model from "../../../core/Model.js"
import * as Sandbox from "../../../environment/Sandbox.js"
import type { RequestOptions } from "../sampling.js"
import * as Protocol from "./protocol.js"

/** What every attempt of a run shares. */
export interface Config {
  /** The system prompt, placeholders filled. */
  readonly systemPrompt: string
  readonly maxTurns: number
  readonly pythonTimeoutMs: number
  readonly maxCodeChars: number
  readonly maxOutputChars: number
  readonly request: RequestOptions | undefined
}

const sandboxFailed = (attempt: number) => (error: Sandbox.SandboxError) =>
  new ArchitectureFailed({ architecture: "tool_vote", message: `attempt ${attempt}: the sandbox failed: ${error.message}` })

/**
 * The architecture of attempt `attempt` (from 1). With a `seed` in the request options, attempt k uses seed + k − 1,
 * so attempts differ yet a run can be repeated.
 */
export const architecture = (config: Config, attempt: number): Architecture.Architecture<Model.Model | Sandbox.Sandbox> => {
  const request: RequestOptions | undefined = config.request?.seed !== undefined
    ? { ...config.request, seed: config.request.seed + attempt - 1 }
    : config.request
  return Architecture.make({
    name: "tool_vote_attempt",
    program: (input) =>
      Effect.scoped(Effect.gen(function*() {
        const workspace = yield* Sandbox.workspace(`tool_vote_attempt_${attempt}`).pipe(Effect.mapError(sandboxFailed(attempt)))
        const instructions = input.agent.instructions
        const messages: Array<Model.Message> = [
          Model.system(instructions === "" ? config.systemPrompt : `${config.systemPrompt}\n\n${instructions}`),
          ...input.history,
          Model.user(input.prompt)
        ]
        let pythonRuns = 0
        for (let turn = 1; turn <= config.maxTurns; turn++) {
          const response = yield* Architecture.generate({ ...request, messages: messages.slice() }, { step: `tool_vote.turn_${turn}` })
          const text = Model.text(response)
          const parsed = Protocol.parseTurn(text)
          if (parsed._tag === "Final") {
            yield* Architecture.setOutput(parsed.answer)
            return { output: parsed.answer, metadata: { answer: parsed.answer, turns: turn, pythonRuns } }
          }
          messages.push(Model.assistant(text))
          if (parsed._tag === "Python") {
            pythonRuns++
            if (parsed.code.length > config.maxCodeChars) {
              yield* Architecture.progress("tool_vote.python_ran", { turn, ran: false, error: "code_too_long", codeChars: parsed.code.length })
              messages.push(Model.user(Protocol.outputMessage(Protocol.tooLong(parsed.code.length, config.maxCodeChars))))
              continue
            }
            const result = yield* Sandbox.run(workspace, {
              command: ["python3", "-c", parsed.code],
              timeoutMs: config.pythonTimeoutMs,
              diff: false
            }).pipe(Effect.mapError(sandboxFailed(attempt)))
            const body = Protocol.outputBody(result, config.pythonTimeoutMs, config.maxOutputChars)
            yield* Architecture.progress("tool_vote.python_ran", {
              turn,
              ran: result.error === undefined || result.error === "timeout",
              exitCode: result.exitCode,
              timedOut: result.timedOut,
              durationMs: result.durationMs,
              isolation: result.isolation,
              ...(result.error !== undefined ? { error: result.error } : {}),
              output: body
            })
            messages.push(Model.user(Protocol.outputMessage(body)))
          } else if (parsed._tag === "Rejected") {
            messages.push(Model.user(Protocol.rejectedMessage(parsed.reason)))
          } else {
            messages.push(Model.user(Protocol.reminderMessage))
          }
        }
        return {
          output: "",
          interrupted: "max_turns_exceeded",
          metadata: { answer: null, turns: config.maxTurns, pythonRuns }
        }
      }))
  })
}
