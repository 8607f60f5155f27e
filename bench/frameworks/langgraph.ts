/** LangGraph.js: the prebuilt `createReactAgent` with a fake chat model, `invoke` / `stream`. */
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager"
import { BaseChatModel } from "@langchain/core/language_models/chat_models"
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage } from "@langchain/core/messages"
import type { ChatResult } from "@langchain/core/outputs"
import { tool } from "@langchain/core/tools"
import { createReactAgent } from "@langchain/langgraph/prebuilt"
import { z } from "zod"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

/** Answers tool calls for steps 1..N-1 and the final text at step N, like the other frameworks' mocks. */
class ScriptedChatModel extends BaseChatModel {
  step = 0
  constructor(readonly steps: number, readonly yieldPerCall: boolean) {
    super({})
  }
  _llmType(): string {
    return "scripted"
  }
  override bindTools(): this {
    return this
  }
  async _generate(_messages: Array<BaseMessage>, _options: this["ParsedCallOptions"], _run?: CallbackManagerForLLMRun): Promise<ChatResult> {
    this.step++
    if (this.yieldPerCall) await yieldToEventLoop()
    const message = this.step < this.steps
      ? new AIMessage({ content: "", tool_calls: [{ id: `c${this.step}`, name: "add", args: argsAt(this.step), type: "tool_call" }] })
      : new AIMessage({ content: finalText })
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] }
  }
}

const add = tool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
  name: "add",
  description: "Adds two numbers",
  schema: z.object({ a: z.number(), b: z.number() })
})

export const langgraph: Framework = {
  name: "langgraph",
  run: async (steps, options) => {
    const agent = createReactAgent({ llm: new ScriptedChatModel(steps, options.yieldPerCall), tools: [add] })
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
