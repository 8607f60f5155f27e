import type { Framework } from "./work.js"

/**
 * Every framework measured, by its command-line name, loaded on demand: a worker process imports only the framework
 * it measures, so no framework runs beside another's modules (a heap grown by Mastra's imports makes every GC of a
 * valet run dearer).
 */
export const frameworks: Record<string, () => Promise<Framework>> = {
  valet: () => import("./valet.js").then((m) => m.valet),
  "valet-fallback": () => import("./valet.js").then((m) => m.valetFallback),
  "valet-fallback-once": () => import("./valet.js").then((m) => m.valetFallbackOnce),
  "valet-guardrails": () => import("./valet.js").then((m) => m.valetGuardrails),
  "valet-parts": () => import("./valet.js").then((m) => m.valetParts),
  "ai-sdk": () => import("./aiSdk.js").then((m) => m.aiSdk),
  "ai-sdk-7": () => import("./aiSdk7.js").then((m) => m.aiSdk7),
  "openai-agents": () => import("./openaiAgents.js").then((m) => m.openaiAgents),
  mastra: () => import("./mastra.js").then((m) => m.mastra),
  "effect-ai": () => import("./effectAi.js").then((m) => m.effectAi),
  langgraph: () => import("./langgraph.js").then((m) => m.langgraph),
  "valet-deep": () => import("./valetDeep.js").then((m) => m.valetDeep),
  deepagents: () => import("./deepagents.js").then((m) => m.deepagents),
  plain: () => import("./plain.js").then((m) => m.plain)
}
