import { aiSdk } from "./aiSdk.js"
import { aiSdk7 } from "./aiSdk7.js"
import { effectAi } from "./effectAi.js"
import { langgraph } from "./langgraph.js"
import { mastra } from "./mastra.js"
import { openaiAgents } from "./openaiAgents.js"
import { plain } from "./plain.js"
import { valet } from "./valet.js"
import type { Framework } from "./work.js"

/** Every framework measured, by its command-line name. */
export const frameworks: Record<string, Framework> = {
  valet,
  "ai-sdk": aiSdk,
  "ai-sdk-7": aiSdk7,
  "openai-agents": openaiAgents,
  mastra,
  "effect-ai": effectAi,
  langgraph,
  plain
}
