/**
 * Tool-call arguments between the two worlds: valet keeps the JSON text exactly as the model wrote it, `effect/ai`
 * keeps the parsed value.
 */

/** The params of a tool call: its JSON, `{}` for an empty text, the text itself when it is not JSON (then the tool's schema refuses it, with an error naming it). */
export const paramsOf = (text: string): unknown => {
  if (text.trim() === "") return {}
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}
