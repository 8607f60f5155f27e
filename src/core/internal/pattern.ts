/**
 * A regular expression written in `valet.yaml` (an approval rule's `matches`, a redactor's `patterns`): refused on its
 * line when JavaScript cannot compile it, with the engine's own reason.
 */
import { Schema } from "effect"

export const Pattern = Schema.String.check(Schema.makeFilter((pattern: string) => {
  try {
    new RegExp(pattern)
    return true
  } catch (error) {
    return `must be a regular expression: ${error instanceof Error ? error.message : String(error)}`
  }
}))
