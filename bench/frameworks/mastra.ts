/**
 * Mastra (`@mastra/core` 1.x): an `Agent` with one `createTool` tool, `generate` / `stream` (read to the end) with
 * `maxSteps: N`, on the AI SDK's `MockLanguageModelV3` (a model kind Mastra takes as is) answering the same turns.
 */
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider"
import { Agent } from "@mastra/core/agent"
import { createTool } from "@mastra/core/tools"
import { simulateReadableStream } from "ai"
import { MockLanguageModelV3 } from "ai/test"
import { z } from "zod"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 10, text: 10, reasoning: undefined }
}

const add = createTool({
  id: "add",
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

export const mastra: Framework = {
  name: "mastra",
  run: async (steps, options) => {
    let step = 0
    const model = new MockLanguageModelV3({
      doGenerate: async () => {
        step++
        if (options.yieldPerCall) await yieldToEventLoop()
        return step < steps
          ? {
            content: [{ type: "tool-call", toolCallId: `c${step}`, toolName: "add", input: JSON.stringify(argsAt(step)) }],
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage,
            warnings: []
          }
          : { content: [{ type: "text", text: finalText }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }
      },
      doStream: async () => {
        step++
        if (options.yieldPerCall) await yieldToEventLoop()
        const chunks: Array<LanguageModelV3StreamPart> = step < steps
          ? [
            { type: "stream-start", warnings: [] },
            { type: "tool-call", toolCallId: `c${step}`, toolName: "add", input: JSON.stringify(argsAt(step)) },
            { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage }
          ]
          : [
            { type: "stream-start", warnings: [] },
            { type: "text-start", id: "t" },
            ...finalText.split(" ").map((word, i): LanguageModelV3StreamPart => ({ type: "text-delta", id: "t", delta: i === 0 ? word : ` ${word}` })),
            { type: "text-end", id: "t" },
            { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage }
          ]
        return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) }
      }
    })
    const agent = new Agent({ id: "calculator", name: "calculator", instructions, model, tools: { add } })
    if (!options.stream) return (await agent.generate(prompt, { maxSteps: steps })).text
    const result = await agent.stream(prompt, { maxSteps: steps })
    for await (const _part of result.fullStream) {
      // read to the end
    }
    return await result.text
  }
}
