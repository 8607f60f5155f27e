/** The floor: a hand-written async loop doing the same work with no framework. */
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

interface Message {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string
  readonly toolCalls?: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly toolCallId?: string
}

const add = ({ a, b }: { a: number; b: number }): number => a + b

export const plain: Framework = {
  name: "plain loop",
  run: async (steps, options) => {
    let step = 0
    const model = async (_messages: ReadonlyArray<Message>): Promise<Message> => {
      step++
      if (options.yieldPerCall) await yieldToEventLoop()
      if (step < steps) {
        return { role: "assistant", content: "", toolCalls: [{ id: `c${step}`, name: "add", arguments: JSON.stringify(argsAt(step)) }] }
      }
      return { role: "assistant", content: finalText }
    }
    const messages: Array<Message> = [{ role: "system", content: instructions }, { role: "user", content: prompt }]
    for (;;) {
      const reply = await model(messages.slice())
      messages.push(reply)
      if (reply.toolCalls === undefined || reply.toolCalls.length === 0) return reply.content
      for (const call of reply.toolCalls) {
        const result = add(JSON.parse(call.arguments))
        messages.push({ role: "tool", content: String(result), toolCallId: call.id })
      }
    }
  }
}
