/**
 * The scripted chat model of the LangChain-based benchmarks (LangGraph.js, deepagents): a `BaseChatModel` whose
 * answer is `reply(messages)`, yielding to the event loop first when asked, so both frameworks' mocks cost the same.
 */
import type { CallbackManagerForLLMRun } from "@langchain/core/callbacks/manager"
import { BaseChatModel } from "@langchain/core/language_models/chat_models"
import type { AIMessage, BaseMessage } from "@langchain/core/messages"
import type { ChatResult } from "@langchain/core/outputs"
import { yieldToEventLoop } from "./work.js"

export class ScriptedChatModel extends BaseChatModel {
  constructor(readonly reply: (messages: ReadonlyArray<BaseMessage>) => AIMessage, readonly yieldPerCall: boolean) {
    super({})
  }
  _llmType(): string {
    return "scripted"
  }
  override bindTools(): this {
    return this
  }
  async _generate(messages: Array<BaseMessage>, _options: this["ParsedCallOptions"], _run?: CallbackManagerForLLMRun): Promise<ChatResult> {
    if (this.yieldPerCall) await yieldToEventLoop()
    const message = this.reply(messages)
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] }
  }
}
