import { aiSdk } from "./aiSdk.js"
import { langgraph } from "./langgraph.js"
import { plain } from "./plain.js"
import { valet } from "./valet.js"
import type { Framework } from "./work.js"

/** Every framework measured, by its command-line name. */
export const frameworks: Record<string, Framework> = { valet, "ai-sdk": aiSdk, langgraph, plain }
