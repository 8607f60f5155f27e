/**
 * The Vercel AI SDK 7 (`ai@7`, installed as `ai-v7`): its `ToolLoopAgent` (`generate` / `stream`) with its
 * `MockLanguageModelV4` and `stopWhen: stepCountIs(N)`.
 */
import { simulateReadableStream, stepCountIs, tool, ToolLoopAgent } from "ai-v7"
import { MockLanguageModelV4 } from "ai-v7/test"
import { z } from "zod"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 10, text: 10, reasoning: undefined }
}

const add = tool({
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

type StreamPart = Parameters<typeof simulateReadableStream<unknown>>[0]["chunks"][number]

export const aiSdk7: Framework = {
  name: "ai-sdk-7",
  run: async (steps, options) => {
    let step = 0
    const model = new MockLanguageModelV4({
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
        const chunks: Array<StreamPart> = step < steps
          ? [
            { type: "stream-start", warnings: [] },
            { type: "tool-call", toolCallId: `c${step}`, toolName: "add", input: JSON.stringify(argsAt(step)) },
            { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage }
          ]
          : [
            { type: "stream-start", warnings: [] },
            { type: "text-start", id: "t" },
            ...finalText.split(" ").map((word, i) => ({ type: "text-delta", id: "t", delta: i === 0 ? word : ` ${word}` })),
            { type: "text-end", id: "t" },
            { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage }
          ]
        return { stream: simulateReadableStream({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) } as never
      }
    })
    const agent = new ToolLoopAgent({ model, instructions, tools: { add }, stopWhen: stepCountIs(steps) })
    if (!options.stream) return (await agent.generate({ prompt })).text
    const result = await agent.stream({ prompt })
    for await (const _part of result.fullStream) {
      // read to the end
    }
    return await result.text
  }
}
