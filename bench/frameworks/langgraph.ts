/** LangGraph.js: the prebuilt `createReactAgent` with a fake chat model, `invoke` / `stream`. */
import { AIMessage, HumanMessage, SystemMessage } from "@langchain/core/messages"
import { tool } from "@langchain/core/tools"
import { createReactAgent } from "@langchain/langgraph/prebuilt"
import { z } from "zod"
import { ScriptedChatModel } from "./langchainModel.js"
import { argsAt, finalText, type Framework, instructions, prompt } from "./work.js"

/** Answers tool calls for steps 1..N-1 and the final text at step N, like the other frameworks' mocks. */
const scripted = (steps: number, yieldPerCall: boolean) => {
  let step = 0
  return new ScriptedChatModel(() => {
    step++
    return step < steps
      ? new AIMessage({ content: "", tool_calls: [{ id: `c${step}`, name: "add", args: argsAt(step), type: "tool_call" }] })
      : new AIMessage({ content: finalText })
  }, yieldPerCall)
}

const add = tool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
  name: "add",
  description: "Adds two numbers",
  schema: z.object({ a: z.number(), b: z.number() })
})

export const langgraph: Framework = {
  name: "langgraph",
  run: async (steps, options) => {
    const agent = createReactAgent({ llm: scripted(steps, options.yieldPerCall), tools: [add] })
    const input = { messages: [new SystemMessage(instructions), new HumanMessage(prompt)] }
    // Each step is two graph supersteps (agent, tools): the recursion limit must allow N steps.
    const config = { recursionLimit: 2 * steps + 10 }
    if (!options.stream) {
      const state = await agent.invoke(input, config)
      return String(state.messages.at(-1)?.content ?? "")
    }
    let last = ""
    for await (const update of await agent.stream(input, { ...config, streamMode: "values" })) {
      const message = update.messages.at(-1)
      if (message !== undefined && typeof message.content === "string") last = message.content
    }
    return last
  }
}
