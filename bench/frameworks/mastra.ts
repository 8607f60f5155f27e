/**
 * Mastra (`@mastra/core` 1.x): an `Agent` with one `createTool` tool, `generate` / `stream` (read to the end) with
 * `maxSteps: N`, on the AI SDK's `MockLanguageModelV3` (a model kind Mastra takes as is) answering the same turns.
 */
import { Agent } from "@mastra/core/agent"
import { createTool } from "@mastra/core/tools"
import { simulateReadableStream } from "ai"
import { MockLanguageModelV3 } from "ai/test"
import { z } from "zod"
import { mockTurns } from "./aiSdkMock.js"
import { type Framework, instructions, prompt, readToEnd } from "./work.js"

const add = createTool({
  id: "add",
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

export const mastra: Framework = {
  name: "mastra",
  run: async (steps, options) => {
    const model = new MockLanguageModelV3(mockTurns(steps, options.yieldPerCall, simulateReadableStream) as never)
    const agent = new Agent({ id: "calculator", name: "calculator", instructions, model, tools: { add } })
    if (!options.stream) return (await agent.generate(prompt, { maxSteps: steps })).text
    const result = await agent.stream(prompt, { maxSteps: steps })
    await readToEnd(result.fullStream)
    return await result.text
  }
}
