/**
 * valet's prompt-cache breakpoints ↔ `effect/ai` prompt options. `effect/ai` has no provider-neutral breakpoint: its
 * Anthropic and OpenRouter providers each read one under their own key (`options.anthropic.cacheControl`,
 * `options.openrouter.cacheControl`, both `{ type: "ephemeral" }`, declared by module augmentation of
 * `Prompt.TextPartOptions` / `SystemMessageOptions`), so a valet breakpoint goes out under both and either comes back.
 */
import type { Prompt } from "effect/ai"
import type * as Model from "../../../core/Model.js"

/** The provider keys under which `effect/ai`'s providers read a cache breakpoint. */
const providerKeys = ["anthropic", "openrouter"] as const

/** The `effect/ai` options of a part or message marked with `cacheControl` (none when unmarked). */
export const cacheOptions = (cacheControl: Model.CacheControl | undefined): { readonly options?: Prompt.ProviderOptions } => {
  if (cacheControl === undefined) return {}
  const options: Record<string, { cacheControl: { type: Model.CacheControl } }> = {}
  for (const key of providerKeys) options[key] = { cacheControl: { type: cacheControl } }
  return { options }
}

/** The breakpoint an `effect/ai` part or message carries in its options, under either provider's key. */
export const cacheControlOf = (options: Prompt.ProviderOptions): Model.CacheControl | undefined => {
  for (const key of providerKeys) {
    const entry = options[key]
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) continue
    const control = (entry as { readonly cacheControl?: unknown }).cacheControl
    if (typeof control === "object" && control !== null && (control as { readonly type?: unknown }).type === "ephemeral") {
      return "ephemeral"
    }
  }
  return undefined
}
