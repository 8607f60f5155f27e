/** The Vercel AI SDK 6: `generateText` / `streamText` with its `MockLanguageModelV3` and `stopWhen: stepCountIs(N)`. */
import { generateText, simulateReadableStream, stepCountIs, streamText, tool } from "ai"
import { MockLanguageModelV3 } from "ai/test"
import { z } from "zod"
import { mockTurns } from "./aiSdkMock.js"
import { type Framework, instructions, prompt, readToEnd } from "./work.js"

const add = tool({
  description: "Adds two numbers",
  inputSchema: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => a + b
})

export const aiSdk: Framework = {
  name: "ai-sdk",
  run: async (steps, options) => {
    const model = new MockLanguageModelV3(mockTurns(steps, options.yieldPerCall, simulateReadableStream) as never)
    const settings = { model, system: instructions, prompt, tools: { add }, stopWhen: stepCountIs(steps) }
    if (!options.stream) return (await generateText(settings)).text
    const result = streamText(settings)
    await readToEnd(result.fullStream)
    return await result.text
  }
}
