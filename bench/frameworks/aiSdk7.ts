/**
 * The Vercel AI SDK 7 (`ai@7`, installed as `ai-v7`): its `ToolLoopAgent` (`generate` / `stream`) with its
 * `MockLanguageModelV4` and `stopWhen: stepCountIs(N)`.
 */
import { simulateReadableStream, stepCountIs, tool, ToolLoopAgent } from "ai-v7"
import { MockLanguageModelV4 } from "ai-v7/test"
import { z } from "zod"
import { mockTurns } from "./aiSdkMock.js"
import { type Framework, instructions, prompt, readToEnd } from "./work.js"

const add = tool({
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

export const aiSdk7: Framework = {
  name: "ai-sdk-7",
  run: async (steps, options) => {
    const model = new MockLanguageModelV4(mockTurns(steps, options.yieldPerCall, simulateReadableStream) as never)
    const agent = new ToolLoopAgent({ model, instructions, tools: { add }, stopWhen: stepCountIs(steps) })
    if (!options.stream) return (await agent.generate({ prompt })).text
    const result = await agent.stream({ prompt })
    await readToEnd(result.fullStream)
    return await result.text
  }
}
