/**
 * OpenAI Agents JS (`@openai/agents`): an `Agent` with one function tool, run by `run(agent, prompt, { maxTurns })`
 * (and `{ stream: true }`, read to the end), on a scripted `Model` of the SDK's own interface (`getResponse` /
 * `getStreamedResponse`): the same turns the other frameworks' mocks answer.
 */
import { Agent, type Model, type ModelRequest, type ModelResponse, type protocol, run, setTracingDisabled, tool, Usage } from "@openai/agents"
import { z } from "zod"
import { argsAt, finalText, type Framework, instructions, prompt, readToEnd, yieldToEventLoop } from "./work.js"

// No tracing exporter: the other frameworks export nothing either.
setTracingDisabled(true)

const add = tool({
  name: "add",
  description: "Adds two numbers",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

const usage = { requests: 1, inputTokens: 10, outputTokens: 10, totalTokens: 20 }

const outputAt = (step: number, steps: number): ModelResponse["output"] =>
  step < steps
    ? [{ type: "function_call", callId: `c${step}`, name: "add", arguments: JSON.stringify(argsAt(step)), status: "completed" }]
    : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: finalText }] }]

class ScriptedModel implements Model {
  step = 0
  constructor(readonly steps: number, readonly yieldPerCall: boolean) {}
  async getResponse(_request: ModelRequest): Promise<ModelResponse> {
    this.step++
    if (this.yieldPerCall) await yieldToEventLoop()
    return { usage: new Usage(usage), output: outputAt(this.step, this.steps), responseId: `r${this.step}` }
  }
  async *getStreamedResponse(_request: ModelRequest): AsyncIterable<protocol.StreamEvent> {
    this.step++
    if (this.yieldPerCall) await yieldToEventLoop()
    const output = outputAt(this.step, this.steps)
    yield { type: "response_started" }
    if (this.step >= this.steps) {
      for (const [i, word] of finalText.split(" ").entries()) yield { type: "output_text_delta", delta: i === 0 ? word : ` ${word}` }
    }
    yield { type: "response_done", response: { id: `r${this.step}`, usage, output: output as never } }
  }
}

export const openaiAgents: Framework = {
  name: "openai-agents",
  run: async (steps, options) => {
    const agent = new Agent({ name: "calculator", instructions, tools: [add], model: new ScriptedModel(steps, options.yieldPerCall) })
    if (!options.stream) return String((await run(agent, prompt, { maxTurns: steps + 1 })).finalOutput)
    const result = await run(agent, prompt, { maxTurns: steps + 1, stream: true })
    await readToEnd(result)
    await result.completed
    return String(result.finalOutput)
  }
}
