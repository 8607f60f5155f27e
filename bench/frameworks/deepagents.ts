/**
 * LangChain's `deepagents` (`createDeepAgent`) on the deep-agent benchmark's work (`deepWork.ts`): `invoke` /
 * `stream` (values, read to the end) on its default in-memory `StateBackend` (the files live in the graph's state),
 * with LangChain's `todoListMiddleware` for `write_todos` (deepagents 1.14 adds it only for Codex models) and its
 * defaults otherwise (file tools, the `task` tool and its general-purpose sub-agent, summarisation, patching of
 * dangling tool calls). The agent is made once per N and shared by the sessions, as valet's is.
 *
 * The model is a `BaseChatModel` answering from the script, as `langgraph.ts` does. LangChain's own fakes do more
 * than a scripted model should: `FakeToolCallingModel` (langchain) answers with the whole conversation joined as its
 * text, and `fakeModel()` (`@langchain/core/testing`) derives its text from the input and records every call — work
 * and memory that would count against deepagents. This one reads the step from the last message (the id of the tool
 * call it answers), so it keeps nothing between calls and serves concurrent sessions.
 */
import { AIMessage, type BaseMessage, HumanMessage, ToolMessage } from "@langchain/core/messages"
import { createDeepAgent } from "deepagents"
import { type AgentMiddleware, todoListMiddleware } from "langchain"
import { type Call, callAt, type Check, fileName, finalText, instructions, prompt } from "./deepWork.js"
import { ScriptedChatModel } from "./langchainModel.js"
import type { Framework } from "./work.js"

/** A call as deepagents' tools take it: absolute paths, `file_path`, `completed` for `done`. */
const toolCall = (call: Call, id: string) => {
  const args = (() => {
    switch (call.tool) {
      case "write_todos":
        return { todos: call.todos.map((todo) => ({ content: todo.content, status: todo.status === "done" ? "completed" : todo.status })) }
      case "write_file":
        return { file_path: `/${call.path}`, content: call.content }
      case "read_file":
        return { file_path: `/${call.path}` }
      case "edit_file":
        return { file_path: `/${call.path}`, old_string: call.oldString, new_string: call.newString }
      case "ls":
        return { path: "/" }
    }
  })()
  return { id, name: call.tool, args, type: "tool_call" as const }
}

/** Answers step k+1 after the result of the tool call `c<k>`; step 1 otherwise. */
const scripted = (steps: number, yieldPerCall: boolean) =>
  new ScriptedChatModel((messages) => {
    const last = messages.at(-1)
    const step = last !== undefined && ToolMessage.isInstance(last) ? Number(last.tool_call_id.slice(1)) + 1 : 1
    const call = callAt(step, steps)
    return call === undefined
      ? new AIMessage({ content: finalText })
      : new AIMessage({ content: "", tool_calls: [toolCall(call, `c${step}`)] })
  }, yieldPerCall)

const make = (steps: number, yieldPerCall: boolean) =>
  createDeepAgent({
    model: scripted(steps, yieldPerCall),
    systemPrompt: instructions,
    // Its type names its tool's zod schema, which this repo's `exactOptionalPropertyTypes` will not match with the
    // `ServerTool` of deepagents' parameter; the value is a LangChain middleware, what deepagents' docs say to add.
    middleware: [todoListMiddleware() as AgentMiddleware]
  })

type Agent = ReturnType<typeof make>
const agents = new Map<string, Agent>()
const agentFor = (steps: number, yieldPerCall: boolean): Agent => {
  const key = `${steps}/${yieldPerCall}`
  let agent = agents.get(key)
  if (agent === undefined) {
    agent = make(steps, yieldPerCall)
    agents.set(key, agent)
  }
  return agent
}

const textOf = (message: BaseMessage | undefined): string => (message !== undefined && typeof message.content === "string" ? message.content : "")

export const deepagents: Framework = {
  name: "deepagents",
  run: async (steps, options) => {
    const agent = agentFor(steps, options.yieldPerCall)
    const input = { messages: [new HumanMessage(prompt)] }
    if (!options.stream) return textOf((await agent.invoke(input)).messages.at(-1))
    let last = ""
    for await (const state of await agent.stream(input, { streamMode: "values" })) last = textOf(state.messages.at(-1))
    return last
  }
}

/**
 * One session of `steps`, then what it did and left: the answer, each tool result (name, error or not, text), the
 * file and the plan — the benchmark checks that the work was done, the same on both sides.
 */
export const check = async (steps: number): Promise<Check> => {
  const state = await agentFor(steps, false).invoke({ messages: [new HumanMessage(prompt)] })
  const file = (state.files as Record<string, { content: string | Array<string> } | undefined>)[`/${fileName}`]
  const results = state.messages.filter((message) => ToolMessage.isInstance(message)).map((message) => ({
    tool: message.name ?? "",
    isError: message.status === "error",
    content: typeof message.content === "string" ? message.content : JSON.stringify(message.content)
  }))
  return {
    output: textOf(state.messages.at(-1)),
    results,
    file: file === undefined ? "" : Array.isArray(file.content) ? file.content.join("\n") : file.content,
    plan: JSON.stringify((state as { todos?: unknown }).todos)
  }
}
