/**
 * The turns of the benchmark work as an AI SDK mock model answers them (`doGenerate` / `doStream` of
 * `MockLanguageModelV3` and `V4`, whose results have the same shape): shared by the AI SDK 6 and 7 and Mastra
 * adapters, each of which gives it its own `simulateReadableStream`.
 */
import { argsAt, finalText, yieldToEventLoop } from "./work.js"

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 10, text: 10, reasoning: undefined }
}

/** `doGenerate` and `doStream` answering step 1..N-1 with a call to `add`, step N with the final text. */
export const mockTurns = <S>(
  steps: number,
  yieldPerCall: boolean,
  simulate: (options: { chunks: Array<unknown>; initialDelayInMs: null; chunkDelayInMs: null }) => S
) => {
  let step = 0
  const next = async () => {
    step++
    if (yieldPerCall) await yieldToEventLoop()
    return step
  }
  return {
    doGenerate: async () =>
      (await next()) < steps
        ? {
          content: [{ type: "tool-call" as const, toolCallId: `c${step}`, toolName: "add", input: JSON.stringify(argsAt(step)) }],
          finishReason: { unified: "tool-calls" as const, raw: "tool_calls" },
          usage,
          warnings: []
        }
        : { content: [{ type: "text" as const, text: finalText }], finishReason: { unified: "stop" as const, raw: "stop" }, usage, warnings: [] },
    doStream: async () => {
      const chunks = (await next()) < steps
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
      return { stream: simulate({ chunks, initialDelayInMs: null, chunkDelayInMs: null }) }
    }
  }
}
